"""A search query from the request that asks for it (agentkit.constrain.queries) and the argument it grounds."""

from agentkit.constrain.ground import ARGUMENT_KINDS, ground_schema
from agentkit.constrain.queries import asks_fact, query_spans


def test_the_clause_after_a_search_verb_is_the_query():
    assert query_spans("search who holds the marathon world record right now") == [
        "who holds the marathon world record right now"]
    assert query_spans("Can you look up the men's marathon world record and then work out the pace?") == [
        "the men's marathon world record"]
    assert query_spans("Please search the web for the height of the Eiffel Tower.") == ["the height of the Eiffel Tower"]
    assert query_spans("quick search: when did python 3.13 come out? need it for a changelog") == [
        "when did python 3.13 come out"]  # "3.13" is no sentence's end


def test_a_fact_question_then_the_proper_names_when_the_verb_names_no_subject():
    text = "How long is the Amazon River in miles? Look up the length first, I don't trust my memory."
    assert query_spans(text) == ["How long is the Amazon River"]  # "the length first" names nothing; miles: the next call
    text = "My nephew swears Everest is over 30,000 feet tall. Can you search how high it actually is?"
    assert query_spans(text) == ["Everest"]  # a pronoun's clause is no query; a name, not "30,000 feet"
    assert query_spans("Planning to go to the Louvre on a Tuesday. Can you look up whether it's open?") == ["Louvre"]
    assert query_spans("hey, what's up?") == [] and query_spans("can u search it and convert") == []


def test_a_query_argument_takes_the_query_clause_else_the_spans():
    schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    got = ground_schema(schema, "is the louvre open on tuesdays?? trying to plan", kinds=ARGUMENT_KINDS, fenced=False)
    assert got.schema["properties"]["query"]["enum"] == ["is the louvre open on tuesdays"]
    spans = ground_schema(schema, "tell me something fun", kinds=ARGUMENT_KINDS, fenced=False)
    assert "enum" not in spans.schema["properties"]["query"]  # no look-up clause: the request's spans
    other = {"type": "object", "properties": {"season": {"type": "string"}}, "required": ["season"]}
    kept = ground_schema(other, "search how tall the Eiffel Tower is", kinds=ARGUMENT_KINDS, fenced=False)
    assert "enum" not in kept.schema["properties"]["season"]  # only a query argument


def test_a_clause_of_words_every_look_up_has_gives_way_to_one_that_names_the_subject():
    assert query_spans("Heading to the Louvre this week with my mum. What are the opening hours, and is there a day "
                       "it's shut?") == ["Louvre"]
    assert query_spans("need to tell the team which python version is newest - what's the latest release?") == [
        "need to tell the team which python version is newest"]
    assert query_spans("where are the 2028 olympics being held") == ["where are the 2028 olympics being held"]
    assert query_spans("where is it being held?") == []  # a pronoun names no subject


def test_a_measure_asked_by_a_pronoun_of_a_named_thing_is_a_fact_and_the_name_its_query():
    text = "My nephew is obsessed with the Eiffel Tower and wants to know how tall it is in feet. Can you find out?"
    assert asks_fact(text) and query_spans(text) == ["Eiffel Tower"]
    assert not asks_fact("i have a cat. how old it is i dont know")  # no name: nothing recorded to look up
    amazon = "Need the length of the Amazon river, but in miles, not km. can you find it and convert it?"
    assert asks_fact(amazon) and "Amazon river" in query_spans(amazon)[0]


def test_a_search_of_a_pronoun_takes_the_first_name_and_a_clause_ends_before_and_also_tell():
    told = ("My grandson keeps telling me the 2028 Summer Olympics are in Los Angeles. Would you do a quick web search "
            "to confirm where they're being held?")
    assert query_spans(told) == ["Summer Olympics"]  # Los Angeles is what is told, not what to look up
    two = ("We're hoping to visit the Louvre this week. Would you look up its opening hours, and also tell me what the "
           "weather is like in Paris now?")
    assert query_spans(two) == ["Louvre"]
