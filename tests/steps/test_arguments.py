"""Grounded tool arguments (agentkit.steps.arguments, agentkit.constrain.ground's argument kinds)."""

import re

from agentkit.constrain.arithmetic import expression_pattern
from agentkit.constrain.dates import day_phrases
from agentkit.constrain.ground import ARGUMENT_KINDS, ground_schema, text_currencies
from agentkit.constrain.nodes import Choice, slots
from agentkit.sdk import Tool
from agentkit.steps.arguments import ArgumentSources, argument_gaps, groundable, grounded_parameters
from agentkit.steps.kinds import tool_call_template
from agentkit.toolcall import sources_of


def get_weather(city: str) -> dict:
    """The weather in a city.

    Args:
        city: the city's name, e.g. Paris
    """
    return {"city": city}


def calculator(expression: str) -> float:
    """Evaluate an arithmetic expression."""
    return 0.0


def get_calendar_events(date: str) -> list:
    """The events on one day."""
    return []


def convert_currency(amount: float, from_currency: str, to_currency: str) -> float:
    """Convert money."""
    return amount


TOOLS = [Tool(f) for f in (get_weather, calculator, get_calendar_events, convert_currency)]


def names(tools):
    return [t.name for t in tools]


def test_a_tool_is_offered_only_where_the_conversation_has_its_required_values():
    assert names(groundable(TOOLS, "Do I need an umbrella in Berlin?")) == ["get_weather"]
    assert names(groundable(TOOLS, "What is 17.5 times 23?")) == ["get_weather", "calculator"]
    assert names(groundable(TOOLS, "anything on tomorrow?")) == ["get_weather", "get_calendar_events"]
    assert "convert_currency" in names(groundable(TOOLS, "How many yen is 50 pounds?"))
    assert argument_gaps(convert_currency_schema(), "convert 50 please") == ["from_currency", "to_currency"]


def convert_currency_schema():
    return TOOLS[3].parameters_schema


def test_expression_is_the_texts_numbers_joined_by_operators():
    p = expression_pattern("What is 17.5 times 23?")
    assert re.fullmatch(p, "17.5 * 23") and re.fullmatch(p, "(17.5*23)")
    assert not re.fullmatch(p, "17.5") and not re.fullmatch(p, "17 * 23") and not re.fullmatch(p, "17.5 times 23")
    assert re.fullmatch(expression_pattern("15 percent of 240"), "15 * 240 / 100")  # a percent in words implies 100
    assert re.fullmatch(expression_pattern("15% of 240"), "15% * 240")
    assert re.fullmatch(expression_pattern("half of 1,500"), "1500 / 2")
    assert expression_pattern("I have 3 cats") is None and expression_pattern("no numbers") is None


def test_days_and_currencies_as_a_user_writes_them():
    assert day_phrases("Any meetings on 2026-03-05 or next Friday?") == ["2026-03-05", "next Friday"]
    assert day_phrases("check my calendar for the 20th of March") == ["the 20th of March"]
    assert day_phrases("Is it sunny in Marrakesh?") == []
    assert day_phrases("Anything for Tuesday the 3rd of March?") == ["the 3rd of March"]  # one day, not two
    assert day_phrases("on Friday and on March 5") == ["Friday", "March 5"]
    assert text_currencies("How much is 10000 rupees in Canadian dollars?") == ["INR", "CAD"]
    assert text_currencies("1,500 Mexican pesos in US dollars") == ["MXN", "USD"]
    assert text_currencies("45 quid in euros") == ["GBP", "EUR"] and text_currencies("1500 aussie dollars") == ["AUD"]
    assert text_currencies("convert 12000 yen to aud") == ["JPY", "AUD"] and text_currencies("100 usd") == ["USD"]
    assert text_currencies("I'd like to try it in all the cafes") == []  # lowercase codes only after an amount or "to"


def test_the_argument_kinds_apply_to_tool_arguments_only(monkeypatch):
    monkeypatch.setenv("AGENTKIT_TODAY", "2026-03-02")
    schema = {"type": "object", "properties": {"date": {"type": "string"}}, "required": ["date"]}
    assert ground_schema(schema, "see you tomorrow").kinds == {"/date": "string"}  # extract: a span
    g = ground_schema(schema, "see you tomorrow", kinds=ARGUMENT_KINDS)
    assert g.kinds == {"/date": "date"} and g.schema["properties"]["date"]["enum"] == ["2026-03-03"]  # today's next
    weeks = ground_schema(schema, "anything on next week?", kinds=ARGUMENT_KINDS)
    assert weeks.schema["properties"]["date"]["enum"] == ["next week"]  # no one day: as written
    dated = ground_schema(schema, "a room from 2023 April 4th to April 8th", kinds=ARGUMENT_KINDS)
    assert dated.schema["properties"]["date"]["enum"] == ["2023-04-04", "2023-04-08"]  # the year the text writes
    day = {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]}
    kept = ground_schema(day, "the museum's hours on Saturday?", kinds=ARGUMENT_KINDS)
    assert kept.schema["properties"]["day"]["enum"] == ["Saturday"]  # a day, not a date: as written


def test_the_call_template_takes_its_values_from_the_sources():
    params = grounded_parameters(TOOLS, ArgumentSources("How many yen is 50 pounds?"))
    assert set(params) == set(names(TOOLS))
    t = tool_call_template([TOOLS[3]], final_answer=False, parameters=params)
    choices = [n for n in _walk(t.root) if isinstance(n, Choice)]
    assert [[o.text for o in c.options] for c in choices] == [["50", "50.0"]]  # the pair: pounds to yen, pinned
    assert '"from_currency": "GBP", "to_currency": "JPY"' in str(t.root)
    weather = tool_call_template([TOOLS[0]], final_answer=False, parameters=params)
    assert [s.source for s in slots(weather.root)] == ["How many yen is 50 pounds?"]  # the city: a span
    plain = tool_call_template([TOOLS[0]], final_answer=False)
    assert [s.source for s in slots(plain.root)] == [None]


def test_sources_are_the_user_and_tool_messages():
    chat = [{"role": "system", "content": "city e.g. Paris"}, {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "{}"}, {"role": "tool", "content": '{"temp": 3}'}]
    assert sources_of(chat) == 'weather?\n{"temp": 3}'


def _walk(node):
    yield node
    for child in getattr(node, "items", ()) + getattr(node, "options", ()):
        yield from _walk(child)
    if hasattr(node, "item"):
        yield from _walk(node.item)


def test_optional_arguments_are_the_models_own():
    """Only required arguments are grounded: an optional one has a default, and the model may write what it knows
    (an initial speed of 0 "from rest") where the conversation writes no value."""

    def speed(distance: float, time: float, initial_speed: float = 0.0) -> float:
        """Speed from rest."""
        return distance / time

    tool = Tool(speed)
    params = grounded_parameters([tool], ArgumentSources("20 meters over 4 seconds"))
    text = str(params["speed"].root)
    assert "Lit(text='20')" in text and "Lit(text='4')" in text  # distance and time: the text's numbers
    assert "Slot(" in text  # initial_speed: a number slot of its own
    assert argument_gaps(tool.parameters_schema, "20 meters over 4 seconds") == []
    assert argument_gaps(tool.parameters_schema, "how fast from rest?") == ["distance", "time"]


def test_a_from_to_pair_takes_each_side_from_where_the_text_marks_it():
    from agentkit.constrain.ground import anchor_pairs, pair_fields, pair_phrases

    schema = TOOLS[3].parameters_schema
    assert pair_fields(schema) == [("from_currency", "to_currency")]
    assert pair_phrases("How many yen is 50 pounds?") == (["pounds"], ["yen"])
    props = anchor_pairs(schema, "How much is 10000 rupees in Canadian dollars?")["properties"]
    assert (props["from_currency"]["enum"], props["to_currency"]["enum"]) == (["INR"], ["CAD"])
    assert pair_phrases("I earn 3200 CAD a month, what's that in euros?") == (["CAD"], ["euros"])
    assert pair_phrases("Convert 100 US dollars to euros.") == (["US dollars"], ["euros"])
    props = anchor_pairs(schema, "convert 50 euros")["properties"]  # the to side unmarked: the pair as it is
    assert "enum" not in props["from_currency"] and "enum" not in props["to_currency"]
    assert props["amount"]["enum"] == [50]  # the number written with a currency
    props = anchor_pairs(schema, "Hotel is 45,000 yen a night. One night in USD, and 5 nights with 10% tax?")[
        "properties"]
    assert props["amount"]["enum"] == [45000]
    assert pair_phrases("£75 in AUD?") == (["£"], ["AUD"])  # a symbol before the amount marks the from side
    props = anchor_pairs(schema, "I've got 85 francs. If I change them into US dollars and pay a 5 dollar fee")[
        "properties"]  # USD on both sides: the to side holds it alone, so the from side is the other one
    assert (props["from_currency"]["enum"], props["to_currency"]["enum"]) == (["CHF"], ["USD"])
    props = anchor_pairs(schema, "what is €60 worth in australian dollars")["properties"]
    assert (props["from_currency"]["enum"], props["to_currency"]["enum"]) == (["EUR"], ["AUD"])
    params = grounded_parameters([TOOLS[3]], ArgumentSources("What is 1,500 Mexican pesos in dollars?"))
    text = str(params["convert_currency"].root)
    assert text.index('"MXN"') < text.index('"USD"') and text.count('"MXN"') == 1 and text.count('"USD"') == 1


def test_percent_is_not_a_remainder_and_a_number_marks_no_side():
    from agentkit.constrain.ground import pair_phrases

    p = expression_pattern("What's 15% of 240?")
    assert not re.fullmatch(p, "15% (15%)") and not re.fullmatch(p, "15 % 240") and re.fullmatch(p, "15% * 240")
    runaway = expression_pattern("need (1820 - 365) / 7 worked out")  # at most one operator fewer than numbers
    assert re.fullmatch(runaway, "(1820 - 365) / 7") and not re.fullmatch(runaway, "1820 - 365 - 7 - 7")
    assert pair_phrases("explain a black hole in one sentence") == (["sentence"], [])  # "in one": no to side


def test_each_number_the_text_writes_fills_one_argument():
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    tool = Tool(add)
    assert argument_gaps(tool.parameters_schema, "Name three colours.") == ["a", "b"]
    assert argument_gaps(tool.parameters_schema, "What is 2 + 2?") == []  # 2 written twice: two places
    assert names(groundable([tool], "add 3 and 4")) == ["add"]


def test_an_array_argument_is_the_models_own():
    def distance(point_a: list[float], point_b: list[float]) -> float:
        """The distance between two points."""
        return 0.0

    tool = Tool(distance)
    text = str(grounded_parameters([tool], ArgumentSources("distance from (3, 4) to (1, 2)"))["distance"].root)
    assert "name='/point_a/*'" in text and "Lit(text='3')" not in text  # free items, no choice among 3, 4, 1, 2
    assert argument_gaps(tool.parameters_schema, "the distance between two points") == []


def test_a_name_or_a_query_argument_is_no_number_or_day_the_text_writes_whole():
    from agentkit.constrain.ground import ground_arguments

    city = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}
    excluded = ground_arguments(city, "Where does my flight on 20 March go? Check on Tuesday, at 1972 rates").exclude
    assert {"20 March", "Tuesday", "1972"} <= set(excluded["/city"])
    query = {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}
    searched = ground_arguments(query, "was the moon landing in 1972? search it")
    assert "1972" in searched.exclude["/query"] and searched.schema["properties"]["query"]["pattern"] == "^[^0-9]"
    season = {"type": "object", "required": ["season"], "properties": {"season": {"type": "string"}}}
    assert "2021" not in ground_arguments(season, "Barcelona's ranking in the 2021 season").exclude.get("/season", ())
