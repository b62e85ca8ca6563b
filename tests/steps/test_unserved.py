"""What a request left after its calls, and the tools that owe a call (agentkit.steps.unserved, arguments)."""

import json
import re

from agentkit.constrain.arithmetic import asks_arithmetic, word_problem
from agentkit.steps.arguments import argument_sources, turn_of
from agentkit.steps.decision import COVERED, DecisionAsk, decide
from agentkit.steps.kinds import observation
from agentkit.steps.unserved import covering, mentions, narrowed, operands, owed, unserved

CURRENCY = {"type": "object", "required": ["amount", "from_currency", "to_currency"], "properties": {
    "amount": {"type": "number"}, "from_currency": {"type": "string"}, "to_currency": {"type": "string"}}}
UNITS = {"type": "object", "required": ["value", "from_unit", "to_unit"], "properties": {
    "value": {"type": "number"}, "from_unit": {"type": "string"}, "to_unit": {"type": "string"}}}
WEATHER = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}
CALC = {"type": "object", "required": ["expression"], "properties": {"expression": {"type": "string"}}}
TOOLS = [("convert_currency", CURRENCY), ("convert_units", UNITS), ("get_weather", WEATHER), ("calculator", CALC)]


def left(request: str, *calls: dict) -> list[tuple[str, str]]:
    return [(m.kind, m.text) for m in unserved(request, "\n".join(json.dumps(c) for c in calls))]


def test_nothing_is_left_before_a_call_or_when_every_value_was_taken():
    assert left("Convert 100 dollars to euros and also to pounds.") == []
    assert left("How many yen is 50 pounds?", {"amount": 50, "from_currency": "GBP", "to_currency": "JPY"}) \
        == [("unit", "pounds")]  # a unit no tool here takes: it owes no call (below)
    assert left("What's the weather like in Tokyo right now?", {"city": "Tokyo"}) == []
    assert left("how warm is it in lisbon today", {"city": "lisbon"}) == []  # today is no ask
    assert left("How many feet is 3 m?", {"value": 3, "from_unit": "m", "to_unit": "feet"}) == []  # "m", a value


def test_the_second_ask_of_a_request_is_left():
    assert ("currency", "pounds") in left("Convert 100 dollars to euros and also to pounds.",
                                          {"amount": 100, "from_currency": "USD", "to_currency": "EUR"})
    assert left("What's the weather in Madrid and in Rome?", {"city": "Madrid"}) == [("name", "Rome")]
    assert left("I earn 3200 CAD a month. What's that in euros, and what's that times 12?",
                {"amount": 3200, "from_currency": "CAD", "to_currency": "EUR"}) == [("number", "12")]


def test_names_count_only_when_nothing_else_is_left_and_never_a_sentences_first_word():
    assert [m.text for m in mentions("Weather in Seattle and Vancouver please") if m.kind == "name"] \
        == ["Seattle", "Vancouver"]
    assert left("What's the temperature in Oslo in Fahrenheit?", {"city": "Rome"}) == [("unit", "Fahrenheit")]


def test_places_in_lowercase_and_days_are_left_one_by_one(monkeypatch):
    monkeypatch.setenv("AGENTKIT_TODAY", "2026-03-02")  # a Monday
    assert left("is it warmer in lisbon or rome right now?", {"city": "lisbon"}) == [("name", "rome")]
    assert left("which is colder right now, oslo or reykjavik?", {"city": "oslo"}, {"city": "Reykjavik"}) == []
    asked = "do i have anything on friday, or on the 14th?"
    assert left(asked, {"date": "2026-03-14"}) == [("day", "friday")]  # another day was written: not friday's
    assert left(asked, {"date": "2026-03-14"}, {"date": "2026-03-06"}) == []  # friday is March 6
    assert left("anything on next week?", {"date": "2026-03-09"}) == []  # no one day: any day takes it
    found = owed([("get_calendar_events", CALENDAR)], unserved(asked, '{"date": "2026-03-14"}'), asked)
    assert found == {"get_calendar_events": {"date": {"enum": ["2026-03-06"]}}}


def test_a_day_told_is_no_ask_and_leaves_the_place_owed(monkeypatch):
    monkeypatch.setenv("AGENTKIT_TODAY", "2026-03-02")
    chat = [{"role": "user", "content": "Flying to Mumbai on Saturday. What's the weather there right now, and how "
                                        "many rupees would I get for $600?"},
            {"role": "assistant", "content": '{"name": "convert_currency", "arguments": {"amount": 600, '
                                             '"from_currency": "USD", "to_currency": "INR"}}'},
            {"role": "tool", "content": '{"amount": 49800.0}'}]
    sources = argument_sources([*TOOLS, ("get_calendar_events", CALENDAR)], chat)
    assert sources.owed == ("get_weather",) and sources.held_for("get_weather") == {"city": {"enum": ["Mumbai"]}}


def test_a_result_value_asked_by_its_key_keeps_the_request_unserved_and_a_code_looked_up_owes_no_same_call():
    request = "Can I find a R-8823 book at the New York public library? (R-8823 is a saved reference: look up its value)"
    lookup = {"type": "object", "required": ["ref"], "properties": {"ref": {"type": "string"}}}
    books = {"type": "object", "required": ["location", "genre"],
             "properties": {"location": {"type": "string"}, "genre": {"type": "string"}}}
    chat = [{"role": "user", "content": request},
            {"role": "assistant", "content": '{"name": "lookup_reference", "arguments": {"ref": "R-8823"}}'},
            {"role": "tool", "content": '{"ref": "R-8823", "value": "historical fiction"}'}]
    sources = argument_sources([("lookup_reference", lookup), ("library.search_books", books)], chat)
    assert sources.owed is None  # the value asked is no tool's argument by name: the scores decide, not owed
    chat[2] = {"role": "tool", "content": '{"ref": "R-8823"}'}
    sources = argument_sources([("lookup_reference", lookup), ("library.search_books", books)], chat)
    assert sources.owed != ("lookup_reference",)  # "New York" is left, but the last call took a code, not a name


def test_a_name_left_after_a_search_goes_to_the_scores_where_the_present_is_asked():
    search = {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}
    tools = [("get_weather", WEATHER), ("web_search", search)]
    request = "Would you look up the Louvre's opening hours, and also tell me what the weather is like in Paris now?"
    chat = [{"role": "user", "content": request},
            {"role": "assistant", "content": '{"name": "web_search", "arguments": {"query": "Louvre"}}'},
            {"role": "tool", "content": '{"result": "The Louvre is open 9:00-18:00"}'}]
    assert argument_sources(tools, chat).owed == ("get_weather", "web_search")  # not the search alone
    books = [{"role": "user", "content": "Search Dune and also Foundation"},
             {"role": "assistant", "content": '{"name": "web_search", "arguments": {"query": "Dune"}}'}, chat[2]]
    assert argument_sources(tools, books).owed == ("web_search",)


def test_an_owed_expression_keeps_a_percent_sign():
    request = "Convert 2,000 Canadian dollars to pounds, then work out 15% of the pounds figure"
    made = '{"amount": 2000, "from_currency": "CAD", "to_currency": "GBP"}'
    left = unserved(request, made, ['{"result": 1161.76}'])
    assert operands(request, left, ['{"result": 1161.76}'], made).split("\n")[0] == "1161.76 15%"


def test_the_owed_tool_is_held_to_what_was_left():
    text = "Convert 100 dollars to euros and also to pounds."
    rest = unserved(text, json.dumps({"amount": 100, "from_currency": "USD", "to_currency": "EUR"}))
    found = owed(TOOLS, rest, text)
    assert found == {"convert_currency": {"to_currency": {"enum": ["GBP"]}}}
    schema = narrowed(CURRENCY, found["convert_currency"])
    assert schema["properties"]["to_currency"]["enum"] == ["GBP"] and "enum" not in schema["properties"]["amount"]
    result = 'Tool get_weather returned: {"city": "Oslo", "temperature_c": -3}'
    found = owed(TOOLS, unserved("What's the temperature in Oslo in Fahrenheit?", '{"city": "Oslo"}'),
                 "What's the temperature in Oslo in Fahrenheit?\n" + result)
    assert found == {"convert_units": {"to_unit": {"enum": ["Fahrenheit"]}}}


def test_the_request_and_the_calls_made_since_are_read_from_either_chat_form():
    sdk = [{"role": "system", "content": "s"}, {"role": "user", "content": "Weather in Rome and Oslo"},
           {"role": "assistant", "content": '{"name": "get_weather", "arguments": {"city": "Rome"}}'},
           {"role": "user", "content": observation("get_weather", '{"temperature_c": 23}')}]
    turn = turn_of(sdk)
    assert (turn.request, turn.calls, turn.results) == ("Weather in Rome and Oslo", (sdk[2]["content"],),
                                                        ('{"temperature_c": 23}',))
    assert turn.last_tool == "get_weather"
    api = [{"role": "user", "content": "Weather in Rome and Oslo"}, sdk[2], {"role": "tool", "content": "{}"}]
    sources = argument_sources([("get_weather", WEATHER)], api)
    assert sources.owed == ("get_weather",) and sources.held_for("get_weather") == {"city": {"enum": ["Oslo"]}}
    assert argument_sources([("get_weather", WEATHER)], api[:1]).owed is None  # before any call
    both = [*api, {"role": "assistant", "content": '{"name": "get_weather", "arguments": {"city": "Oslo"}}'},
            {"role": "tool", "content": "{}"}]
    assert argument_sources([("get_weather", WEATHER)], both).owed == ()  # every value taken: served
    small_talk = [{"role": "user", "content": "tell me something nice"}, *api[1:]]
    assert argument_sources([("get_weather", WEATHER)], small_talk).owed is None  # it wrote no value


def test_an_owed_tool_is_called_even_when_the_rule_after_results_would_answer():
    ask = DecisionAsk("auto", [{"role": "user", "content": "x"}], ["get_weather", "web_search"], "respond", "h",
                      owed=("get_weather",))
    gen = decide(ask)
    try:
        next(gen)
        raise AssertionError("one owed tool needs no scores")
    except StopIteration as stop:
        decision = stop.value
    assert decision.call is True and decision.tool == "get_weather"
    ask2 = DecisionAsk("auto", ask.chat, ["get_weather", "web_search"], "respond", "h", owed=("get_weather", "web_search"))
    gen = decide(ask2)
    request = next(gen)
    assert request.names == ["get_weather", "web_search"]
    try:
        gen.send({"get_weather": -9.0, "web_search": -2.0})
    except StopIteration as stop:
        assert stop.value.tool == "web_search" and stop.value.call is True


def test_a_result_value_the_request_names_by_its_key_is_owed_to_an_argument_of_that_name():
    request = "What's on my calendar on March 5, and what's the weather in the city I'm going to be in?"
    result = '{"date": "2026-03-05", "events": [{"time": "12:30", "title": "Lunch", "city": "Madrid"}]}'
    rest = unserved(request, '{"name": "get_calendar_events", "arguments": {"date": "March 5"}}', [result])
    assert [(m.kind, m.text, m.value) for m in rest] == [("field", "Madrid", "city")]
    assert owed(TOOLS, rest, request + "\n" + result) == {"get_weather": {"city": {"enum": ["Madrid"]}}}
    assert unserved(request, '{"date": "March 5"} {"city": "Madrid"}', [result]) == []
    there = "Anything on March 5? If I'm travelling, what's the weather doing there?"  # a place word asks for it
    assert [m.text for m in unserved(there, '{"date": "March 5"}', [result])] == ["Madrid"]
    headed = "flying out on march 5. whats in my calendar that day, and hows the weather at the destination"
    assert [m.text for m in unserved(headed, '{"date": "march 5"}', [result])] == ["Madrid"]
    assert unserved("Anything on March 5?", '{"date": "March 5"}', [result]) == []


def test_an_owed_expression_works_on_what_was_left_and_the_results_not_on_the_amounts_spent():
    request = "I earn 3200 CAD a month. What's that in euros, and what's that times 12?"
    made = '{"name": "convert_currency", "arguments": {"amount": 3200, "from_currency": "CAD", "to_currency": "EUR"}}'
    result = '{"amount": 3200, "from": "CAD", "to": "EUR", "result": 2164.71}'
    rest = unserved(request, made, [result])
    held = owed(TOOLS, rest, request + "\n" + result, operands(request, rest, [result], made))["calculator"]
    pattern = re.compile(held["expression"]["pattern"])
    assert pattern.match("2164.71 * 12") and not pattern.match("3200 * 12")
    assert not pattern.match("2164.71 * 2164.71") and not pattern.match("12 * 12")  # each number once: no loop
    assert not pattern.match("12 * 2164.71")  # the result first ("62250 - 20000" for "left after spending 20,000")
    assert held["expression"]["grounded"] is False  # the pattern is the grounding


def test_a_served_request_is_answered():
    ask = DecisionAsk("auto", [{"role": "user", "content": "x"}], ["get_weather"], "respond", "h", owed=())
    gen = decide(ask)
    try:
        next(gen)
        raise AssertionError("a served request needs no scores")
    except StopIteration as stop:
        assert stop.value.call is False and stop.value.info["by"] == "every value of the request was taken"


def test_a_retry_is_not_a_further_ask_and_counts_are_no_values():
    failed = [{"role": "user", "content": "Find the GCD of two numbers, say 36 and 48."},
              {"role": "assistant", "content": '{"name": "gcd", "arguments": {"a": 36, "b": 48}}'},
              {"role": "user", "content": observation("gcd", "busy (HTTP 503), call again", error=True)}]
    gcd = {"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    sources = argument_sources([("gcd", gcd)], failed)
    assert turn_of(failed).failed and sources.owed is None and sources.held == ()
    assert [m.text for m in mentions(failed[0]["content"]) if m.kind == "number"] == ["36", "48"]  # not "two"


CALENDAR = {"type": "object", "required": ["date"], "properties": {"date": {"type": "string"}}}


def test_a_request_covers_a_tool_when_typed_values_fill_every_required_argument():
    tools = [*TOOLS, ("get_calendar_events", CALENDAR)]
    cover = lambda request: covering(tools, request, request)
    assert cover("what's 80 swiss francs in euros") == ("convert_currency",)
    assert cover("how many cm is 5 feet") == ("convert_units",)
    assert cover("Am I free on March 6?") == ("get_calendar_events",)
    assert cover("What's 2 to the power of 16?") == ("calculator",)
    assert cover("What's the weather in Oslo?") == ()  # a free string (a city) is no typed value
    assert cover("Convert 100 dollars please") == ()  # one currency: the pair is not filled
    assert cover("What's the weather today?") == ()  # today is no named day, unless the user's days are asked
    assert cover("am i free this afternoon or is there stuff on today?") == ("get_calendar_events",)
    assert cover("how much is eighty quid in euros") == ("convert_currency",)  # a number in words, with its currency
    assert cover("Do I have anything tomorrow?") == ("get_calendar_events",)
    assert cover("I've got something on Thursday in another city - can you check what it is?") \
        == ("get_calendar_events",)  # the user's own event, asked about
    assert cover("Can you pull up what I've got scheduled for this Friday?") == ("get_calendar_events",)
    assert cover("what meetings have i got today") == ("get_calendar_events",)
    assert cover("oslo temp") == ("get_weather",)  # a place and the weather: the present, unsaid
    assert cover("3500 pesos to usd?") == ("convert_currency",)  # pesos, as a user's tool reads them: MXN
    for passing in ("I've got a job interview on Thursday", "Recommend a novel to read this weekend"):
        assert cover(passing) == (), passing  # a weekday or a span names no date by itself
    assert cover("I ran 5 km and then 3 km") == ()  # numbers without an operator ask no arithmetic
    chat = [{"role": "user", "content": "how many cm is 5 feet"}]
    assert argument_sources(tools, chat).covered == ("convert_units",)
    after = [*chat, {"role": "assistant", "content": '{"name": "convert_units", "arguments": {}}'},
             {"role": "tool", "content": "{}"}]
    assert argument_sources(tools, after).covered == ()  # only before any call


def test_arithmetic_is_asked_by_an_operator_between_written_numbers():
    for text in ("What is 17.5 times 23?", "(45 + 55) * 3.2", "2 to the power of 16", "What's 15% of 240?",
                 "999 divided by 27", "what is half of 7"):
        assert asks_arithmetic(text), text
    for text in ("Any meetings on 2026-03-05?", "Convert 5 km to miles and 10 kg to pounds.", "I have 3 cats"):
        assert not asks_arithmetic(text), text


def test_a_word_problem_asks_arithmetic_of_two_written_numbers():
    for text in ("Could you divide 640 by 16?", "We split a bill of 96.30 evenly between 3 of us.",
                 "a 4.5% commission on 12,000", "I pay 850 a month, so over 14 months?",
                 "tickets are 7.50 each and we need 9", "I biked 12 km and then 30 km - how far in total?"):
        assert word_problem(text), text
    for text in ("Convert 5 km to miles and 10 kg to pounds.", "I have 3 cats", "split the 80 between us",
                 "my flat is on floor 4 of 12 and I walked up", "Any meetings on 2026-03-05 at 10?"):
        assert not word_problem(text), text


def test_a_word_problem_covers_the_calculator_only_where_nothing_else_is_covered():
    cover = lambda request: covering(TOOLS, request, request)
    assert cover("the gym costs 39.99 a month; what do 8 months come to") == ("calculator",)
    assert cover("I'll send 1,000 dollars in euros and pay a 2% fee on it") == ("convert_currency",)
    assert cover("Convert 1,000 dollars to euros, and what is 250 times 3?") == ("convert_currency", "calculator")
    assert cover("the bill was $1,847.60 and seven of us pay equally: what does each of us owe?") == ("calculator",)
    assert cover("Do you think it's smarter to pay down a card at 22% APR or build up a $1,000 fund first?") == ()
    assert cover("any tips? dinner was 187.40 with an 18% tip, how much each for 4 of us") == ("calculator",)
    assert cover("any tips for staying motivated for a 10k? i run 3x a week, 5 km each time") == ()
    assert cover("my recipe wants 2 cups of flour and 1 tsp baking soda. can I use baking powder instead?") == ()
    assert cover("The cookbook says bake at 350°F. My oven only shows Celsius — what should I set it to?") == (
        "convert_units",)  # advice words, and a value asked


def _decided(ask: DecisionAsk, *scores: dict) -> object:
    gen = decide(ask)
    request = next(gen)
    try:
        for s in scores:
            request = gen.send({n: s.get(n, -5.0) for n in request.names})
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the decision asked for more scores")


def test_a_covered_tool_is_called_where_the_margin_would_answer():
    chat = [{"role": "user", "content": "how many cm is 5 feet"}]
    names = ["convert_units", "get_weather", "calculator"]
    answer = {"respond": -0.5, "convert_units": -4.0, "get_weather": -3.0, "calculator": -3.5}
    baseline = {"respond": -2.0, "convert_units": -4.5, "get_weather": -2.0, "calculator": -3.0}
    plain = _decided(DecisionAsk("auto", chat, names, "respond", "h"), answer, baseline)
    assert plain.call is False
    covered = _decided(DecisionAsk("auto", chat, names, "respond", "h", covered=("convert_units",)), answer, baseline)
    assert (covered.call, covered.tool, covered.info["by"]) == (True, "convert_units", COVERED)
    calling = {**answer, "respond": -6.0}  # the margin calls: the calibrated choice stands
    kept = _decided(DecisionAsk("auto", chat, names, "respond", "h", covered=("convert_units",)), calling, baseline)
    assert kept.call is True and kept.info["by"] == "calibrated_scores"
    elsewhere = {**calling, "get_weather": -0.5}  # the margin calls another tool: the covered one is called
    moved = _decided(DecisionAsk("auto", chat, names, "respond", "h", covered=("convert_units",)), elsewhere, baseline)
    assert (moved.call, moved.tool, moved.info["covered"]) == (True, "convert_units", ["convert_units"])


def test_a_number_in_words_is_left_for_a_word_problem_after_the_conversion():
    request = "A villa costs 1,380 euros and four of us are splitting it. Convert it to kronor, then each person's share."
    made = '{"amount": 1380, "from_currency": "EUR", "to_currency": "SEK"}'
    result = '{"amount": 1380, "from": "EUR", "to": "SEK", "result": 15600.0}'
    rest = unserved(request, made, [result])
    assert [(m.kind, m.value) for m in rest] == [("number", 4)]
    pattern = owed(TOOLS, rest, request + "\n" + result, operands(request, rest, [result], made))["calculator"]
    assert re.fullmatch(pattern["expression"]["pattern"], "15600 / 4")
    assert [m.kind for m in mentions("Name three colours.")] == []  # no word problem: words are no values


def test_a_tool_of_places_is_covered_where_the_request_asks_for_the_present_at_a_place_it_names():
    for text in ("is it gonna be freezing in helsinki rn or what", "she just landed in Nairobi, what's it like today?"):
        assert covering(TOOLS, text, text) == ("get_weather",), text
    for text in ("Is it snowing in Reykjavik?", "ugh mondays. what a day today", "I love rainy weather",
                 "What's the current marathon world record? My coworker swears it's still Kipchoge"):
        assert covering(TOOLS, text, text) == (), text  # no present asked, or no place named
