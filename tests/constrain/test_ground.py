"""Grounded values: the substring automaton admits exactly the text's spans (whatever the tokens), intersected with
the slot's own language; numbers, dates and currency codes the text writes; placeholders refused; the per-field and
per-call options; abstention decided by the scores of null and the value."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from agentkit.constrain.compiler import compile_schema
from agentkit.constrain.dates import text_dates
from agentkit.constrain.ground import (
    PLAIN_BODY,
    ground_schema,
    grounded_template,
    placeholders,
    span_edges,
    text_currencies,
)
from agentkit.constrain.numbers import text_numbers
from agentkit.constrain.runtime import TokenConstraint
from agentkit.constrain.spans import ExcludeDFA, SpanDFA
from agentkit.constrain.vocab import slot_index
from agentkit.errors import UserError
from agentkit.evals.extract_run import type_lists


def _accepts(dfa, v, data: bytes) -> bool:
    """Whether some split of ``data`` into tokens walks ``dfa`` from its start to a final state (every split)."""
    def go(state, rest: bytes) -> bool:
        if not rest:
            return dfa.is_final(state)
        for n in range(1, min(len(rest), v.max_len) + 1):
            for t in v.by_bytes.get(rest[:n], ()):
                nxt = dfa.next(state, t)
                if nxt is not None and go(nxt, rest[n:]):
                    return True
        return False

    return go(dfa.initial(), data)


def test_substring_automaton_admits_exactly_the_spans(vocab):
    _tok, v = vocab
    text = "Ann Lee (Oslo) paid INV-3302."
    dfa = SpanDFA(text, slot_index(PLAIN_BODY, v), v)
    starts, ends = span_edges(text.encode())
    # a span starts at a word's first letter or digit or at an opener ("(", "+", "$"...) and ends at a word's last
    # one or a closer (")", "%"); INV-3302 is one word
    assert starts == {0, 4, 8, 9, 15, 20} and ends == {3, 7, 13, 14, 19, 28}
    for i in range(len(text)):
        for j in range(i + 1, len(text) + 1):
            want = i in starts and j in ends
            assert _accepts(dfa, v, text[i:j].encode()) == want, text[i:j]
    for other in ["Bob", "Lee Ann", "ann", "INV-3302.x", "3302", "Osl", ""]:
        assert not _accepts(dfa, v, other.encode()), other


def test_spans_stop_at_clause_breaks(vocab):
    _tok, v = vocab
    text = "Nomvula Khumalo, 082 555 0134; Durban - Bath. Ms. Lee"
    dfa = SpanDFA(text, slot_index(PLAIN_BODY, v), v)
    for span in ["Nomvula Khumalo", "082 555 0134", "Durban", "Bath", "Lee", "Ms. Lee"]:  # a title's ". " joins
        assert _accepts(dfa, v, span.encode()), span
    for span in ["Nomvula Khumalo, 082", "0134; Durban", "Durban - Bath", "Bath. Ms"]:
        assert not _accepts(dfa, v, span.encode()), span
    dfa = SpanDFA("Harvest Gala on 4 October 2025 at the Old Corn Exchange", slot_index(PLAIN_BODY, v), v)
    assert _accepts(dfa, v, b"Harvest Gala") and _accepts(dfa, v, b"the Old Corn Exchange")
    # nor starts inside a date (an article is the field fence's: tests/constrain/test_fences.py)
    for span in ["Gala on 4 October", "October 2025 at the", "Harvest Gala on", "at the", "the", "October"]:
        assert not _accepts(dfa, v, span.encode()), span


def test_spans_keep_a_numbers_sign_and_thousands_and_end_in_a_content_word(vocab):
    _tok, v = vocab
    text = "Call +54 11 5555 0190 about GBP 1,120.50 for the Winter Market on Friday"
    dfa = SpanDFA(text, slot_index(PLAIN_BODY, v), v)
    for span in ["+54 11 5555 0190", "1,120.50", "GBP 1,120.50", "the Winter Market", "Winter Market on Friday"]:
        assert _accepts(dfa, v, span.encode()), span
    for span in ["54 11 5555 0190", "1", "120.50", "the Winter Market on", "for the", "Market on",
                 "for the Winter Market", "on Friday"]:  # nor starts with a preposition
        assert not _accepts(dfa, v, span.encode()), span


def test_a_number_field_takes_the_number_written_next_to_its_word():
    from agentkit.constrain.ground import anchored_numbers

    text = "Room for Ana Silva, checking in 14 July 2025 for 5 nights, 3 guests, ref 88."
    names = ("guest_name", "nights", "guests", "ref")
    assert anchored_numbers("nights", text, names) == [5]
    assert anchored_numbers("guests", text, names) == [3]
    assert anchored_numbers("guests", "four nights, two guests", names) == [2]
    # no word of its own: every number but those another field's word anchors
    assert anchored_numbers("ref", text, ("nights", "guests")) == [88]
    assert anchored_numbers("quantity", "150 notebooks at 2.40 each", ("product",)) == [150, 2.4]
    assert anchored_numbers("nights", "3 guests", ("nights", "guests")) == [3]  # none left: all of them
    assert anchored_numbers("quantity", "150 notebooks at 2.40 each", ("product",), integers=True) == [150]
    # a schema's title is not a field's word: "Order: 10 chairs" leaves 10 to the quantity
    schema = {"title": "Order", "type": "object", "properties": {"quantity": {"type": "integer"},
                                                                  "order_id": {"type": "string"}}}
    assert ground_schema(schema, "Order: 10 chairs at 19.99 each").schema["properties"]["quantity"]["enum"] == [10]


def test_a_span_is_never_a_field_name_by_itself():
    schema = {"type": "object", "properties": {"room_type": {"type": "string"}, "nights": {"type": "integer"}},
              "required": ["room_type", "nights"]}
    g = ground_schema(schema, "Two nights, Room type: double room.")
    assert set(g.exclude["/room_type"]) == {"nights", "Room type"}


def test_spans_cross_token_boundaries(vocab):
    """A span is read the same whether the tokenizer's own tokens or single bytes spell it."""
    tok, v = vocab
    text = "Meet Ingeborg Halvorsen in Tromsø"
    dfa = SpanDFA(text, slot_index(PLAIN_BODY, v), v)
    for span in ["Ingeborg Halvorsen", "Halvorsen in Tromsø", "Tromsø"]:
        ids = tok.encode(span, add_special_tokens=False)
        s = dfa.initial()
        for t in ids:
            s = dfa.next(s, t)
        assert s is not None and dfa.is_final(s)
        s = dfa.initial()
        for b in span.encode():
            s = dfa.next(s, v.by_bytes[bytes([b])][0])
        assert s is not None and dfa.is_final(s)
    assert all(v.token_bytes[t] for t in dfa.allowed(dfa.initial()))
    assert dfa.close_distance(dfa.initial()) == 4  # "Meet" ("in" is a function word: never a span by itself)


def test_spans_intersect_with_the_slot_pattern(vocab):
    _tok, v = vocab
    text = "Call 415-555-0138 or 021 555 0190, not 42."
    tpl = compile_schema({"type": "string", "pattern": "^[0-9][0-9 -]+[0-9]$"}, style="spaced")
    slot = tpl.root.items[1]
    dfa = SpanDFA(text, slot_index(slot.regex, v), v)
    assert _accepts(dfa, v, b"415-555-0138") and _accepts(dfa, v, b"021 555 0190") and _accepts(dfa, v, b"555")
    assert not _accepts(dfa, v, b"Call 415") and not _accepts(dfa, v, b"42.") and not _accepts(dfa, v, b"123-456")


def test_numbers_dates_and_currencies_the_text_writes():
    text = ("Paid €1,234.56 and CHF 3,480.00 on the 2nd of June 2024; twelve boxes, a dozen cups, forty-two pens, "
            "due March 31, 2025 (ref 2025-04-01), A$14.50 each, 7,215.30 euros.")
    nums = text_numbers(text)
    assert set(nums) == {1234.56, 3480, 12, 42, 14.5, 7215.3}  # a date's day and year are not numbers
    assert text_dates(text) == ["2024-06-02", "2025-03-31", "2025-04-01"]
    assert text_dates("Thursday 8 May 2025 and Oct 4th, 2025, not 31 February 2025") == ["2025-05-08", "2025-10-04"]
    assert text_currencies(text) == ["EUR", "CHF", "AUD"]
    assert text_currencies("It was $40, or 20 pounds.") == ["USD", "GBP"]


class Invoice(BaseModel):
    vendor: str
    total: float
    quantity: int
    currency: str = Field(description="three-letter currency code")
    issued: str = Field(json_schema_extra={"format": "date"})
    note: str | None = Field(None, json_schema_extra={"grounded": False})
    email: str | None = None
    phone: str | None = None


TEXT = "Invoice from Fjordline Catering: 12 crates at 1,250.50 NOK, issued 28 February 2025. Call 415-555-0138."


def test_ground_schema_per_kind_and_the_overrides():
    g = ground_schema(Invoice.model_json_schema(), TEXT)
    props = g.schema["properties"]
    assert props["total"]["enum"] == [12, 1250.5]  # the phone's digits and the date's are not numbers
    assert props["quantity"]["enum"] == [12]
    assert props["currency"]["enum"] == ["NOK"]
    assert props["issued"]["enum"] == ["2025-02-28"]
    assert g.spans == {"/vendor", "/email", "/phone"} and g.kinds["/phone"] == "phone"
    assert "/note" not in g.spans and "Note" in g.exclude["/note"]  # per-field off: ungrounded, no placeholders
    off = ground_schema(Invoice.model_json_schema(), TEXT, grounded=False)
    assert not off.spans and "enum" not in off.schema["properties"]["total"]
    assert "123-456-7890" in off.exclude["/vendor"]
    on = ground_schema({"type": "object", "properties": {"a": {"type": "string", "grounded": True}}}, TEXT,
                       grounded=False)
    assert on.spans == {"/a"}


def test_a_list_of_types_is_grounded_as_its_anyof_is():
    """``{"type": ["string", "null"]}`` (the form OpenAI's strict mode asks for) is grounded as pydantic's
    ``anyOf`` of a string and null: spans, numbers, the placeholders refused; a field with no value is null."""
    schema = Invoice.model_json_schema()
    schema["properties"]["total"] = {"anyOf": [{"type": "number"}, {"type": "null"}]}
    listed = type_lists(schema)  # the eval's typelist setting
    assert listed["properties"]["email"]["type"] == ["string", "null"]
    assert listed["properties"]["total"]["type"] == ["number", "null"]
    a, b = ground_schema(schema, TEXT), ground_schema(listed, TEXT)
    assert b.spans == a.spans == {"/vendor", "/email", "/phone"} and b.kinds == a.kinds
    assert b.schema["properties"]["total"]["anyOf"][0]["enum"] == [12, 1250.5]
    assert b.schema["properties"]["phone"]["anyOf"][-1] == {"type": "null"}
    assert b.exclude["/note"] == a.exclude["/note"] and "Note" in b.exclude["/note"]  # ungrounded: no placeholders
    _, none = grounded_template(listed, "Ann Lee bought 3 lamps.", lambda s: compile_schema(s, strict=True))
    assert none.schema["properties"]["email"] == {"type": "null"}  # no span fits an email: null, as pydantic's


def test_bad_options_are_typed_errors():
    with pytest.raises(UserError, match="grounded"):
        ground_schema(Invoice.model_json_schema(), TEXT, grounded="yes")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="/a: grounded"):
        ground_schema({"type": "object", "properties": {"a": {"type": "string", "grounded": "no"}}}, TEXT)


def test_fields_without_a_value_are_left_out_or_flagged(vocab):
    tok, v = vocab
    schema = Invoice.model_json_schema()
    schema["required"] = [*schema["required"], "phone"]
    text = "Ann Lee bought 3 lamps."
    tpl, g = grounded_template(schema, text, lambda s: compile_schema(s, strict=True, style="spaced"))
    # no currency, date or phone in the text: required ones are flagged, the optional email has no span
    assert g.ungrounded == ["currency", "issued", "phone"] and g.schema["properties"]["total"]["enum"] == [3]
    assert g.schema["properties"]["email"] == {"type": "null"}
    assert tpl.schema == schema and tpl.meta["grounded_schema"] == g.schema
    c = TokenConstraint(tpl, v, tok)
    assert c.start() is not None


def _walk(c, v, target: str) -> bool:
    """Whether ``target`` can be written under the constraint, longest tokens first (pinned text as forced)."""
    s, out, want = c.start(), b"", target.encode()
    while out != want:
        ids = [t for t in c.allowed(s).nonzero().flatten().tolist() if v.token_bytes[t]
               and want.startswith(out + v.token_bytes[t])]
        if not ids:
            return False
        t = max(ids, key=lambda i: len(v.token_bytes[i]))
        s, out = c.advance(s, t), out + v.token_bytes[t]
    return c.is_done(s) or c.can_end(s)


def test_a_grounded_template_writes_only_the_text(vocab):
    tok, v = vocab
    schema = {"type": "object", "properties": {"title": {"type": "string"}, "n": {"type": "integer"},
                                               "who": {"type": "array", "items": {"type": "string"}}},
              "required": ["title", "n", "who"]}
    text = "Kickoff for Project Larkspur with Bogdan and Søren, 14 people."
    tpl, _ = grounded_template(schema, text, lambda s: compile_schema(s, strict=True, style="spaced"))
    c = TokenConstraint(tpl, v, tok)
    assert _walk(c, v, '{"title": "Kickoff for Project Larkspur", "n": 14, "who": ["Bogdan", "Søren"]}')
    assert not _walk(c, v, '{"title": "Title", "n": 14, "who": []}')
    assert not _walk(c, v, '{"title": "Kickoff", "n": 15, "who": []}')
    assert not _walk(c, v, '{"title": "Kickoff", "n": 14, "who": ["Attendees"]}')


def test_placeholders_are_refused_unless_the_text_has_them(vocab):
    _tok, v = vocab
    words = placeholders("title", {}, "Title: Budget review", ("date", "attendees"))
    assert "Title" not in words and "Attendees" in words and "123-456-7890" in words and "Due Date" not in words
    inner = slot_index(PLAIN_BODY, v)
    dfa = ExcludeDFA(inner, ("Title", "123-456-7890"), v)
    assert not _accepts(dfa, v, b"Title") and _accepts(dfa, v, b"Titles") and _accepts(dfa, v, b"Tit")
    assert not _accepts(dfa, v, b"123-456-7890") and _accepts(dfa, v, b"123-456-7891")
    assert dfa.close_distance(dfa.next(dfa.initial(), v.by_bytes[b"T"][0])) == 0


def test_settle_each_place_feeds_one_field_and_null_wins_on_the_scores(monkeypatch):
    """The None decision on a fake scorer: an optional value kept only where it scores above null; a value the
    text gives once, taken by an earlier field, is not given again; dates chosen by their whole score."""
    from agentkit.steps import grounded

    class Contact(BaseModel):
        name: str
        issued: str = Field(json_schema_extra={"format": "date"})
        due: str | None = Field(None, json_schema_extra={"format": "date"})
        city: str | None = None
        company: str | None = None

    text = "Ann Lee from Lagos, issued 4 May 2025, due 3 June 2025."
    spec = grounded.GroundedOutput(Contact, text)
    spec.template("spaced", True)
    assert spec.grounding is not None and spec.grounding.kinds["/due"] == "date"
    heads = []

    def fake_scores(engine, messages, head, conts):
        heads.append(head)
        table = {' "2025-05-04"': -0.1, ' "2025-06-03"': -2.0, " null": -3.0, ' "Lagos"': -0.5, ' "Ann Lee"': -0.2}
        return [[table[c]] for c in conts]

    monkeypatch.setattr(grounded, "value_scores", fake_scores)
    value = {"name": "Ann Lee", "issued": "2025-05-04", "due": "2025-05-04", "city": "Lagos", "company": "Lagos"}
    out, facts = grounded.settle(None, [], value, spec)
    # issued keeps the best date; due cannot take it again and gets the other date (above null); city and company
    # both score "Lagos" above null, city (first on a tie) takes its one place in the text, company has none left
    assert out == {"name": "Ann Lee", "issued": "2025-05-04", "due": "2025-06-03", "city": "Lagos", "company": None}
    assert facts["due"] == {'"2025-06-03"': -2.0, "null": -3.0}  # 2025-05-04 is the issue date's place
    assert "name" not in facts  # no other field wrote the name: the decoded one stands
    assert heads[-1] == '{"name": "Ann Lee", "issued": "2025-05-04", "due": "2025-05-04", "city": "Lagos", "company":'
    monkeypatch.setattr(grounded, "value_scores", lambda e, m, h, c: [[-0.1] if x == " null" else [-2.5] for x in c])
    out, _ = grounded.settle(None, [], value, spec)
    # null above every string: city and company None; a date is not weighed against null: due keeps the free one
    assert out == {"name": "Ann Lee", "issued": "2025-05-04", "due": "2025-06-03", "city": None, "company": None}


def test_settle_takes_the_best_code_and_keeps_a_phone_over_null(monkeypatch):
    """An identifier is chosen among the text's codes by its score; a phone number (a span of that shape) and a
    span holding the field's own word are not weighed against the one-token null, a plain string still is."""
    from agentkit.steps import grounded

    class Contact(BaseModel):
        invoice_number: str
        phone: str | None = None
        company: str | None = None
        room_type: str | None = None

    text = "Invoice from Adeyemi Catering, AC/2291 or AC/2292, call +33 4 72 55 01 88, twin room."
    spec = grounded.GroundedOutput(Contact, text)
    spec.template("spaced", True)
    assert spec.grounding is not None and spec.grounding.kinds["/invoice_number"] == "code"
    assert spec.grounding.kinds["/room_type"] == "held"
    table = {' "AC/2291"': -3.0, ' "AC/2292"': -1.0, " null": -0.1, ' "+33 4 72 55 01 88"': -9.0,
             ' "Adeyemi Catering"': -2.0, ' "twin room"': -8.0}
    monkeypatch.setattr(grounded, "value_scores", lambda e, m, h, conts: [[table[c]] for c in conts])
    value = {"invoice_number": "AC/2291", "phone": "+33 4 72 55 01 88", "company": "Adeyemi Catering",
             "room_type": "twin room"}
    out, _ = grounded.settle(None, [], value, spec)
    # a span holding the field's own word ("room") is not weighed against null either
    assert out == {"invoice_number": "AC/2292", "phone": "+33 4 72 55 01 88", "company": None,
                   "room_type": "twin room"}


def test_settle_gives_an_optional_list_the_places_the_optional_fields_left(monkeypatch):
    """An optional list of spans keeps the items whose place no field took, after the optional fields: ``Arts`` of
    the location's ``Marlow Arts Centre`` is no attendee."""
    from agentkit.steps import grounded

    class Event(BaseModel):
        title: str
        location: str | None = None
        attendees: list[str] | None = None

    spec = grounded.GroundedOutput(Event, "Spring fundraiser at the Marlow Arts Centre with Ines.")
    spec.template("spaced", True)
    monkeypatch.setattr(grounded, "value_scores", lambda e, m, h, conts: [[-1.0 if c != " null" else -3.0]
                                                                          for c in conts])
    value = {"title": "Spring fundraiser", "location": "Marlow Arts Centre", "attendees": ["Arts", "Ines"]}
    out, _ = grounded.settle(None, [], value, spec)
    assert out == {"title": "Spring fundraiser", "location": "Marlow Arts Centre", "attendees": ["Ines"]}


def test_settle_gives_a_name_two_fields_wrote_to_the_best_scoring_whole_name(monkeypatch):
    """A required proper name another field also wrote is chosen among the text's whole names by the model's
    score; the field after it keeps its own decoded value."""
    from agentkit.steps import grounded

    class Booking(BaseModel):
        guest_name: str
        hotel: str

    text = "Hi, this is Fatima Zahra Benali. I need a room at Riad Yasmine in Marrakech."
    spec = grounded.GroundedOutput(Booking, text)
    spec.template("spaced", True)
    assert spec.grounding is not None
    assert spec.grounding.whole_names["/guest_name"] == ["Fatima Zahra Benali", "Riad Yasmine", "Marrakech"]
    table = {' "Riad Yasmine"': -7.8, ' "Fatima Zahra Benali"': -5.0, ' "Marrakech"': -7.9}
    monkeypatch.setattr(grounded, "value_scores", lambda e, m, h, conts: [[table[c]] for c in conts])
    out, facts = grounded.settle(None, [], {"guest_name": "Riad Yasmine", "hotel": "Riad Yasmine"}, spec)
    assert out == {"guest_name": "Fatima Zahra Benali", "hotel": "Riad Yasmine"} and "hotel" not in facts


def test_a_fence_whose_only_span_is_refused_is_dropped():
    """"Name a city." holds no capitalised span a `name` may take but the field's own name, which it refuses: the
    name's fence goes (its spans are the text's), not a slot with no way through (the server answered 400 "takes
    about inf tokens")."""
    from agentkit.constrain import compiler
    from agentkit.constrain.ground import grounded_template

    city = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}}, "required": ["name"]}
    _, g = grounded_template(city, "Name a city.", lambda s: compiler.compile_schema(s, strict=True))
    assert "/name" in g.spans and "/name" not in g.fences


def test_a_lowercase_k_after_a_number_is_thousands():
    assert text_numbers("sold my bike for 1.2k kronor, a 50k salary") == [1200, 50000]
    assert text_numbers("it is 300K outside") == [300]  # a capital K is kelvin


def test_a_fraction_is_one_number():
    assert text_numbers("recipe says 2 1/2 cups milk and 3/4 cup sugar, 1½ tsp salt") == [2.5, 0.75, 1.5]
    assert text_numbers("see you on 3/4 at noon") == [] and text_numbers("5/4 cup") == []  # a date; no proper fraction


def test_hundreds_in_words_and_a_measure_before_a_hyphen_are_numbers():
    assert text_numbers("convert twelve hundred swedish kronor") == [1200]
    assert text_numbers("a 9-day trip, a 5-hour drive") == [9, 5]
    assert text_numbers("INV-3302 or 415-555-0138") == []  # codes stay no numbers


def test_a_decimal_comma_is_read_and_thousands_with_a_comma_stay_thousands():
    assert text_numbers("an invoice of 1.250,50 € to a company") == [1250.5]
    assert text_numbers("the bill was 186,90 € for 7 of us") == [186.9, 7]
    assert text_numbers("a half marathon is 21,1 km") == [21.1]
    assert text_numbers("1,250 people came") == [1250] and text_numbers("items 2,3,4") == [2, 3, 4]
