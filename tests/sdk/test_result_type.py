"""``result_type=`` (pydantic-ai's earlier name) is refused with a typed error that names ``output_type``."""

import pytest
from pydantic import BaseModel

from agentkit.errors import UserError
from agentkit.sdk import Agent, TestModel


class City(BaseModel):
    name: str


def test_agent_result_type_names_output_type():
    with pytest.raises(UserError, match="output_type=") as e:
        Agent(TestModel(), result_type=City)
    assert e.value.param == "result_type"


def test_run_result_type_names_output_type():
    with pytest.raises(UserError, match="output_type="):
        Agent(TestModel()).run_sync("hi", result_type=City)
    assert Agent(TestModel(), output_type=City).run_sync("hi").output.name  # the right name still works
