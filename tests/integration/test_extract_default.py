"""``extract`` on the embedded default model: the four texts of issue 37 give every field in the default mode."""

import pytest
from pydantic import BaseModel

from agentkit.sdk import extract

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("one_thread")]


class Person(BaseModel):
    name: str
    age: int
    city: str


# the texts a new user tried (issue 37): the default mode wrote age 22 and a made-up city for 4 of these 12 fields
CASES = [
    ("Maria Lopez, 41, moved to Lisbon last year.", Person(name="Maria Lopez", age=41, city="Lisbon")),
    ("Extract: Ana, 31, Lisbon", Person(name="Ana", age=31, city="Lisbon")),
    ("John Smith is 52 and lives in Boston.", Person(name="John Smith", age=52, city="Boston")),
    ("Our new hire, Kenji Sato (29), relocates from Osaka next month.", Person(name="Kenji Sato", age=29, city="Osaka")),
]


def test_the_four_issue_texts_give_12_of_12_fields_in_the_default_mode(default_engine):
    got = [extract(Person, text, model=default_engine) for text, _ in CASES]
    assert got == [want for _, want in CASES]
