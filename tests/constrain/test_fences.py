"""A grounded string field's fence (where its span may start, end and reach, by what the field is), the anchoring of
dates and identifiers to the field's own word, and the spans a fenced field admits under the token automaton."""

from __future__ import annotations

import json

from agentkit.constrain.compiler import compile_schema
from agentkit.constrain.fences import Fence, field_fence, introduced, is_proper, is_thing, name_runs
from agentkit.constrain.ground import (
    PLAIN_BODY,
    anchored_codes,
    anchored_dates,
    code_mentions,
    ground_schema,
    grounded_template,
    is_code,
    span_breaks,
    span_edges,
)
from agentkit.constrain.nodes import slots
from agentkit.constrain.spans import SpanDFA
from agentkit.constrain.vocab import slot_index


def spans(text: str, fence: Fence | None) -> set[str]:
    """Every span of ``text`` a field with ``fence`` may take (the character-level reading of the automaton)."""
    raw = json.dumps(text, ensure_ascii=False)[1:-1].encode()
    fence = fence or Fence()
    starts, ends = span_edges(raw)
    stop = span_breaks(raw, fence.walls)
    return {raw[i:j].decode() for i in starts - fence.no_start for j in ends - fence.no_end if i < j <= stop[i]}


RESERVATION = ("guest_name", "hotel", "check_in", "nights", "room_type")


def _fence(name: str, text: str, fields: tuple[str, ...] = RESERVATION) -> Fence | None:
    schema = {"type": "object", "properties": {f: {"type": "string"} for f in fields}}
    return ground_schema(schema, text).fences.get("/" + name)


def test_proper_names_are_capitalised_words_and_another_fields_name_is_walled():
    text = "Hi, I'm Ruben Verhoeven, can I book Hotel De Gouden Leeuw for 1 night? Met Ana Lutz from Quist Optics"
    guest = spans(text, _fence("guest_name", text))
    # the pronoun, lowercase words and the name holding the hotel field's word are no guest's name
    assert {"Ruben Verhoeven", "Ana Lutz", "Quist Optics"} <= guest
    assert not {"I'm Ruben Verhoeven", "De Gouden Leeuw", "Gouden Leeuw", "Ana Lutz from Quist Optics"} & guest
    hotel = spans(text, _fence("hotel", text))
    # a name holding the field's own word is taken whole
    assert "Hotel De Gouden Leeuw" in hotel and not {"De Gouden Leeuw", "Hotel De", "Gouden"} & hotel
    assert is_proper(["guest", "name"]) and is_proper(["name"]) and is_proper(["vendor"])
    assert not is_proper(["product", "name"]) and not is_proper(["title"]) and not is_proper(["room", "type"])


def test_name_runs_join_capitalised_words_by_a_names_joiners():
    text = "Bank of Ireland, Huang & Ostrowski LLP met Ruud van Dijk at the Expo with Kofi and Lorcan"
    runs = [" ".join(text[a:b] for a, b in run) for run in name_runs(text)]
    assert runs == ["Bank Ireland", "Huang Ostrowski LLP", "Ruud Dijk", "Expo", "Kofi", "Lorcan"]


def test_a_plain_string_ends_with_its_own_word_and_holds_no_amount_or_other_fields_word():
    text = "Order from Rasmus Lindqvist: 1 standing desk, SEK 6,450.00, double room for 2 nights"
    room = spans(text, _fence("room_type", text))
    assert "double room" in room and "double" not in room  # not right before its own word
    product = spans(text, _fence("product", text, ("customer", "product", "quantity", "unit_price")))
    assert "standing desk" in product and not {"SEK 6,450.00", "6,450.00", "1 standing desk", "SEK"} & product
    fields = ("vendor", "invoice_number")
    vendor = spans("Bergström Bygg sent invoice 1187", _fence("vendor", "Bergström Bygg sent invoice 1187", fields))
    assert vendor == {"Bergström", "Bergström Bygg", "Bygg"}  # no lowercase word, no other field's word


def test_a_phone_number_is_taken_whole():
    text = "Reach Ana at +54 11 5555 0190 or 082 555 0134."
    fence = _fence("phone", text, ("name", "phone"))
    assert {"+54 11 5555 0190", "082 555 0134"} <= spans(text, fence)
    assert not {"5555 0190", "11 5555", "555 0134", "082 555"} & spans(text, fence)


def test_a_date_field_takes_the_date_after_its_own_word():
    fields = ("vendor", "issue_date", "due_date")
    text = "Invoice from Huang LLP, issued March 3, 2025, due April 2, 2025."
    assert anchored_dates("issue_date", text, fields) == ["2025-03-03"]
    assert anchored_dates("due_date", text, fields) == ["2025-04-02"]
    # a word the two fields share anchors neither; an unanchored field takes the dates another word does not
    assert anchored_dates("due_date", "dated 3 March 2025, payable 2 April 2025", fields) == ["2025-03-03",
                                                                                              "2025-04-02"]
    assert anchored_dates("issue_date", "7 May 2025, due 6 June 2025", fields) == ["2025-05-07"]
    assert anchored_dates("check_in", "checking in 14 July 2025", ("check_in", "nights")) == ["2025-07-14"]


def test_an_identifier_takes_a_code_and_the_one_after_its_own_word():
    fields = ("vendor", "invoice_number", "total", "po_number")
    text = "Bergström Bygg sent invoice 1187 for 15,600 SEK on May 20, 2024. PO: BB-77, ref 5521."
    assert [c for _, _, c in code_mentions(text)] == ["1187", "BB-77", "5521"]  # no amount or date pieces
    assert anchored_codes("invoice_number", text, fields) == ["1187"]
    assert anchored_codes("po_number", text, fields) == ["BB-77"]
    # a code beginning with the field's word, an abbreviation of it, a code by its look
    assert anchored_codes("po_number", "invoice 8841, our order PO-1502", fields) == ["PO-1502"]
    assert anchored_codes("invoice_number", "inv. no. 2025-118, CHF 3,900.00", fields) == ["2025-118"]
    assert anchored_codes("invoice_number", "the invoice from Adeyemi, AC/2291, ₦385,000", fields) == ["AC/2291"]
    # a plain number is a code only after the field's word; a phone's digit groups are none
    assert anchored_codes("invoice_number", "150 chairs, call 082 555 0134", fields) == []
    assert is_code("invoice_number") and is_code("order_id") and not is_code("number") and not is_code("phone")


def test_a_code_field_is_held_to_its_codes_and_a_fence_no_span_fits_is_dropped(vocab):
    _tok, v = vocab
    schema = {"type": "object", "properties": {"invoice_number": {"type": "string"}, "po_number": {"type": "string"},
                                               "name": {"type": "string"}}}
    text = "Invoice 00932 from ana lutz, total 48,200."
    tpl, g = grounded_template(schema, text, lambda s: compile_schema(s, strict=True, style="spaced"))
    assert g.kinds["/invoice_number"] == "code" and g.schema["properties"]["invoice_number"]["enum"] == ["00932"]
    # no code for the PO: a span that is one word with a digit; a lowercase name: no capitalised span, no fence
    assert g.schema["properties"]["po_number"]["pattern"] == r"^[^\s]*[0-9][^\s]*$" and "/name" not in g.fences
    slot = next(s for s in slots(tpl.root) if s.name == "/po_number")
    dfa = SpanDFA(slot.source, slot_index(slot.regex, v), v, slot.fence)
    assert dfa.close_distance(dfa.initial()) < float("inf")


def test_the_automaton_reads_the_fence(vocab):
    _tok, v = vocab
    text = "Met Bartholomew Quist from Quist Optics in Leiden"
    fence = field_fence(text, {"name"}, {"company", "city"}, proper=True)
    dfa = SpanDFA(text, slot_index(PLAIN_BODY, v), v, fence)
    reached = set()
    for want in spans(text, fence) | {"Bartholomew Quist from Quist", "Met Bartholomew Quist from Quist Optics"}:
        s = dfa.initial()
        for b in want.encode():
            s = dfa.next(s, v.by_bytes[bytes([b])][0]) if s is not None else None
        if s is not None and dfa.is_final(s):
            reached.add(want)
    assert reached == spans(text, fence) and "Bartholomew Quist" in reached


def test_a_field_whose_word_the_text_writes_in_a_phrase_takes_a_piece_of_that_phrase():
    text = "Please reserve a twin room at the Grand Hotel Kronenhof for Anselm Pfister, three nights."
    room, hotel = _fence("room_type", text), _fence("hotel", text)
    assert room is not None and room.held and hotel is not None and hotel.held
    # "room" alone is the field's name (refused by the slot's exclusions), so "twin room" is the one value
    assert spans(text, room) == {"twin room", "room"} and spans(text, hotel) == {"Grand Hotel Kronenhof"}
    g = ground_schema({"type": "object", "properties": {f: {"type": "string"} for f in RESERVATION}}, text)
    assert g.kinds["/room_type"] == "held" and g.kinds["/guest_name"] == "string"
    # a label, or the word alone between function words, holds nothing; a number in words starts no plain value
    for other in ("Room type: double, for one night", "the room for one night"):
        fence = _fence("room_type", other)
        assert fence is None or not fence.held
        assert "one night" not in spans(other, fence) and "one" not in spans(other, fence)


def test_a_plain_field_takes_a_name_whole_and_ends_in_no_quantifier():
    fields = ("customer", "product", "quantity")
    text = "Please send 150 notebooks. Marigold Academy pays €2.40 each."
    product = spans(text, _fence("product", text, fields))
    assert {"notebooks", "Marigold Academy"} <= product and not {"Academy", "Marigold", "each"} & product
    text = "Please send 150 notebooks to Marigold Academy, €2.40 each."  # what "to" introduces is no product
    assert "Marigold Academy" not in spans(text, _fence("product", text, fields))
    customer = spans(text, _fence("customer", text, fields))  # a proper name may be a piece of one
    assert {"Marigold", "Marigold Academy", "Academy"} <= customer


def test_a_title_or_product_is_not_what_at_in_or_with_introduce():
    fields = ("title", "date", "location", "attendees")
    text = "Design review on 3 June 2025 at the Marlow Arts Centre, with Ines, Kofi and Lorcan."
    assert [text[k:k + 4] for k in introduced(text)] == ["Marl", "Ines", "Kofi", "Lorc"]
    title = spans(text, _fence("title", text, fields))
    assert "Design review" in title and not {"Marlow Arts Centre", "Ines", "Kofi", "Lorcan"} & title
    # a place and the people are still where they are written
    assert "Marlow Arts Centre" in spans(text, _fence("location", text, fields))
    assert is_thing(["title"]) and is_thing(["product"]) and not is_thing(["room", "type"])
    assert not is_thing(["who"]) and not is_thing(["location"])


def test_no_span_starts_with_an_article_or_a_function_word_written_capitalised():
    text = "Can we move the vendor kickoff? Please book Will Turner. I'd like a suite, invoice A-77812."
    got = spans(text, _fence("title", text, ("title", "date")))
    assert {"vendor kickoff", "Will Turner", "suite", "A-77812"} <= got
    assert not {"Can", "Can we move", "Please", "Please book", "I'd like a suite", "a suite", "the vendor"} & got
    assert {"Can we move", "the vendor kickoff"} <= spans(text, None)  # the text's spans, without a fence
    # a tool call's arguments are grounded without the fences, codes and date anchoring
    schema = {"type": "object", "properties": {"title": {"type": "string"}, "order_id": {"type": "string"}}}
    g = ground_schema(schema, text, fenced=False)
    assert not g.fences and g.kinds["/order_id"] == "string"


def test_a_proper_names_choices_are_the_whole_names_its_fence_allows():
    schema = {"title": "Contact", "type": "object", "properties": {"name": {"type": "string"},
                                                                  "company": {"type": "string"}}}
    text = "From: Aoife Gallagher <aoife@brightwater.ie> — Brightwater Design. Contact for the van is Ada Moss."
    _tpl, g = grounded_template(schema, text, lambda s: compile_schema(s, strict=True, style="spaced"))
    # "From" is a function word, "Contact" the schema's title: neither is a name to choose
    assert g.whole_names["/name"] == ["Aoife Gallagher", "Brightwater Design", "Ada Moss"]
    assert g.proper == {"/name", "/company"}
