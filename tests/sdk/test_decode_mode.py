"""Agent(decode=DecodeConfig(mode=...)): the mode is honoured on every step, or refused where the routing given
with it says otherwise -- never silently replaced by the routing's."""

import pytest
from pydantic import BaseModel

from agentkit.config import DecodeConfig
from agentkit.errors import UserError
from agentkit.sdk import Agent, FunctionModel, RoutingPolicy


class City(BaseModel):
    name: str


def _fn(messages, info):
    if info.step == "plan":
        return {"steps": ["name the city"]}
    return {"name": "Paris"} if info.template is not None else "Paris."


@pytest.mark.parametrize("mode", ["diffusion", "verify"])
def test_decode_mode_is_honoured_on_every_step(mode):
    model = FunctionModel(_fn)
    agent = Agent(model, output_type=City, plan=True, decode=DecodeConfig(mode=mode))
    assert agent.run_sync("Where?").output == City(name="Paris")
    assert model.calls and {c.mode for c in model.calls} == {mode}
    assert {c.step for c in model.calls} >= {"plan", "extract"}
    reply = FunctionModel(_fn)
    Agent(reply, decode=DecodeConfig(mode=mode)).run_sync("Where?")
    assert [c.mode for c in reply.calls] == [mode]


def test_a_run_mode_still_overrides_the_agents():
    model = FunctionModel(_fn)
    Agent(model, output_type=City, decode=DecodeConfig(mode="diffusion")).run_sync("Where?", mode="ar")
    assert {c.mode for c in model.calls} == {"ar"}


def test_a_contradicting_routing_is_refused():
    with pytest.raises(UserError, match="disagree"):
        Agent(FunctionModel(_fn), decode=DecodeConfig(mode="diffusion"), routing=RoutingPolicy.force("verify"))
    agent = Agent(FunctionModel(_fn), decode=DecodeConfig(mode="verify"), routing=RoutingPolicy.force("verify"))
    assert agent.routing == RoutingPolicy.force("verify")


def test_the_default_mode_leaves_the_routing_alone():
    agent = Agent(FunctionModel(_fn), routing=RoutingPolicy.force("diffusion"))
    assert agent.routing.extract == "diffusion"
    assert Agent(FunctionModel(_fn)).routing == RoutingPolicy()
