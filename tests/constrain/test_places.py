"""The places a request names (agentkit.constrain.places) and the place argument they ground."""

from agentkit.constrain.ground import ARGUMENT_KINDS, ground_schema
from agentkit.constrain.places import place_spans, weather_headed

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_a_place_is_a_capitalised_name_or_the_word_after_a_place_preposition():
    assert place_spans("in bangkok, about to head out. is it storming right now or nah? deciding on the skytrain") == [
        "bangkok"]
    assert place_spans("whats the temp in denver right now? in fahrenheit pls") == ["denver"]  # no unit, no "pls"
    assert place_spans("a run in seattle in like 20 min") == ["seattle"]
    assert place_spans("what's it like in cairo right now, in F?") == ["cairo"]  # a unit's letter is no place
    assert place_spans("Same laptop is 1,199 CHF in Zurich and £1,099 in London.") == ["Zurich", "London"]
    assert place_spans("we're torn between oslo and reykjavik. which one's colder?") == ["oslo", "reykjavik"]
    assert place_spans("flying to new york on friday") == ["new", "new york"]
    assert place_spans("helsinki weather please") == ["helsinki"]  # a writer who does not capitalise
    assert place_spans("How do I say thank you in French?") == [] and place_spans("I love rainy weather") == []


def test_a_capitalised_first_word_is_a_place_before_the_present_or_the_weather():
    assert place_spans("Cairo today - shorts and t-shirt kind of day or should I bring a layer?", first_words=False) == [
        "Cairo"]
    assert place_spans("Rome weather pls. Thanks") == ["Rome"]
    assert place_spans("packing for marrakesh, leaving in a few hrs. is it hot there rn") == ["marrakesh"]
    assert place_spans("At what temperature does water boil at sea level, in celsius?") == []
    assert place_spans("What today?") == [] and place_spans("Today is hot") == []  # no place's name first


def test_a_city_argument_takes_the_places_else_the_spans():
    got = ground_schema(CITY, "whats the temp in denver right now? in fahrenheit pls", kinds=ARGUMENT_KINDS,
                        fenced=False)
    assert got.schema["properties"]["city"]["enum"] == ["denver"]
    spans = ground_schema(CITY, "how sticky is mumbai rn?", kinds=ARGUMENT_KINDS, fenced=False)
    assert "enum" not in spans.schema["properties"]["city"]


def test_the_word_after_how_cold_is_is_a_place():
    assert place_spans("how cold is helsinki right now") == ["helsinki"]
    assert place_spans("how cold is it") == []
    assert place_spans("bangkok wether today?? my sister lands there tonight", first_words=False) == ["bangkok"]
    assert place_spans("nice weather today, huh?") == [] and place_spans("so weather aside, how was your day") == []
    assert place_spans("tokyo and bangkok weather? which leg needs the rain jacket", first_words=False) \
        == ["tokyo", "bangkok"]
    assert weather_headed("oslo temp") and weather_headed("Rome weather pls") and not weather_headed("nice weather")
    assert place_spans("I've got something on Thursday in another city") == []  # "another" names no place
    assert place_spans("which is colder right now, oslo or helsinki?") == ["oslo", "helsinki"]
