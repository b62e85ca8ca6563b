"""Arithmetic a request asks for, and the expressions that may answer it (agentkit.constrain.arithmetic)."""

import re

from agentkit.constrain.arithmetic import (
    expression_pattern,
    implied_operators,
    rate_asked,
    word_problem,
    written_expressions,
)
from agentkit.constrain.ground import ARGUMENT_KINDS, ground_schema

CALC = {"type": "object", "required": ["expression"], "properties": {"expression": {"type": "string"}}}


def test_the_operators_are_those_the_words_name():
    assert implied_operators("Can you divide 640 by 16?") == ("/",)
    assert implied_operators("I make 22.50 an hour and worked 30 hours") == ("*",)
    assert implied_operators("a 4.5% commission on 12,000") == ("*",)  # 4.5% * 12000
    assert implied_operators("4.5 percent of 12,000") == ("*", "/")  # 4.5 * 12000 / 100
    assert implied_operators("200 tickets at 8.50 each, and the hall cost 600: what profit?") == ("-", "*")
    assert implied_operators("3 to the power of 4") == ("**",)
    assert implied_operators("I have 3 cats and 2 dogs") == ()  # none named: any operator
    assert implied_operators("Open 9:00-18:00, call 415-555-0138, on 2026-03-05") == ()  # no subtraction


def test_an_expression_uses_only_the_named_operators_or_any_where_none_is_named():
    p = expression_pattern("Can you divide 640 by 16?")
    assert re.fullmatch(p, "640 / 16") and not re.fullmatch(p, "640 * 16") and not re.fullmatch(p, "640 - 16")
    anything = expression_pattern("I have 3 cats and 2 dogs")
    assert all(re.fullmatch(anything, f"3 {op} 2") for op in ("+", "-", "*", "/", "**"))


def test_an_expression_written_in_signs_is_read_whole():
    assert written_expressions("need (1820 - 365) / 7 worked out, thx") == ["(1820 - 365) / 7"]
    assert written_expressions("what's 3,456 x 78 and 2^10") == ["3456 * 78", "2**10"]
    assert written_expressions("is (347 + 589) × 14 ÷ 8 right?") == ["(347 + 589) * 14 / 8"]
    for text in ("Open 9:00-18:00", "call 415-555-0138", "Any meetings on 2026-03-05?", "What is 17.5 times 23?"):
        assert written_expressions(text) == [], text


def test_a_written_expression_is_the_argument_a_calculator_takes():
    g = ground_schema(CALC, "need (1820 - 365) / 7 worked out, thx", kinds=ARGUMENT_KINDS)
    assert g.schema["properties"]["expression"]["enum"] == ["(1820 - 365) / 7"] and g.kinds["/expression"] == "expression"
    words = ground_schema(CALC, "Can you divide 640 by 16?", kinds=ARGUMENT_KINDS).schema["properties"]["expression"]
    assert "enum" not in words and re.fullmatch(words["pattern"], "640 / 16")


def test_an_expression_uses_each_number_once_in_the_order_the_request_writes_them():
    p = expression_pattern("Can you divide 98765 by 43 for me? Two decimal places is fine.")
    assert re.fullmatch(p, "98765 / 43") and re.fullmatch(p, "98765 / 43 / 2")  # "two" in words: optional
    assert not re.fullmatch(p, "43 / 98765") and not re.fullmatch(p, "43 / 43") and not re.fullmatch(p, "98765 / 2")
    assert not re.fullmatch(expression_pattern("a bill of 287.40 split between 6"), "287.40% / 6")  # no percent
    assert re.fullmatch(expression_pattern("subtract 5 from 20"), "20 - 5")  # "from" turns it round


def test_a_rate_written_with_a_slash_is_a_number_that_multiplies():
    text = "I did 37.5 hours at $64/hr, plus a flat 120 for materials. What's the total?"
    p = expression_pattern(text)
    assert re.fullmatch(p, "37.5 * 64 + 120") and not re.fullmatch(p, "37.5 + 120")
    assert written_expressions("call 415-555-0138") == [] and implied_operators("call 415-555-0138") == ()


def test_words_that_divide_subtract_or_multiply_measures():
    assert implied_operators("if someone walked 25 km every day, how many days would it take?") == ("/",)
    assert implied_operators("each box of tiles covers 1.44 square metres, room is 4.2m x 3.65m") == ("*", "/")
    assert implied_operators("the tank is 120cm by 45cm by 50cm") == ("*",)
    assert implied_operators("what year was it, and how many years ago is that from 2026?") == ("-",)
    assert implied_operators("I have £1,240 left and 11 weeks to go") == ()  # an amount left: no subtraction
    assert implied_operators("how much is left after 20,000?") == ("-",)
    assert implied_operators("divide 98765 by 43") == ("/",)  # "by" between numbers alone measures nothing


def test_a_word_that_puts_a_later_number_first_lets_an_owed_expression_take_any_order():
    p = expression_pattern("1969\nhow many years ago is that from 2026?", must=[1969])
    assert re.fullmatch(p, "2026 - 1969") and re.fullmatch(p, "1969 - 2026")
    ordered = expression_pattern("1969\nhow many years is that plus 2026?", must=[1969])
    assert not re.fullmatch(ordered, "2026 + 1969") and re.fullmatch(ordered, "1969 + 2026")


def test_a_share_asked_as_a_percentage_divides_in_either_order_and_times_a_hundred():
    text = "I take home 3k a month and my rent is 1,150. What percentage of my income is going on rent?"
    assert implied_operators(text) == ("*", "/")
    p = expression_pattern(text)
    assert re.fullmatch(p, "1150 / 3000 * 100") and not re.fullmatch(p, "3000 + 1150")
    assert implied_operators("what % of my pay does 1,450 eat") == ("*", "/")


def test_the_words_between_two_numbers_name_the_operator_that_joins_them():
    p = expression_pattern("ordering 14 boxes of printer paper at 23.50 each plus 12.99 shipping, total?")
    assert re.fullmatch(p, "14 * 23.5 + 12.99") and not re.fullmatch(p, "14 * 23.5 * 12.99")
    assert re.fullmatch(p, "14 + 23.5 + 12.99")  # nothing named between the first two: the text's operators
    assert implied_operators("dinner came to 187.40 and there's 6 of us, how much each?") == ("/",)
    assert word_problem("dinner came to 187.40 and there's 6 of us, how much each?")
    assert implied_operators("how tall is it? and roughly how many of me (1.8m) stacked up would that be") == ("/",)


def test_a_share_asked_as_a_percentage_is_part_over_whole_times_a_hundred():
    p = expression_pattern("I take home 3k a month and my rent is 1,150. What percentage of my income is rent? "
                           "Am I over the 30% rule?")
    assert re.fullmatch(p, "1150 / 3000 * 100") and re.fullmatch(p, "(1150/3000)*100")
    assert not re.fullmatch(p, "100*1150") and not re.fullmatch(p, "30 / 3000 * 100")  # a percent is no part
    owed = expression_pattern("1576.09\nwhat % of my pay it eats, pay 3800", must=[1576.09])
    assert re.fullmatch(owed, "1576.09 / 3800 * 100") and not re.fullmatch(owed, "3800 / 3800 * 100")


def test_a_rate_asked_between_two_units_divides_the_numbers_written_in_them():
    text = "Did a long road trip: 412 km on 31.6 litres of fuel. What's my consumption in litres per 100 km?"
    assert word_problem(text)
    p = expression_pattern(text)
    assert re.fullmatch(p, "31.6 / 412 * 100") and not re.fullmatch(p, "412 / 31.6 * 100")
    assert re.fullmatch(expression_pattern("drove 300 km on 20 litres, how many km per litre"), "300 / 20")
    assert rate_asked("it costs 5 dollars per 100 km") is None  # no number written in dollars beside a unit pair


def test_what_is_left_asked_subtracts_and_words_far_apart_name_no_join():
    text = "Take-home is about 3k a month. Rent's 1,140 and utilities plus phone come to 385.75. What's left over?"
    assert implied_operators(text) == ("-",)
    assert re.fullmatch(expression_pattern(text), "3000 - 1140 - 385.75")
    far = expression_pattern("I earn 3000 and then utilities plus phone and such come to 385.75, total?")
    assert re.fullmatch(far, "3000 + 385.75")  # "plus" is four words from the numbers: no join of its own


def test_an_amount_shared_among_people_is_divided_by_their_count_whatever_the_order():
    p = expression_pattern("we're 7 ppl splitting a 2,340.75 bill for the cabin, whats each person's share")
    assert re.fullmatch(p, "2340.75 / 7") and not re.fullmatch(p, "7 / 2340.75")


def test_a_fraction_is_written_exactly_and_a_monthly_amount_is_a_rate():
    text = "if i stash away 1/3 of my 4,275 monthly take-home pay, how much will i have saved after 14 months?"
    assert word_problem(text) and written_expressions(text) == []  # the fraction is one number, not the expression
    assert re.fullmatch(expression_pattern(text), "1/3 * 4275 * 14")
    assert written_expressions("what is 3/4") == ["3/4"]


def test_a_budget_over_a_price_and_an_amount_over_a_limit():
    owed = expression_pattern("280\nwith a $ budget how many nights can i afford? 1000", must=[280])
    assert re.fullmatch(owed, "1000 / 280")
    assert implied_operators("how many kg over the limit I am") == ("-",)


def test_an_average_sums_the_numbers_and_divides_by_their_count():
    p = expression_pattern("Our last three electricity bills were 1250, 890.50 and 2300. What's the average bill?")
    assert re.fullmatch(p, "(1250 + 890.5 + 2300) / 3") and not re.fullmatch(p, "1250/890.5/2300")


def test_a_percent_on_top_of_an_amount_adds_it_then_shares_the_total():
    p = expression_pattern("Dinner came to $86.40 and I want to leave an 18% tip on top. What total?")
    assert re.fullmatch(p, "86.4 * (1 + 18%)") and re.fullmatch(p, "86.4 + 86.4 * 18%")
    assert not re.fullmatch(p, "86.4 + 18%")
    shared = expression_pattern("dinner came to 187.40, we add 18% tip on top and split it 4 ways. what's each?")
    assert re.fullmatch(shared, "187.4 * (1 + 18%) / 4") and not re.fullmatch(shared, "187.4 + 187.4 * 18% / 4")


def test_left_over_told_is_no_subtraction_and_on_top_of_each_other_no_sum():
    told = "Got €300 left over from Italy plus $150 cash in my wallet. How much is that all together in US dollars?"
    assert implied_operators(told) == ("+",)
    assert implied_operators("how much over I am") == ("-",)
    assert "+" not in implied_operators("how many Eiffel Towers stacked on top of each other to reach 8,849 m")


def test_a_percent_in_words_is_over_a_hundred_and_by_how_many_over_subtracts():
    p = expression_pattern("bill came to $86.40 and i want to tip 18 percent, how much is the tip exactly")
    assert re.fullmatch(p, "86.4 * 18 / 100") and not re.fullmatch(p, "86.4*18")
    assert implied_operators("tell me by how many kg I'm over") == ("-",)


def test_an_amount_compounded_yearly_is_raised_to_its_years():
    p = expression_pattern("If I leave 4500 in savings at 3.2% a year, compounded annually, how much after 6 years?")
    assert re.fullmatch(p, "4500 * (1 + 3.2%) ** 6") and not re.fullmatch(p, "4500*3.2% * 6")


def test_numbers_listed_to_add_up_are_a_word_problem():
    assert word_problem("can you add these up for me: 42.99, 18.50, 7.25 and 103.40 - groceries this week")
    assert word_problem("tot it all up: 12.50, 8 and 3.25")
    assert not word_problem("I add 2 eggs and 250 g of flour")  # told, not asked to add up


def test_a_percent_written_with_its_sign_keeps_it_or_divides_by_a_hundred():
    p = expression_pattern("1161.76 15%\nthen work out   % of the pounds figure", [1161.76])
    assert re.fullmatch(p, "1161.76*15%") and re.fullmatch(p, "1161.76 * 15 / 100")
    assert not re.fullmatch(p, "1161.76*15")  # 15 times the amount is not 15% of it
    p = expression_pattern("what is 15% of 240?")
    assert re.fullmatch(p, "15% * 240") and not re.fullmatch(p, "15*240")
