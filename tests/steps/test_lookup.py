"""A request that asks for the present or a look-up (agentkit.steps.lookup) and the decision it moves."""

from agentkit.steps.decision import ADVICE, LOOKUP, SEARCHED, DecisionAsk, decide
from agentkit.steps.lookup import (
    asks_advice,
    asks_fact,
    asks_lookup,
    asks_present,
    asks_search,
    asks_to_search,
    asks_writing,
    request_of,
    searches,
    searches_it,
)


def test_the_present_and_a_look_up_are_asked_in_words():
    for text in ("is it raining in Istanbul right now", "how sticky is mumbai rn?", "What's the latest Python?",
                 "Can you look it up?", "search for Dune", "check online when Bitcoin appeared",
                 "Could you find out the record?", "how cold is Lima at the moment", "how warm is it in lisbon today"):
        assert asks_lookup(text), text
    for text in ("OK, bye for now!", "I love rainy weather", "How do I tell if a site in my search results is safe?",
                 "I keep a work Google calendar and a paper diary", "How do I make Google show exact phrases?",
                 "Explain how currency exchange rates work", "hey :)"):
        assert not asks_lookup(text), text


def test_the_request_is_the_last_user_message():
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}]
    assert request_of(chat) == "c" and request_of([{"role": "system", "content": "s"}]) == ""


def _decided(ask, *answers):
    gen = decide(ask)
    request = next(gen)
    try:
        for scores in answers:
            request = gen.send({n: scores[n] for n in request.names})
    except StopIteration as stop:
        return stop.value
    raise AssertionError(f"the decision asked for more scores: {request}")


NAMES = ["get_weather", "web_search"]
ANSWERS = {"respond": -0.5, "get_weather": -3.0, "web_search": -4.0}  # the raw margin answers
BASELINE = {"respond": -0.1, "get_weather": -5.0, "web_search": -4.5}  # the calibrated margin calls


def test_a_raw_margin_that_answers_calls_where_the_request_asks_the_present_and_the_calibrated_one_calls():
    ask = lambda text, **kw: DecisionAsk("auto", [{"role": "user", "content": text}], NAMES, "respond", "h",
                                         calibrate=False, **kw)
    live = _decided(ask("is it raining in Oslo right now?"), ANSWERS, BASELINE)
    assert (live.call, live.tool, live.info["by"]) == (True, "get_weather", LOOKUP)
    assert _decided(ask("I love rainy weather"), ANSWERS, BASELINE).call is False  # no such words: raw stands
    holding = {"respond": -8.0, "get_weather": -0.5, "web_search": -1.0}  # the baseline leans to the tools more
    assert _decided(ask("is it raining in Oslo right now?"), ANSWERS, holding).call is False


def test_a_request_that_asks_to_search_calls_a_search_tool_first():
    assert asks_search("Look up how tall the Eiffel Tower is") and not asks_search("is it cold right now?")
    assert asks_lookup("find out which city my lunch is in") and not asks_search("find out which city it's in")
    assert searches("web_search") and searches("searchDocs") and searches("look_up_word") and not searches("get_weather")
    ask = lambda text: DecisionAsk("auto", [{"role": "user", "content": text}], NAMES, "respond", "h", calibrate=False)
    weather_first = {"respond": -3.0, "get_weather": -0.5, "web_search": -2.0}  # the raw margin calls get_weather
    searched = _decided(ask("Look up how tall the Eiffel Tower is"), weather_first, BASELINE)
    assert (searched.call, searched.tool, searched.info["searched"]) == (True, "web_search", True)
    plain = _decided(ask("Is it windy in Oslo?"), weather_first, BASELINE)
    assert (plain.call, plain.tool) == (True, "get_weather")  # no look-up asked: the scores' pick stands


def test_a_question_for_a_recorded_fact_calls_a_search_tool_whatever_the_margin():
    for text in ("how long is the amazon river?", "when was bitcoin created? and how many years ago is that",
                 "louvre opening hours?? going this week", "is the louvre open on tuesdays??",
                 "whats the current marathon world record", "find out how tall everest is"):
        assert asks_fact(text), text
    for text in ("how long would it take to walk 20 km", "who wrote pride and prejudice again?", "How tall am I in feet",
                 "when did I last see Sam?", "how long is it in miles", "What's a good way to layer clothes?"):
        assert not asks_fact(text), text
    ask = lambda text, names=NAMES: DecisionAsk("auto", [{"role": "user", "content": text}], names, "respond", "h",
                                                calibrate=False)
    answers = {"respond": -0.1, "get_weather": -3.0, "web_search": -4.0}  # both margins answer
    fact = _decided(ask("how long is the amazon river? need it in miles"), answers, BASELINE)
    assert (fact.call, fact.tool, fact.info["by"]) == (True, "web_search", SEARCHED)
    asked = _decided(ask("look up what the newest python release is pls"), answers, BASELINE)
    assert (asked.call, asked.tool) == (True, "web_search")
    assert _decided(ask("how long is the amazon river?", ["get_weather"]),
                    {"respond": -0.1, "get_weather": -3.0}).call is False  # no search tool: the margin stands
    assert _decided(ask("I love rainy weather"), answers, BASELINE).call is False


def test_advice_an_explanation_or_thanks_is_answered_where_the_margin_calls_and_no_tool_is_covered():
    for text in ("Any tips for budgeting when you earn in one currency?", "How do search engines decide what's first?",
                 "nvm about the exchange rate thing, sorted it", "explain compound interest to me like im 12"):
        assert asks_advice(text), text
    for text in ("Is it snowing in Reykjavik?", "dinner was $86.40, add an 18% tip", "search the marathon record"):
        assert not asks_advice(text), text
    ask = lambda text, covered=(): DecisionAsk("auto", [{"role": "user", "content": text}], NAMES, "respond", "h",
                                               calibrate=False, covered=covered)
    calls = {"respond": -3.0, "get_weather": -0.5, "web_search": -2.0}  # the raw margin calls
    advice = _decided(ask("What's a good way to layer clothes when the weather flips between sun and drizzle?"),
                      calls, BASELINE)
    assert (advice.call, advice.info["by"]) == (False, ADVICE)
    assert _decided(ask("Should I bring a coat to Helsinki today? What's the weather?"), calls, BASELINE).call
    assert _decided(ask("Any tips for Oslo in March?", ("get_weather",)), calls, BASELINE).call  # covered: a call


def test_advice_that_tells_of_a_search_is_answered_and_not_now_asks_for_nothing_present():
    told = "I keep searching stuff online and getting junk. any tips for writing better search queries?"
    assert asks_lookup(told) and not asks_to_search(told) and asks_to_search("any tips? can you search for some")
    assert asks_to_search("look up the Louvre's hours") and asks_to_search("ok. search who won")
    assert not asks_present("best time of year to visit Lisbon? not now obviously") and asks_present("Lisbon now?")
    assert asks_advice("when's the best time of year to visit Lisbon?") and asks_advice("spooky name ideas?")
    ask = lambda text: DecisionAsk("auto", [{"role": "user", "content": text}], NAMES, "respond", "h", calibrate=False)
    answers = {"respond": -0.1, "get_weather": -3.0, "web_search": -4.0}  # both margins answer
    assert _decided(ask(told), answers, BASELINE).call is False  # neither a search nor the calibrated margin
    calls = {"respond": -3.0, "get_weather": -2.0, "web_search": -0.5}  # the raw margin calls
    assert _decided(ask(told), calls, BASELINE).info["by"] == ADVICE
    asked = _decided(ask("any tips for a first marathon? search the web for some pls"), answers, BASELINE)
    assert (asked.call, asked.tool, asked.info["by"]) == (True, "web_search", SEARCHED)
    present = _decided(ask("should I bring a coat to Oslo right now? any tips"), calls, BASELINE)
    assert present.call  # the present asked: no advice rule


def test_a_search_of_it_where_another_tool_is_covered_is_that_tools_call():
    text = "I have a lunch on Thursday but I forgot which city it's in. Could you look it up?"
    assert searches_it(text) and not searches_it("look up the Louvre's hours")
    names = ["get_calendar_events", "web_search"]
    ask = lambda text, covered: DecisionAsk("auto", [{"role": "user", "content": text}], names, "respond", "h",
                                            calibrate=False, covered=covered)
    answers = {"respond": -0.1, "get_calendar_events": -3.0, "web_search": -4.0}
    base = {"respond": -0.1, "get_calendar_events": -5.0, "web_search": -4.5}
    own = _decided(ask(text, ("get_calendar_events",)), answers, base)
    assert (own.call, own.tool) == (True, "get_calendar_events")
    searched = _decided(ask("look it up: how tall is the eiffel tower", ()), answers, base)
    assert (searched.call, searched.tool) == (True, "web_search")  # nothing else covered: the search


def test_a_difference_explained_or_an_opinion_asked_is_advice():
    assert asks_advice("What's the actual difference between weather and climate? People mix them up online.")
    assert asks_advice("72k at a startup or 65k at a big company. Not asking you to do maths, which would you pick?")
    assert asks_advice("ok that's all for now, bye! talk tomorrow")
    assert asks_advice("What are some traditional Irish dishes I could cook on the 17th for a few friends?")


def test_a_writing_request_a_substitution_and_general_knowledge_are_answered_by_the_model():
    assert asks_writing("My Tuesday meeting got moved to Thursday. Can you help me draft a quick note to the team?")
    assert not asks_writing("what's on my calendar thursday?")
    for text in ("What currency do they use in Switzerland?", "2 cups of flour. Can I use baking powder instead?",
                 "1 cup buttermilk... can i just use milk with a tablespoon of lemon juice? will it still work",
                 "how do i search for emails from one specific sender in outlook on my phone"):
        assert asks_advice(text), text


def test_a_search_the_user_tells_of_doing_asks_none():
    assert not asks_search("I'll search for a new laptop later tonight. What specs actually matter for a student?")
    assert asks_search("I tried googling it but nothing. can you search it")  # the second search is asked
