import asyncio
from typing import Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

from agentkit.errors import UserError
from agentkit.sdk import Tool, tool
from agentkit.sdk._docstring import parse_docstring
from agentkit.sdk._tools import as_tools, to_observation_text


class Point(BaseModel):
    x: int
    y: int = 0


def test_schema_from_hints_defaults_and_google_docstring():
    @tool
    def move(point: Point, unit: Literal["m", "km"] = "m", label: str | None = None, tags: list[str] = []) -> str:  # noqa: B006
        """Move to a point.

        Args:
            point: Where to go,
                in metres.
            unit (str): The unit.

        Returns:
            A message.
        """
        return "ok"

    assert move.name == "move"
    assert move.description == "Move to a point."
    assert move.parameters_schema == {
        "type": "object",
        "properties": {
            "point": {"$ref": "#/$defs/Point", "description": "Where to go, in metres."},
            "unit": {"default": "m", "description": "The unit.", "enum": ["m", "km"], "type": "string"},
            "label": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "tags": {"default": [], "items": {"type": "string"}, "type": "array"},
        },
        "required": ["point"],
        "additionalProperties": False,
        "$defs": {"Point": {"properties": {"x": {"title": "X", "type": "integer"},
                                           "y": {"default": 0, "title": "Y", "type": "integer"}},
                            "required": ["x"], "title": "Point", "type": "object"}},
    }


def test_schema_dict_and_float_and_bool_types():
    @tool
    def f(weights: dict[str, float], flag: bool = False) -> None:
        """Set weights."""

    assert f.parameters_schema["properties"] == {
        "weights": {"additionalProperties": {"type": "number"}, "type": "object"},
        "flag": {"default": False, "type": "boolean"},
    }
    assert f.parameters_schema["required"] == ["weights"]


def test_numpy_docstring_descriptions():
    def area(width: float, height: float) -> float:
        """Area of a rectangle.

        Parameters
        ----------
        width : float
            The width.
        height : float
            The height,
            never negative.

        Returns
        -------
        float
        """
        return width * height

    t = Tool(area)
    assert t.description == "Area of a rectangle."
    assert t.parameters_schema["properties"]["width"]["description"] == "The width."
    assert t.parameters_schema["properties"]["height"]["description"] == "The height, never negative."


def test_sphinx_docstring_descriptions():
    def greet(name: str, times: int = 1) -> str:
        """Greet someone.

        :param name: Who to greet.
        :param int times: How often,
            at least once.
        :returns: The greeting.
        """
        return name * times

    t = Tool(greet)
    assert t.description == "Greet someone."
    assert t.parameters_schema["properties"]["name"]["description"] == "Who to greet."
    assert t.parameters_schema["properties"]["times"]["description"] == "How often, at least once."


def test_annotated_field_description_is_kept():
    from typing import Annotated

    @tool
    def f(n: Annotated[int, Field(description="a count", ge=1)]) -> int:
        return n

    assert f.parameters_schema["properties"]["n"] == {"description": "a count", "minimum": 1, "type": "integer"}


def test_decorator_with_arguments_and_still_callable():
    @tool(name="sum_two", description="Adds.", retries=3)
    def add(a: int, b: int) -> int:
        return a + b

    assert (add.name, add.description, add.retries) == ("sum_two", "Adds.", 3)
    assert add(2, 3) == 5
    assert add.spec["name"] == "sum_two"


def test_bound_method_is_a_tool_without_self():
    class Workspace:
        def __init__(self) -> None:
            self.files = {"a.txt": "hello"}

        def read_file(self, path: str) -> str:
            """Read a file.

            Args:
                path: Relative path.
            """
            return self.files[path]

    t = Tool(Workspace().read_file)
    assert t.name == "read_file"
    assert list(t.parameters_schema["properties"]) == ["path"]
    assert asyncio.run(t.call({"path": "a.txt"})) == "hello"


async def test_async_tool_and_argument_validation():
    @tool
    async def double(n: int) -> int:
        await asyncio.sleep(0)
        return 2 * n

    assert double.is_async
    assert await double.call({"n": "21"}) == 42  # lax JSON validation coerces "21"
    with pytest.raises(ValidationError):
        await double.call({"n": "x"})
    with pytest.raises(ValidationError):
        await double.call({"n": 1, "extra": 2})  # additionalProperties: false


async def test_positional_only_parameters_are_passed_positionally():
    def f(a: int, /, b: int) -> list[int]:
        return [a, b]

    assert await Tool(f).call({"a": 1, "b": 2}) == [1, 2]


def test_bad_definition_lists_every_problem_once():
    class Opaque:
        pass

    def bad(a, *args: int, b: Opaque, c: int = 0, **kw: int) -> None:
        pass

    with pytest.raises(UserError) as exc:
        Tool(bad, retries=-1)
    assert exc.value.problems == [
        "tool 'bad': retries must be an integer >= 0, got -1",
        "tool 'bad': parameter 'a' has no type annotation",
        "tool 'bad': parameter *args: *args/**kwargs are not supported, name each parameter",
        ("tool 'bad': parameter 'b': type test_bad_definition_lists_every_problem_once.<locals>.Opaque has no JSON "
         "Schema (PydanticSchemaGenerationError)"),
        "tool 'bad': parameter **kw: *args/**kwargs are not supported, name each parameter",
    ]
    assert str(exc.value).startswith("invalid tool 'bad':\n  - retries must be")


def test_as_tools_collects_problems_across_tools_and_duplicates():
    def a(x: int) -> int:
        return x

    def b(y) -> None:
        pass

    def final_answer(z: int) -> None:
        pass

    with pytest.raises(UserError) as exc:
        as_tools([a, Tool(a), b, final_answer])
    assert exc.value.problems == [
        "tool 'b': parameter 'y' has no type annotation",
        "tool 'final_answer': the name is reserved by the agent",
        "tool 'a': the name is used by 2 tools",
    ]
    assert str(exc.value).startswith("3 problem(s) in the tool definitions:")


def test_bad_tool_name_is_a_problem():
    with pytest.raises(UserError) as exc:
        Tool(lambda x: x, name="has space")
    assert exc.value.problems[0] == "tool 'has space': name 'has space' must match ^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"


def test_observation_text():
    assert to_observation_text("plain") == "plain"
    assert to_observation_text({"a": [1, 2]}) == '{"a":[1,2]}'
    assert to_observation_text(Point(x=1)) == '{"x":1,"y":0}'
    assert to_observation_text(None) == "null"


@pytest.mark.parametrize(
    "doc, summary, params",
    [
        (None, "", {}),
        ("One line.", "One line.", {}),
        ("Two\nlines.\n\nSecond para.", "Two lines.\n\nSecond para.", {}),
        ("S.\n\nArgs:\n    a: A.\n    b (int, optional): B.\n\nRaises:\n    ValueError: never.",
         "S.", {"a": "A.", "b": "B."}),
        ("S.\n\nKeyword Args:\n    *, c: no\n    d: D.", "S.", {"d": "D."}),
    ],
)
def test_parse_docstring(doc, summary, params):
    assert parse_docstring(doc) == (summary, params)
