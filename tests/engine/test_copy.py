"""The copy prior (DecodeConfig.copy_bias, agentkit/engine/copy.py): which tokens it favours, that it leaves
everything outside JSON strings alone, and that verify and the causal canvas still equal ar-constrained under it."""

import json

import pytest
import torch

from agentkit.config import DecodeConfig
from agentkit.constrain.compiler import compile_schema
from agentkit.engine import copy as copy_mod
from agentkit.engine import decode as decode_mod
from agentkit.engine.copy import CopyPrior, open_number, open_string, source_numbers
from agentkit.engine.decode import Decoder
from agentkit.engine.engine import Engine
from agentkit.errors import InvalidRequestError
from agentkit.models.tiny import tiny_llama

pytestmark = pytest.mark.usefixtures("one_thread")
SCHEMA = {"type": "object", "properties": {"place": {"type": "string"}, "guests": {"type": "integer"}},
          "required": ["place", "guests"], "additionalProperties": False}
PROMPT = "Book a table for four at Marigold Bistro, Main Street."
NUMBERS = "Book a table for 12 at Marigold Bistro, 3 Main Street, within $1,500."


def test_open_string_finds_the_value_being_written():
    assert open_string(b'{"a": "Mari') == b"Mari"
    assert open_string(b'{"a": "x", "b": ') is None
    assert open_string(b'{"a": "say \\"hi') == b'say \\"hi'  # an escaped quote does not close it
    assert open_string(b'{"a": "x\\\\", "b": "') == b""  # an escaped backslash does not escape the quote
    assert open_string(b"") is None


def _prior() -> tuple[CopyPrior, list[bytes]]:
    """A prompt of ten word tokens and a vocabulary with other spellings of its words."""
    words = [w.encode() for w in ("Book", " a", " table", " at", " Marigold", " Bistro", ",", " Main", " Street", ".")]
    vocab = words + [b"Mar", b"igold", b"Mari", b"gold", b'"', b'",', b"Bis", b"tro", b"x", b" Street"]
    return CopyPrior.from_tokens(list(range(10)), vocab), vocab


def test_which_tokens_copy():
    prior, _ = _prior()
    assert prior.text == b"book a table at marigold bistro, main street."
    assert prior.copies(b"", b"Mar", None) and prior.copies(b"", b"bis", None)  # a word may begin anywhere
    assert not prior.copies(b"", b"igold", None)  # not at a word start
    conts = prior.continuations(b"Mari")
    assert conts == [b"gold bistro, main street."]
    assert prior.copies(b"Mari", b"gold", conts) and not prior.copies(b"Mari", b"x", conts)
    assert not prior.copies(b"Mari", b'"', conts)  # mid-word: the copy would stop inside a word
    conts = prior.continuations(b"marigold")
    assert prior.copies(b"marigold", b'"', conts) and prior.copies(b"marigold", b'",', conts)  # may end here
    assert prior.continuations(b"igold") == []  # occurrences must begin a word


def test_bias_adds_the_bonus_inside_strings_only():
    prior, vocab = _prior()
    logits = torch.zeros(len(vocab))
    allowed = torch.ones(len(vocab), dtype=torch.bool)
    inside = prior.bias(logits, allowed, b'{"place": "Mari', 3.0)
    assert inside[vocab.index(b"gold")] == 3.0 and inside[vocab.index(b"x")] == 0.0
    assert torch.equal(logits, torch.zeros(len(vocab)))  # the caller's logits are not changed
    assert prior.bias(logits, allowed, b'{"place": "x", "guests": ', 3.0) is logits  # outside a string
    assert prior.bias(logits, allowed, b'{"place": "zzz', 3.0) is logits  # no copy to continue
    allowed[vocab.index(b"gold")] = False
    assert prior.bias(logits, allowed, b'{"place": "Mari', 3.0)[vocab.index(b"gold")] == 0.0  # masked stays out


def test_source_numbers_are_written_as_json_writes_them():
    assert source_numbers(b"within $200,000, x = -2, [1,2] at 43.65, -79.38 in 2019-2020") == {
        b"200000", b"-2", b"2", b"1", b"43.65", b"-79.38", b"79.38", b"2019", b"-2020", b"2020"}
    assert source_numbers(b"1,2345 and 12,345,678") == {b"1", b"2345", b"12345678"}  # a group is three digits
    assert source_numbers(b"no digits here") == set()
    # spelled out under a hundred (not inside another word: "someone", "often")
    assert source_numbers(b"The four of us; Twelve invited; forty-two, sixty one, a dozen; someone often") == {
        b"4", b"12", b"42", b"61"}


def test_open_number_finds_the_digits_being_written():
    assert open_number(b'{"a": ') == b"" and open_number(b'{"a": [1, -2') == b"-2"
    assert open_number(b'{"a": 20') == b"20" and open_number(b'{"a":20') == b"20"
    assert open_number(b'{"a": "20') is None  # inside a string
    assert open_number(b'{"a"') is None and open_number(b'{"a": 1e5') is None  # after a key, an exponent


def test_which_tokens_copy_a_number():
    vocab = [b"2", b"00", b"000", b"0", b",", b"}", b"5", b"-", b'"', b"0,"]
    prior = CopyPrior(b"Within $200,000, from x = -2.", vocab)
    assert not prior.copies_number(b"", b"2") and not prior.copies_number(b"", b"-")  # which number: the model's
    assert prior.copies_number(b"200", b"000") and not prior.copies_number(b"200", b"00,")
    assert prior.copies_number(b"200", b"00") and not prior.copies_number(b"200", b",")  # 200 is no number here
    assert prior.copies_number(b"200000", b",") and prior.copies_number(b"20000", b"0,")  # ends where one ends
    assert prior.copies_number(b"-2", b"}") and prior.copies_number(b"-", b"2") and not prior.copies_number(b"-", b"5")
    logits, allowed = torch.zeros(len(vocab)), torch.ones(len(vocab), dtype=torch.bool)
    after = prior.bias(logits, allowed, b'{"budget": 200', 3.0)
    assert [v for v, x in zip(vocab, after.tolist()) if x] == [b"00", b"000", b"0"]
    assert prior.bias(logits, allowed, b'{"budget": 200', 3.0, numbers=False) is logits
    assert prior.bias(logits, allowed, b'{"budget": 7', 3.0) is logits  # no source number begins with 7
    assert prior.bias(logits, allowed, b'{"budget": ', 3.0) is logits  # nor does the prior pick the first digit


def test_a_number_that_only_begins_a_source_number_is_not_ended_under_first_digit():
    """extract's setting (copy_first_digit): ending a number at a thousands separator of the source's number (127 of
    $127,000) loses the bonus; without it (tool calls, BFCL) only the copies get one."""
    vocab = [b"000", b",", b"}", b" ", b"5"]
    prior = CopyPrior(b"John earns $127,000 and is 41.", vocab)
    assert prior.cuts_number(b"127", b",") and prior.cuts_number(b"12", b"}") and not prior.cuts_number(b"41", b",")
    assert not prior.cuts_number(b"127", b"000") and not prior.cuts_number(b"9", b",")  # continuing; no source number
    logits, allowed = torch.zeros(len(vocab)), torch.ones(len(vocab), dtype=torch.bool)
    after = prior.bias(logits, allowed, b'{"salary": 127', 2.0, first_digit=True)
    assert after.tolist() == [2.0, -2.0, -2.0, -2.0, 0.0]
    assert prior.bias(logits, allowed, b'{"salary": 127', 2.0).tolist() == [2.0, 0.0, 0.0, 0.0, 0.0]


def test_copy_bias_is_validated():
    with pytest.raises(InvalidRequestError, match="copy_bias"):
        DecodeConfig(copy_bias=-1.0)
    with pytest.raises(InvalidRequestError, match="copy_bias"):
        DecodeConfig(copy_bias=float("inf"))
    with pytest.raises(InvalidRequestError, match="copy_from must be 'prompt' or 'user'"):
        DecodeConfig(copy_from="system")
    with pytest.raises(InvalidRequestError, match="copy_numbers must be true or false"):
        DecodeConfig(copy_numbers="yes")


def _value(eng: Engine, mode: str, bias: float, prompt: str = PROMPT) -> tuple[str, dict]:
    res = eng.generate(prompt, DecodeConfig(mode=mode, max_new_tokens=48, copy_bias=bias),
                       template=compile_schema(SCHEMA), raw=True)  # raw: the prompt is PROMPT, no chat template
    return res.text, json.loads(res.text)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_large_bonus_makes_string_values_prompt_spans(seed, monkeypatch):
    """With every allowed token considered and a bonus far above any logit gap, each string value is a span of
    the prompt beginning at a word (case aside): the prior always has a copy to offer, and only copies."""
    monkeypatch.setattr(copy_mod, "TOP", 10**6)
    eng = Engine.from_loaded(tiny_llama(seed))
    _, value = _value(eng, "ar", 100.0)
    place = value["place"].lower()
    text = eng.tokenizer.decode(eng.tokenizer.encode(PROMPT, add_special_tokens=False)).lower()
    assert place and any(text[i:].startswith(place) for i in range(len(text)) if i == 0 or not text[i - 1].isalnum())


def test_a_large_bonus_makes_number_values_the_prompts_numbers(monkeypatch):
    """The number's first token is the model's; where it begins one of the prompt's numbers, a bonus far above
    any logit gap makes the rest follow one of them to its end (the tiny vocabulary has multi-digit tokens)."""
    monkeypatch.setattr(copy_mod, "TOP", 10**6)
    prompt = "Tables 0, 12, 23, 34, 45, 56, 67, 78, 89, 90 or -7 at Marigold Bistro, within $1,500."
    numbers = {0, 12, 23, 34, 45, 56, 67, 78, 89, 90, -7, 7, 1500}
    checked = 0
    for seed in range(6):
        eng = Engine.from_loaded(tiny_llama(seed))
        res = eng.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=48, copy_bias=100.0),
                           template=compile_schema(SCHEMA), raw=True)
        pieces = [eng.tokenizer.decode([t]) for t in res.token_ids]
        at = next(i for i in range(len(pieces)) if "".join(pieces[:i]).endswith('"guests": '))
        first = pieces[at]
        if any(str(n).startswith(first) for n in numbers):
            checked += 1
            assert json.loads(res.text)["guests"] in numbers, (seed, first, res.text)
    assert checked >= 2  # the property was put to the test


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("prompt", [PROMPT, NUMBERS])
def test_verify_and_the_causal_canvas_equal_ar_under_the_prior(seed, prompt):
    eng = Engine.from_loaded(tiny_llama(seed))
    ar, _ = _value(eng, "ar", 4.0, prompt)
    assert _value(eng, "verify", 4.0, prompt)[0] == ar
    assert _value(eng, "diffusion", 4.0, prompt)[0] == ar  # a causal LM: diffusion is the causal canvas


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_copy_from_user_copies_from_the_last_user_message_only(seed, monkeypatch):
    monkeypatch.setattr(copy_mod, "TOP", 10**6)
    eng = Engine.from_loaded(tiny_llama(seed))
    messages = [{"role": "system", "content": "Zebra quokka xylophone."}, {"role": "user", "content": PROMPT}]
    res = eng.generate(messages, DecodeConfig(mode="ar", max_new_tokens=48, copy_bias=100.0, copy_from="user"),
                       template=compile_schema(SCHEMA))
    place = json.loads(res.text)["place"].lower()
    text = PROMPT.lower()
    assert place and any(text[i:].startswith(place) for i in range(len(text)) if i == 0 or not text[i - 1].isalnum())


def test_first_digit_bonus_begins_one_of_the_sources_numbers():
    vocab = [b"2", b"00", b"7", b"-", b"5", b'"', b"20"]
    prior = CopyPrior(b"Within $200,000, from x = -2.", vocab)
    assert prior.copies_number(b"", b"2", first=True) and prior.copies_number(b"", b"20", first=True)
    assert not prior.copies_number(b"", b"7", first=True) and not prior.copies_number(b"", b'"', first=True)
    logits, allowed = torch.zeros(len(vocab)), torch.ones(len(vocab), dtype=torch.bool)
    after = prior.bias(logits, allowed, b'{"budget": ', 3.0, first_digit=True)
    assert [v for v, x in zip(vocab, after.tolist()) if x] == [b"2", b"-", b"20"]
    assert prior.bias(logits, allowed, b'{"budget": ', 3.0) is logits  # off by default
    with pytest.raises(InvalidRequestError, match="copy_first_digit"):
        DecodeConfig(copy_first_digit=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_copy_source_replaces_the_prompt_as_the_source(seed, monkeypatch):
    """``copy_source`` (extract's text): a string value copies from it, not from the rest of the user message."""
    monkeypatch.setattr(copy_mod, "TOP", 10**6)
    eng = Engine.from_loaded(tiny_llama(seed))
    source = "Quokka Zebrafish lives near Xylophone Bay."
    messages = [{"role": "user", "content": PROMPT + "\n\n" + source}]
    res = eng.generate(messages, DecodeConfig(mode="ar", max_new_tokens=48, copy_bias=100.0, copy_source=source),
                       template=compile_schema(SCHEMA))
    place = json.loads(res.text)["place"].lower()
    text = source.lower()
    assert place and any(text[i:].startswith(place) for i in range(len(text)) if i == 0 or not text[i - 1].isalnum())


def test_free_text_bonus_begins_and_continues_a_value_as_written():
    """``bias_text`` (the agent's answer after tool results): a token that begins a value (its leading space
    counted, at least two bytes) or goes on along a copy begun at a word start; case as written; nothing
    mid-value and nothing after the value ends."""
    vocab = [b" AM", b"BER", b"-", b"423", b"1", b" am", b" 423", b"P", b" The", b".", b"ok", b"\n"]
    prior = CopyPrior(b"ok\nAMBER-4231", vocab, fold_case=False)
    logits = torch.zeros(len(vocab))

    def hits(out: bytes) -> list[bytes]:
        return [v for v, x in zip(vocab, prior.bias_text(logits, out, 3.0).tolist()) if x]

    assert hits(b"The result is") == [b" AM"]  # " am": case as written; " 423": mid-value
    assert hits(b"") == [b" AM", b"ok"]  # "P" alone is too short to begin a copy
    assert hits(b'The result is "') == [b" AM", b"ok"]  # after a quote a value may begin without a space
    assert hits(b"The result is AM") == [b"BER"]  # a value is begun once
    assert hits(b"The result is AMBER-") == [b"423"]
    assert hits(b"The result is AMBER-4231") == []  # the value ended: where the copy stops is the model's
    assert hits(b"The result is 423") == [b" AM"]  # a copy begun mid-value is not continued
    assert hits(b"The result is ok, so") == [b" AM"]  # "ok" was written: not begun again
    assert prior.bias_text(logits, b"x", 0.0) is logits


def test_a_copy_begun_in_another_case_goes_on(monkeypatch):
    """A value begins as written, but a word that begins it in another case ("Haz" of HAZEL-2544, the model's own
    case) is continued along the value, case-insensitively (``TEXT_FOLD_GO_ON``)."""
    vocab = [b" Haz", b" HAZ", b"el", b"EL", b"-", b"2544", b"ard"]
    prior = CopyPrior(b"HAZEL-2544", vocab, fold_case=False)
    logits = torch.zeros(len(vocab))

    def hits(out: bytes) -> list[bytes]:
        return [v for v, x in zip(vocab, prior.bias_text(logits, out, 3.0).tolist()) if x]

    assert hits(b"It is") == [b" HAZ"]  # begins as written only
    assert hits(b"It is Haz") == [b"el", b"EL"]  # begun in another case: goes on in any case
    assert hits(b"It is HAZ") == [b"EL"]  # begun as written: goes on as written
    assert hits(b"It is Hazel") == [b"-"]
    monkeypatch.setattr(copy_mod, "TEXT_FOLD_GO_ON", False)
    assert hits(b"It is Haz") == [b" HAZ"]  # before: no copy begun, and the value may begin again


def test_result_values_keeps_values_not_keys():
    from agentkit.toolcall import result_values

    assert result_values(['{"status": "ok", "result": "AMBER-4231", "n": 3, "flag": true}', "plain\ntext", "[]"]) \
        == "ok\nAMBER-4231\n3\nplain text"
    assert result_values(['{"a": {"b": ["x", null]}}']) == "x"
    assert result_values(["a" * 9, "b" * 9], limit=12) == "a" * 2 + "\n" + "b" * 9  # the latest kept


@pytest.mark.parametrize("seed", [0, 1])
def test_free_text_gets_the_prior_only_with_a_source(seed, monkeypatch):
    """A free reply is untouched without ``copy_source`` (``copy_from`` does not reach it) or with
    ``copy_text_bias=0``; with a source and a bonus far above any logit gap, the reply begins by copying one of the
    source's values."""
    monkeypatch.setattr(copy_mod, "TOP", 10**6)
    eng = Engine.from_loaded(tiny_llama(seed))
    plain = eng.generate(PROMPT, DecodeConfig(mode="ar", max_new_tokens=24), raw=True)
    assert eng.generate(PROMPT, DecodeConfig(mode="ar", max_new_tokens=24, copy_bias=100.0, copy_from="prompt"),
                        raw=True).token_ids == plain.token_ids
    source = "Boat day\nThe bay"  # values that begin with tokens of two bytes or more in the tiny vocabulary
    res = eng.generate(PROMPT, DecodeConfig(mode="ar", max_new_tokens=24, copy_text_bias=100.0, copy_source=source),
                       raw=True)
    off = DecodeConfig(mode="ar", max_new_tokens=24, copy_text_bias=0.0, copy_source=source)
    assert eng.generate(PROMPT, off, raw=True).token_ids == plain.token_ids  # 0: off
    assert res.token_ids != plain.token_ids
    assert any(res.text.startswith(v[:2]) for v in source.split("\n")), res.text


def test_number_draft_offers_the_sources_numbers_in_the_order_it_writes_them():
    cp = CopyPrior(b"Sides of 5 units, 4 units and 3 units; a budget of $1,200.", [b"a"])
    assert cp.number_draft(b'{"side1":') == [b" 5,", b" 5", b"5,", b"5"]  # a bare colon: with a space first
    assert cp.number_draft(b'{"side1": ') == [b"5,", b"5"]
    assert cp.number_draft(b'{"side1": 5, "side2": ') == [b"4,", b"4"]  # 5 is written: the next one
    assert cp.number_draft(b'{"side1": 5, "side2": 4, "b": 1') == [b"200,", b"200"]  # inside a number: its rest
    assert cp.number_draft(b'{"side1": 5, "side2": 4, "side3": 3, "b": 1200, "c": ') == []  # none left
    assert cp.number_draft(b'{"s": "5') == []  # inside a string
    assert cp.number_draft(b'{"x1": ') == [b"5,", b"5"]  # a key's digits are no written value


def _kept_by_verify(cfg, prompts, schema=None, verify=None, kept=lambda r: r.stats.accepted_slot_tokens) -> int:
    """Over three tiny models and ``prompts``: verify's output equals AR's under ``cfg`` (``schema``: compiled as the
    template; ``verify``: more settings for the verify run), and the drafted tokens it kept, summed."""
    total = 0
    for seed in range(3):
        eng = Engine.from_loaded(tiny_llama(seed))
        for prompt in prompts:
            tpl = (lambda: compile_schema(schema)) if schema is not None else (lambda: None)
            ar = eng.generate(prompt, cfg, template=tpl(), raw=True)
            ver = eng.generate(prompt, DecodeConfig(**{**cfg.__dict__, "mode": "verify", **(verify or {})}),
                               template=tpl(), raw=True)
            assert ver.token_ids == ar.token_ids
            total += kept(ver)
    return total


def test_string_draft_goes_on_along_the_phrase_the_value_began_copying():
    cp = CopyPrior(b"How is the deer population in Washington state over the past decade? Ask Dr. O'Neil.", [b"a"])
    phrase = b" state over the past decade"
    closed = [phrase + b'",', phrase + b'"']  # at the "?": with the comma the model writes in one token, then without
    assert cp.string_draft(b'{"location": "Washington') == [*closed, phrase, b" state"]
    assert cp.string_draft(b'{"location": "washing') == [b"ton" + c for c in (*closed, phrase)] + [b"ton"]  # any case
    assert cp.string_draft(b'{"q": "the Washington') == [*closed, phrase, b" state"]  # its tail
    assert cp.string_draft(b'{"who": "Dr') == [b'",', b'"']  # the phrase ends there: only the closing
    assert cp.string_draft(b'{"who": "Ask Dr') == [b'",', b'"']
    assert cp.string_draft(b'{"who": "O\'Neil') == [b'",', b'"']  # the source ends there
    long = CopyPrior(b"Ship to " + b"x" * 40 + b" now", [b"a"])
    assert long.string_draft(b'{"to": "Ship') == [b" to " + b"x" * 28, b" to"]  # cut by the span: not closed
    assert cp.string_draft(b'{"location": "') == []  # which span a value copies is the model's choice
    assert cp.string_draft(b'{"who": "O') == [b"'Neil\",", b"'Neil\"", b"'Neil"]  # one byte: as written, the first
    assert cp.string_draft(b'{"x": "P') == []  # word it begins ("population" begins with p, not P)
    assert cp.string_draft(b'{"x": " ') == []  # a byte that begins no word
    assert cp.string_draft(b'{"a": "O\'Neil", "who": "O') == []  # that phrase is a value already
    assert cp.string_draft(b'{"location": "W') == [b"ashington state over the past de", b"ashington"]  # cut by the span
    assert cp.string_draft(b'{"location": "Paris') == []  # no copy begun
    assert cp.string_draft(b'{"n": 4') == []  # outside a string
    assert cp.string_draft(b'{"s": "ation') == []  # only at word starts


def test_verify_drafts_the_strings_the_model_copies(monkeypatch):
    """With a bonus that makes the model copy the prompt's phrase, verify drafts the rest of it after the value's
    first token and still writes exactly ar-constrained's output; with the string drafts off it keeps fewer."""
    monkeypatch.setattr(copy_mod, "TOP", 10**6)
    monkeypatch.setattr(decode_mod, "NUMBER_DRAFTS", False)
    schema = {"type": "object", "properties": {"place": {"type": "string", "maxLength": 40}}, "required": ["place"],
              "additionalProperties": False}
    cfg = DecodeConfig(mode="ar", max_new_tokens=40, copy_bias=100.0)
    kept = {}
    for drafts in (True, False):
        monkeypatch.setattr(decode_mod, "STRING_DRAFTS", drafts)
        kept[drafts] = _kept_by_verify(cfg, ("the marigold bistro on harbour street", "meet at wexford quay tomorrow"),
                                       schema)
    assert kept[True] > kept[False] + 2, kept


def test_text_draft_goes_on_along_a_value_the_reply_began_copying():
    cp = CopyPrior(b"PEBBLE-3128\nno record matches these arguments.", [b"a"], fold_case=False)
    assert cp.text_draft(b"The code is PEB") == [b"BLE-3128"]
    assert cp.text_draft(b"Sorry: no rec") == [b"ord matches these arguments."]
    assert cp.text_draft(b"The code is ") == []  # which value a reply copies is the model's choice
    assert cp.text_draft(b"The code is peb") == []  # begun in another case: not drafted as written
    assert cp.text_draft(b"The code is XPEB") == []  # not at a word start


def test_prompt_spelling_spells_a_copy_as_the_prompt_does():
    from agentkit.constrain.vocab import TokenVocab
    from agentkit.engine.draft import PromptSpelling

    vocab = TokenVocab(token_bytes=[b"HA", b"Z", b"EL", b"ZE", b"L", b"-", b"3", b" code", None], eos_ids=(8,), size=9)
    sp = PromptSpelling([7, 8, 0, 1, 2, 5, 6], vocab)  # " code", a special token, "HA Z EL - 3"
    assert vocab.spell(b"ZEL-3") == [3, 4, 5, 6]  # the vocabulary's longest tokens: ZE L
    assert sp.spell(b"ZEL-3") == [1, 2, 5, 6]  # the prompt's: Z EL
    assert sp.spell(b"ZEL-3-3") == [1, 2, 5, 6, 5, 6]  # past the prompt's text: the vocabulary's
    assert sp.spell(b"L-3") == [4, 5, 6]  # the prompt writes it only from inside a token
    assert sp.spell(b"ZEL-3q") == [1, 2, 5, 6]  # as far as the vocabulary spells it
    vocab = TokenVocab(token_bytes=[b" Le", b"iden", b"e", b"ei", b"den", b"L", b";"], eos_ids=(), size=7)
    sp = PromptSpelling([0, 1, 6], vocab)  # " Le iden;"
    assert vocab.spell(b"eiden;") == [3, 4, 6]  # the vocabulary's longest tokens: ei den
    assert sp.spell(b"eiden;") == [2, 1, 6]  # from inside the prompt's " Le": a token, then the prompt's from iden


def test_verify_drafts_the_values_a_reply_copies(monkeypatch):
    """Free text with a copy source (an answer's tool results): with a bonus that makes the model copy a value,
    verify drafts the rest of it once begun and still writes exactly AR's output; without the drafts it keeps fewer."""
    monkeypatch.setattr(copy_mod, "TOP", 10**6)
    monkeypatch.setattr(copy_mod, "TEXT_MIN_START", 1)  # the tiny vocabulary spells most words a letter at a time
    cfg = DecodeConfig(mode="ar", max_new_tokens=24, copy_text_bias=100.0,
                       copy_source="harbour street marigold bistro\nwexford quay tomorrow morning")
    kept = {}
    for drafts in (True, False):
        monkeypatch.setattr(decode_mod, "TEXT_DRAFTS", drafts)
        kept[drafts] = _kept_by_verify(cfg, ("where shall we meet", "the the the"), verify={"draft": "lookup"},
                                       kept=lambda r: r.stats.output_tokens - r.stats.verify_forwards)
    assert kept[True] > kept[False] + 2, kept


def test_verify_drafts_the_numbers_the_model_copies(monkeypatch):
    """With a bonus that makes the model copy the prompt's number, verify drafts it and still writes exactly
    ar-constrained's output; with the number drafts off (prompt lookup only) it keeps fewer drafted tokens."""
    monkeypatch.setattr(copy_mod, "TOP", 10**6)
    schema = {"type": "object", "properties": {"guests": {"type": "integer"}}, "required": ["guests"],
              "additionalProperties": False}
    cfg = DecodeConfig(mode="ar", max_new_tokens=24, copy_bias=100.0, copy_first_digit=True)
    kept = {}
    for drafts in (True, False):
        if not drafts:
            monkeypatch.setattr(Decoder, "_copy_draft", lambda self, block, state: [])
        kept[drafts] = _kept_by_verify(cfg, ("A table for 4512 guests, please.", "We are 678 at Marigold Bistro."),
                                       schema)
    assert kept[True] > kept[False] + 2, kept
