"""Days a text names, resolved against today (agentkit.constrain.dates), and what reads them."""

from datetime import date

import pytest

from agentkit.constrain.dates import day_phrases, resolve_day, resolved_days, today
from agentkit.errors import UserError
from agentkit.steps.unserved import Mention, names_a_date
from agentkit.toolcall import call_grounded

MONDAY = date(2026, 3, 2)


def test_a_day_phrase_is_the_date_it_names_on_a_given_day():
    got = {p: resolve_day(p, MONDAY) for p in ("today", "tmrw", "thursday", "this Friday", "Monday", "the 20th",
                                                 "the 1st", "March 20", "20th of March", "jan 5", "next week")}
    assert got == {"today": "2026-03-02", "tmrw": "2026-03-03", "thursday": "2026-03-05", "this Friday": "2026-03-06",
                   "Monday": "2026-03-02", "the 20th": "2026-03-20", "the 1st": "2026-04-01",
                   "March 20": "2026-03-20", "20th of March": "2026-03-20", "jan 5": "2027-01-05", "next week": None}
    assert resolved_days("dinner this friday? and the 20th", MONDAY) == ["2026-03-06", "2026-03-20"]


def test_today_is_pinned_by_the_environment_and_a_bad_pin_is_a_typed_error(monkeypatch):
    monkeypatch.setenv("AGENTKIT_TODAY", "2026-03-02")
    assert today() == MONDAY and resolve_day("thursday") == "2026-03-05"
    monkeypatch.setenv("AGENTKIT_TODAY", "March 2")
    with pytest.raises(UserError, match="AGENTKIT_TODAY"):
        today()
    monkeypatch.delenv("AGENTKIT_TODAY")
    assert today() == date.today()


def test_a_weekday_names_a_date_where_the_request_asks_about_the_users_days():
    friday = Mention("day", "friday", "friday")
    assert names_a_date(friday, "am i free friday evening?") and names_a_date(friday, "anything on my plate friday?")
    assert not names_a_date(friday, "a job interview on friday, any tips?") and not names_a_date(friday)
    assert names_a_date(Mention("day", "tmrw", "tmrw"))
    assert names_a_date(Mention("day", "Thursday", "thursday"), "Check my Thursday for me")


def test_a_day_told_as_the_past_names_no_date_to_look_up():
    the_13th, yesterday = Mention("day", "the 13th", "the 13th"), Mention("day", "yesterday", "yesterday")
    assert not names_a_date(the_13th, "our cat was born on a friday the 13th lol. spooky name ideas?")
    assert not names_a_date(yesterday, "you were right about the rain in Berlin, got absolutely soaked yesterday")
    assert names_a_date(the_13th, "what's on the 13th?") and names_a_date(yesterday, "what did I have yesterday?")
    assert names_a_date(yesterday, "I missed something yesterday, remind me what it was")
    assert names_a_date(the_13th, "i got a dentist thing on the 13th, what time is it")


def test_a_call_with_the_iso_date_of_a_day_the_text_names_is_grounded(monkeypatch):
    monkeypatch.setenv("AGENTKIT_TODAY", "2026-03-02")
    assert call_grounded({"date": "2026-03-05"}, "anything on my plate thursday?")
    assert not call_grounded({"date": "2026-03-09"}, "anything on my plate thursday?")


def test_a_day_of_the_month_in_words_beside_a_month_is_a_date():
    assert day_phrases("What's in my diary for the twentieth of March?") == ["the twentieth of March"]
    assert resolve_day("March twenty-first", date(2026, 3, 2)) == "2026-03-21"
    assert day_phrases("you may first want to check") == [] and day_phrases("the first time") == []
    said = "What's in my diary for the twentieth of March?"
    assert names_a_date(Mention("day", "the twentieth of March", "the twentieth of march"), said)
    where = "lunch on thursday... where is it again?"
    assert names_a_date(Mention("day", "thursday", "thursday"), where)  # asked about the user's own day


def test_a_day_in_a_request_for_advice_and_an_own_event_told_on_a_weekday():
    the_14th, thursday = Mention("day", "the 14th", "the 14th"), Mention("day", "Thursday", "thursday")
    assert not names_a_date(the_14th, "my grandma's birthday is on the 14th. any gift ideas that aren't a plant?")
    assert not names_a_date(Mention("day", "Friday", "friday"), "I have an interview on Friday, any tips?")
    assert names_a_date(thursday, "I have a lunch on Thursday but I forgot which city it's in. Could you look it up?")
    assert names_a_date(thursday, "what've i got on thursday")
    moved = "My Tuesday planning meeting got moved to Thursday. Can you help me draft a quick note to the team?"
    assert not names_a_date(Mention("day", "Tuesday", "tuesday"), moved)  # a note to write, not the calendar


def test_a_day_and_month_with_a_slash_is_read_where_no_month_comes_first():
    assert day_phrases("what I have in my agenda on 14/03?") == ["14/03"]
    assert resolve_day("14/03", on=MONDAY) == "2026-03-14"
    assert resolve_day("5 of March", on=MONDAY) == "2026-03-05"
    assert day_phrases("3/4 cup of flour") == [] and day_phrases("on 03/04") == []  # a fraction; either order
