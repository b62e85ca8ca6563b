"""Units a text names, and unit arguments grounded to them (agentkit.constrain.units)."""

from agentkit.constrain.ground import ground_arguments, pair_phrases
from agentkit.constrain.units import canonical_unit, dimension, is_unit, number_units, text_units, unit_mentions

CONVERT = {"type": "object", "required": ["value", "from_unit", "to_unit"], "properties": {
    "value": {"type": "number"}, "from_unit": {"type": "string"}, "to_unit": {"type": "string"}}}


def test_names_count_anywhere_and_symbols_only_after_a_number_or_a_cue():
    assert text_units("how many cm is 5 feet") == ["cm", "feet"]
    assert text_units("Convert 100 F to C") == ["F", "C"]
    assert text_units("convert 5 ft to m") == ["ft", "m"]
    assert text_units("I'm in a meeting at 5 in the afternoon") == []
    assert text_units("Can you explain what a black hole is?") == []
    assert text_units("a 10k race is how many miles?") == ["miles"]  # a lowercase k after a number: no kelvin
    assert text_units("it's 300 K outside") == ["K"]


def test_a_json_key_says_the_unit_of_its_number():
    result = '{"city": "Oslo", "temperature_c": -3, "conditions": "snow"}'
    assert number_units(result) == ["c"]
    assert [v for _, _, v in unit_mentions(result)] == ["c"]
    assert number_units("The Eiffel Tower is 330 metres tall.") == ["metres"]
    assert number_units("How many feet is 3 m?") == ["m"]  # a symbol right after its number


def test_unit_fields_are_recognised_by_name_or_description():
    assert is_unit("from_unit", {}) and is_unit("unit", {}) and is_unit("targetUnits", {})
    assert is_unit("x", {"description": "the unit to convert into"})
    assert not is_unit("city", {"description": "a city"})


def test_a_conversion_takes_each_side_from_where_the_text_marks_it():
    g = ground_arguments(CONVERT, "how many cm is 5 feet")
    props = g.schema["properties"]
    assert not g.ungrounded
    assert props["from_unit"]["enum"] == ["feet"] and props["to_unit"]["enum"] == ["cm"]
    g = ground_arguments(CONVERT, "How many feet is 3 m?")
    assert g.schema["properties"]["from_unit"]["enum"] == ["m"] and g.schema["properties"]["to_unit"]["enum"] == ["feet"]
    g = ground_arguments(CONVERT, "Convert -40 degrees Fahrenheit to Celsius.")
    props = g.schema["properties"]
    assert props["from_unit"]["enum"] == ["Fahrenheit"] and props["to_unit"]["enum"] == ["Celsius"]
    g = ground_arguments(CONVERT, 'Oslo in Fahrenheit?\nTool get_weather returned: {"temperature_c": -3}')
    assert g.schema["properties"]["from_unit"]["enum"] == ["c"]
    assert g.schema["properties"]["to_unit"]["enum"] == ["Fahrenheit"]


def test_a_text_with_fewer_than_two_units_grounds_no_conversion():
    assert set(ground_arguments(CONVERT, "Can you explain what a black hole is in one sentence?").ungrounded) \
        >= {"from_unit", "to_unit"}
    assert {"from_unit", "to_unit"} <= set(ground_arguments(CONVERT, "Convert 100 dollars to pounds.").ungrounded)


def test_a_conversion_between_names_of_one_unit_or_of_two_dimensions_is_none():
    assert canonical_unit("metres") == canonical_unit("m") == "m" and canonical_unit("°F") == canonical_unit("Fahrenheit")
    for text in ("raised bed: 3.4m long, 1.75m wide, 0.3m deep. how many cubic metres of soil?",
                 "the tank measures 120cm by 45cm by 50cm. How many litres does it hold?"):
        assert {"from_unit", "to_unit"} <= set(ground_arguments(CONVERT, text).ungrounded), text
    assert ground_arguments(CONVERT, "how many cm is 5 feet").ungrounded == []


def test_a_unit_pair_is_held_to_one_dimension_the_first_from_unit_shares_with_a_to_unit():
    assert (dimension("Miles"), dimension("° F"), dimension("lbs"), dimension("parsec")) == (
        "length", "temperature", "mass", None)
    text = "It weighs 12 lbs and is 60 cm long. Give me the weight in kg and the length in inches."
    props = ground_arguments(CONVERT, text).schema["properties"]
    assert props["from_unit"]["enum"] == ["lbs"] and props["to_unit"]["enum"] == ["kg"]
    both = ground_arguments(CONVERT, text, one_dimension=False).schema["properties"]  # what owes the second call
    assert both["from_unit"]["enum"] == ["lbs", "cm"] and both["to_unit"]["enum"] == ["kg", "inches"]


def test_a_to_side_lists_on_units_and_currencies_not_other_words():
    assert pair_phrases("14 gallons and 400 miles: can you put those in litres and kilometres?")[1] == [
        "litres", "kilometres"]
    assert pair_phrases("100 USD in euros, pounds and yen")[1] == ["euros", "pounds", "yen"]
    assert pair_phrases("Convert 100 dollars to euros and tell me a joke")[1] == ["euros"]


def test_an_unmarked_to_side_is_the_other_unit_and_the_value_the_measured_number():
    props = ground_arguments(CONVERT, "Bread wants 2.5 lbs of flour and my scale only shows grams, 2 of them").schema[
        "properties"]
    assert props["from_unit"]["enum"] == ["lbs"] and props["to_unit"]["enum"] == ["grams"]
    assert props["value"]["enum"] == [2.5]  # the number written with a unit, not the count of scales


def test_a_unit_written_onto_its_number_and_a_symbol_after_degrees_count():
    assert number_units("just bought a 16kg kettlebell, and 2lbs of flour") == ["kg", "lbs"]
    props = ground_arguments(CONVERT, "bake at 350 degrees F for 40 mins, my oven is in celsius").schema["properties"]
    assert props["from_unit"]["enum"] == ["F"] and props["to_unit"]["enum"] == ["celsius"]
    assert props["value"]["enum"] == [350]


def test_the_amount_converted_is_one_written_in_the_from_side_unit():
    props = ground_arguments(CONVERT, "I'm 154 lbs and 1.75 m tall. convert my weight to kg and work out my BMI").schema[
        "properties"]
    assert props["from_unit"]["enum"] == ["lbs"] and props["value"]["enum"] == [154]  # not the height's 1.75
    said = "Everest is over 5 miles high. look up its height in miles\n{\"top_result\": \"Everest is 8,849 metres high.\"}"
    props = ground_arguments(CONVERT, said).schema["properties"]
    assert props["from_unit"]["enum"] == ["metres"] and props["value"]["enum"] == [8849]
    props = ground_arguments(CONVERT, "recipe says 2 1/2 cups milk but my jug only has ml markings").schema["properties"]
    assert props["value"]["enum"] == [2.5]
