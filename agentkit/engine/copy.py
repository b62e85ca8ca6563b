"""A copy prior for JSON string values: tokens that continue a span of the prompt get a logit bonus.

Tool calls and extractions copy most of their string values from the context (a city, a title, an id), and a
small model garbles them: on the default model's 600 BFCL questions, 137 of the 168 calls that failed on a string
value held a wrong string where the right one stood verbatim in the question (``Liverly F.C.`` for
``Liverpool F.C.``, ``PS4`` for ``PlayStation``). ``DecodeConfig.copy_bias`` adds a bonus to the logit of every
allowed token, among the likeliest, whose bytes continue what the value holds so far as the prompt continues it:

- at a value's first byte, any word of the prompt may begin (the bonus tilts towards the prompt's words, it picks
  none of them);
- after that, the value so far must occur in the prompt starting at a word start, matched case-insensitively, and
  the token must continue one such occurrence; where an occurrence ends at a word boundary the closing quote gets
  the bonus too, so where a copy stops stays the model's choice.

The text copied from is the last user message (``DecodeConfig.copy_from="user"``, the default: not the system
prompt, so not the schema's or the functions' own names and descriptions), or the whole prompt (``"prompt"``).
Defaults measured on all 600 BFCL questions in one run (``evals/results/bfcl/copy600_s12.json.gz``): off 0.385; 2.0 from the
whole prompt 0.393; 2.0 from the user message 0.400 (sign test p = 0.09), the same
p50 latency. The bonus (2) was chosen on the first 50 questions of each file, where 1, 2 and 4 scored the same.

Numbers (``DecodeConfig.copy_numbers``, on by default): once a number value has begun, digits that go on along a
number the source writes get the same bonus, and so does ending it where one ends; the source's numbers are read as
JSON writes them (``$200,000`` is ``200000``). The first digit gets none: which number, or one the source does not
write (a ``0``, a ``9.81``), stays the model's choice. Measured on all 600 BFCL questions against numbers off
(``evals/results/bfcl/copynum600_*.json.gz``, greedy, so one run's items pair with another's): 0.405 against 0.400 (``10`` for
``1``, ``30`` for ``3``, ``19`` for ``180``); a bonus at the first digit as well also made answers wrong (it drew
``"initial_velocity": 0`` to the question's ``150``), so it is not offered.

With ``DecodeConfig.copy_first_digit`` (extract's setting, and the server's ``response_format``) the first digit
gets the bonus too, and ending a number that only begins one of the source's numbers loses it (``127`` of
``$127,000``: 14 of 40 salaries on the extract benchmark stopped at the thousands separator).

Only inside a JSON string (an odd count of unescaped quotes in the output) or a number, only with a template:
everything else, and the mask, are untouched.

Free text (no template) gets the prior only when a source is given (``DecodeConfig.copy_source``: the agent's
answer step sets it to its tool results' values, :func:`agentkit.toolcall.result_values`), :meth:`CopyPrior.bias_text`: a token
that begins a word may begin one of the source's words, and a token goes on along a copy the text has begun at a
word start. A free reply's distribution is otherwise untouched. The bonus is part of the pick rule, so verify and the causal canvas, which call the
same pick with the same context, stay equal to ar-constrained under it (the adapter drafter's walk too; DiffusionGemma's
uniform sampler has its own pick and no copy prior).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from .sampler import masked_logits

MAX_SPAN = 32  # bytes of a prompt continuation a token is checked against
TOP = 64  # the likeliest allowed tokens considered for the bonus
# free text: the bytes (its leading space included) a token must have to get the bonus for beginning a value (a
# lone "P" that begins "PEBBLE" drew "Pretty" at bonus 4; " J" of " JADE-2409" is two)
TEXT_MIN_START = 2
# free text: a value begins as written, and a copy begun as written goes on as written; a word that begins a value
# in another case (the model's own: "Hazeel-2544" for HAZEL-2544, no copy begun) goes on along it in any case. The
# answer step (evals/answer_copy.py, bonus 8): 0.871 -> 0.894 on the 85 benchmark tasks, 0.864 on
# 110 held-out ones (no reply changed) (evals/results/agent_loop/answer_copy_fold*.json). Going on in lowercase after any
# begun copy scored 0.918 and 0.909, but wrote values begun as written in another case (KESTREL-7024 ->
# Kestrel-7024), which the benchmark's case-blind check counts as right
TEXT_FOLD_GO_ON = True
TEXT_OPENERS = frozenset(b" \t\n\"'`(*:")  # free text: bytes after which a token without a space may begin a value


def _word(b: int) -> bool:
    return chr(b).isalnum() or b >= 0x80  # a byte of a word (non-ASCII: part of a multi-byte letter)


NUMBER_BYTES = frozenset(b"-0123456789.")  # what a copied number is made of (no exponents: prompts rarely write them)
VALUE_START = frozenset(b":[, \n\t")  # what a JSON value may follow
DRAFT_STOPS = frozenset(b'\n"\\,.;:?!()[]{}')  # where a string draft's phrase ends (CopyPrior.string_draft)
# a number of the source: thousands groups ("200,000") or plain digits, a sign, a decimal part
SOURCE_NUMBER = re.compile(rb"-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?")
WRITTEN_NUMBER = re.compile(rb"(?<=[:\[,]) ?(-?\d+(?:\.\d+)?)")  # a JSON value that is a number (not a key's digits)


_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
          "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
NUMBER_WORDS = {w.encode(): i for i, w in enumerate(_UNITS)} | {w.encode(): 20 + 10 * i for i, w in enumerate(_TENS)} \
    | {b"dozen": 12}
# a number written in words: "four", "twelve", "forty-two" / "forty two", "a dozen"
WORD_NUMBER = re.compile(rb"(?<![a-z])(?:(" + "|".join(_TENS).encode() + rb")(?:[- ](" + "|".join(_UNITS[1:10]).encode()
                         + rb"))?|(" + "|".join(sorted([*_UNITS, "dozen"], key=len, reverse=True)).encode()
                         + rb"))(?![a-z])")


def source_numbers(text: bytes) -> set[bytes]:
    """The numbers ``text`` writes, as JSON writes them: ``"$200,000"`` gives ``200000``, ``"x = -2"`` gives
    ``-2`` and ``2`` (a dash may be a range's, ``2019-2020``); and those it spells out under a hundred
    (``"the four of us"`` gives ``4``, ``"forty-two"`` ``42``, ``"a dozen"`` ``12``)."""
    out = set()
    for m in SOURCE_NUMBER.finditer(text):
        n = m.group().replace(b",", b"")
        out.add(n)
        if n.startswith(b"-"):
            out.add(n[1:])
    for m in WORD_NUMBER.finditer(text.lower()):
        tens, unit, word = m.groups()
        n = NUMBER_WORDS[word] if word else NUMBER_WORDS[tens] + (NUMBER_WORDS[unit] if unit else 0)
        out.add(str(n).encode())
    return out


def open_number(out: bytes) -> bytes | None:
    """The digits of the number ``out`` ends inside (``b""`` where a value may begin), or None: inside a string,
    or after something no number follows."""
    return None if open_string(out) is not None else _number_tail(out)


def _number_tail(out: bytes) -> bytes | None:
    """:func:`open_number` for an ``out`` known to end outside a string."""
    i = len(out)
    while i and out[i - 1] in NUMBER_BYTES:
        i -= 1
    return out[i:] if i == 0 or out[i - 1] in VALUE_START else None


def open_string(out: bytes) -> bytes | None:
    """The bytes of the JSON string ``out`` ends inside (after its opening quote), or None outside a string."""
    start, escaped = None, False
    for i, b in enumerate(out):
        if start is not None and escaped:
            escaped = False
        elif start is not None and b == 0x5C:  # backslash inside a string
            escaped = True
        elif b == 0x22:  # a quote opens or closes
            start = i + 1 if start is None else None
    return None if start is None else out[start:]


class CopyPrior:
    """The source text, lowercased, indexed for :meth:`bias`."""

    def __init__(self, text: bytes, token_bytes: Sequence[bytes | None], fold_case: bool = True) -> None:
        """``text``: what values may be copied from; ``token_bytes``: each token's bytes (None: a special one);
        ``fold_case``: matched case-insensitively (JSON values); False: as written (free text, ``bias_text``)."""
        self.token_bytes = token_bytes
        self.fold = fold_case
        self.raw = text  # as written: what a string draft writes (``text`` lowercased keeps its byte offsets)
        self.text = t = self._low(text)
        self.starts = [i for i in range(len(t)) if _word(t[i]) and (i == 0 or not _word(t[i - 1]))]
        self._first: set[bytes] | None = None
        self._lines: list[bytes] | None = None
        self._folded: bytes | None = None  # the source lowercased, for a free-text copy begun in another case
        self.numbers = source_numbers(text)
        self._ordered: list[bytes] | None = None  # the source's numbers in the order it writes them (number_draft)

    def _low(self, b: bytes) -> bytes:
        return b.lower() if self.fold else b

    @classmethod
    def from_tokens(cls, prompt: Sequence[int], token_bytes: Sequence[bytes | None]) -> CopyPrior:
        """Copies from the prompt's own text (special tokens as line breaks)."""
        text = b"".join(token_bytes[t] or b"\n" if t < len(token_bytes) else b"\n" for t in prompt)
        return cls(text, token_bytes)

    def _first_prefixes(self) -> set[bytes]:
        if self._first is None:
            self._first = {self.text[i:i + n] for i in self.starts for n in range(1, MAX_SPAN + 1)}
        return self._first

    def _line_prefixes(self, out: bytes) -> set[bytes]:
        """The first bytes (up to :data:`MAX_SPAN`) of each line (a value) that ``out`` has not begun yet: where a
        free-text copy of a value may begin. A value is begun once a word of ``out`` starts with its first
        :data:`TEXT_MIN_START` bytes, so a copy is begun once (at bonus 5 ``ZEPHYR-6712`` was followed by
        ``ZEUS-6712`` ten times, and the ``ok`` of every ``{"status": "ok"}`` by ``ok... ok...``)."""
        if self._lines is None:
            self._lines = [line for line in self.text.split(b"\n") if line]
        fold = (lambda b: b.lower()) if TEXT_FOLD_GO_ON else (lambda b: b)  # begun in any case (TEXT_FOLD_GO_ON)
        begun = {fold(w[:TEXT_MIN_START]) for w in re.findall(rb"[^\s\"'`(*:]+", out)}
        return {line[:n] for line in self._lines if fold(line[:TEXT_MIN_START]) not in begun
                for n in range(1, min(len(line), MAX_SPAN) + 1)}

    def continuations(self, value: bytes, line_start: bool = False, source: bytes | None = None) -> list[bytes]:
        """What follows ``value`` (lowercased) at each of its occurrences in the prompt (``source``: in this text
        instead) that begin a word (with ``line_start``: that begin a line, one of
        :func:`agentkit.toolcall.result_values`'s values)."""
        value = self._low(value)
        t = self.text if source is None else source
        return [t[i + len(value):i + len(value) + MAX_SPAN] for i in self._occurrences(value, t, line_start)]

    @staticmethod
    def _occurrences(value: bytes, t: bytes, line_start: bool = False) -> list[int]:
        """Where ``value`` occurs in ``t`` at a word start (with ``line_start``: at a line start)."""
        out, i = [], t.find(value)
        while i >= 0:
            if i == 0 or (t[i - 1] == 0x0A if line_start else not _word(t[i - 1])):
                out.append(i)
            i = t.find(value, i + 1)
        return out

    def copies(self, value: bytes, token: bytes, conts: list[bytes] | None) -> bool:
        """Whether ``token`` continues a copy of the prompt after ``value`` (``conts``: its continuations)."""
        tok = self._low(token)
        if not tok:
            return False
        if not value:
            return tok in self._first_prefixes()
        if tok[:1] == b'"':  # closing the value where a copied span ends at a word boundary
            return any(c == b"" or not _word(c[0]) for c in conts or ())
        return any(c.startswith(tok) for c in conts or ())

    def copies_number(self, digits: bytes, token: bytes, first: bool = False) -> bool:
        """Whether ``token`` continues, after the number's ``digits`` so far, one of the source's numbers: its
        digits go on along one, or it ends the number (a byte no number has) where one is complete. At a number's
        first byte only with ``first`` (``DecodeConfig.copy_first_digit``): a token that begins one of the
        source's numbers; else which number (or none of the source's) is the model's choice."""
        if not digits and not (first and token and token[0] in NUMBER_BYTES):
            return False
        i = 0
        while i < len(token) and token[i] in NUMBER_BYTES:
            i += 1
        head, ends = digits + token[:i], i < len(token)
        return any(n == head if ends else n.startswith(head) for n in self.numbers)

    def number_draft(self, out: bytes) -> list[bytes]:
        """What a number copied from the source would write next after ``out``, spellings to try in turn (verify's
        drafts; the check keeps only what the model itself writes): where a JSON value may begin, the first of the
        source's numbers, in the order the source writes them, that no value of ``out`` holds yet (after a bare
        ``:``, with a space before it first); inside a number, the rest of the first of them its digits begin; each
        with a comma after it first. Empty inside a string, elsewhere, or where none fits."""
        digits = open_number(out)
        if digits is None:
            return []
        if self._ordered is None:
            self._ordered = list(dict.fromkeys(m.group().replace(b",", b"") for m in SOURCE_NUMBER.finditer(self.text)))
        if digits:
            rest = [n[len(digits):] for n in self._ordered if n.startswith(digits) and len(n) > len(digits)][:1]
        else:
            written = set(WRITTEN_NUMBER.findall(out))
            rest = [n for n in self._ordered if n not in written][:1]
            rest = rest if out.endswith(b" ") or not out.endswith(b":") else [b" " + n for n in rest] + rest
        return [n + end for n in rest for end in (b",", b"")]  # with the comma a next argument would follow

    def string_draft(self, out: bytes) -> list[bytes]:
        """What a string value copied from the source would write next after ``out``, spellings to try in turn
        (verify's drafts, as :meth:`number_draft`'s): inside a JSON string that holds something, the source's text
        after the first occurrence, at a word start, of the value so far (else of its longest tail that begins a
        word and occurs), up to the end of the source's phrase (:data:`DRAFT_STOPS`, at most :data:`MAX_SPAN`
        bytes), as the source writes it: first closed where the phrase ends there (with a comma after the quote, then
        without; the pinned text after the value then joins the same check), then open, then its first word alone.
        A value of one byte (a rare name's first token) goes on along the first word the source begins with that
        byte as written whose phrase no earlier value holds. The first token of a value stays the model's: which
        span it copies, if any, is its choice. Empty elsewhere, or where the value copies nothing."""
        value = open_string(out)
        if not value:
            return []
        if len(value) == 1 and _word(value[0]):  # one byte begins too many words in any case: as written, the first unused
            head = self._low(out[:-1])
            for i in self._occurrences(value, self.raw):
                rest, ends = self._phrase(i + 1)
                if rest and self._low(value + rest) not in head:
                    return self._spellings(rest, ends)
            return []
        low = self._low(value)
        tails = [0] + [i for i in range(1, len(low)) if _word(low[i]) and not _word(low[i - 1])]
        for start in tails:
            tail = low[start:]
            if len(tail) < 2:
                break
            at = next((i + len(tail) for i in self._occurrences(tail, self.text) if i + len(tail) < len(self.text)),
                      None)
            if at is not None:
                return self._spellings(*self._phrase(at))
        return []

    def _phrase(self, at: int) -> tuple[bytes, bool]:
        """The source's text from byte ``at`` to its phrase's end (:data:`DRAFT_STOPS`, at most :data:`MAX_SPAN`
        bytes), and whether the phrase ends there (or the source does) rather than the span."""
        cont = self.raw[at:at + MAX_SPAN + 1]
        stop = next((j for j, b in enumerate(cont) if b in DRAFT_STOPS), None)
        return cont[:MAX_SPAN if stop is None else stop], stop is not None or len(cont) <= MAX_SPAN

    @staticmethod
    def _spellings(rest: bytes, ends: bool) -> list[bytes]:
        """A phrase (:meth:`_phrase`) as :meth:`string_draft` drafts it: closed where it ``ends`` at a stop (or the
        source's end), then open, then its first word (the last spelling: the shortest)."""
        word = re.match(rb"\s*\S+", rest)
        closed = (rest + b'",', rest + b'"') if ends else ()  # a comma next: the model writes `",` as one token
        return [d for d in dict.fromkeys((*closed, rest, word.group() if word else b"")) if d]

    def bias(self, logits: torch.Tensor, allowed: torch.Tensor, out: bytes, bonus: float,
             numbers: bool = True, first_digit: bool = False) -> torch.Tensor:
        """``logits`` [V] with ``bonus`` added where a token among the ``TOP`` likeliest allowed ones copies from
        the prompt, inside a JSON string value or (``numbers``) a number; ``logits`` itself when there is
        nothing to add."""
        if bonus == 0:
            return logits
        value = open_string(out)
        if value is None:
            digits = _number_tail(out) if numbers and self.numbers else None  # outside a string: no second scan
            if digits is None or not (digits or first_digit) or not any(n.startswith(digits) for n in self.numbers):
                return logits  # no number begun (or may begin), or one that copies none of the source's
            cut = (lambda tok: self.cuts_number(digits, tok)) if first_digit else None
            return self._add(logits, allowed, bonus, lambda tok: self.copies_number(digits, tok, first_digit), cut)
        conts = self.continuations(value) if value else None
        if value and not conts:
            return logits  # the value so far is no copy of the prompt: nothing to continue
        return self._add(logits, allowed, bonus, lambda tok: self.copies(value, tok, conts))

    def bias_text(self, logits: torch.Tensor, out: bytes, bonus: float) -> torch.Tensor:
        """``logits`` [V] of a free-text step with ``bonus`` added where a token among the ``TOP`` likeliest copies
        from the source, one value per line: it begins a word (its own leading space, or after a space, quote,
        bracket or colon) of at least :data:`TEXT_MIN_START` bytes that begins a value, or it goes on along a
        copy of a value the text has begun at a word start. Matched as written (``fold_case=False``), except that a
        word that begins a value in another case goes on along it in any case (:data:`TEXT_FOLD_GO_ON`); a value is
        begun once, in any case. Where a value ends nothing is added, so where a copy stops stays the model's choice; a copy
        that begins mid-value (the digits of ``AMBER-4231``) gets nothing."""
        if bonus == 0:
            return logits
        conts = self.text_continuations(out)
        at_start = not out or out[-1] in TEXT_OPENERS
        starts = self._line_prefixes(out)

        def copies(token: bytes) -> bool:
            tok = self._low(token)
            if any(c.startswith(tok.lower() if folded else tok) for c, folded in conts):
                return True
            word = tok.lstrip(b" ")
            return len(tok) >= TEXT_MIN_START and bool(word) and (at_start or tok[:1] == b" ") and _word(word[0]) \
                and word in starts

        return self._add(logits, None, bonus, copies)

    def text_continuations(self, out: bytes) -> list[tuple[bytes, bool]]:
        """What follows, in the source, each tail of ``out`` (up to :data:`MAX_SPAN` bytes) that begins a word in
        ``out`` and begins a line (a value) of the source, as written; with :data:`TEXT_FOLD_GO_ON`, for a tail
        found only in another case, what follows it lowercased. Each with whether it was folded."""
        conts: list[tuple[bytes, bool]] = []
        tail = out[-MAX_SPAN - 1:]
        folded = None
        if TEXT_FOLD_GO_ON and not self.fold:
            if self._folded is None:
                self._folded = self.text.lower()
            folded = self._folded
        for n in range(1, min(len(tail), MAX_SPAN) + 1):
            i = len(tail) - n
            if not (_word(tail[i]) and (i == 0 and len(out) <= MAX_SPAN or i > 0 and not _word(tail[i - 1]))):
                continue
            exact = self.continuations(tail[i:], line_start=True)
            if exact or folded is None:
                conts.extend((c.split(b"\n", 1)[0], False) for c in exact)
            else:
                conts.extend((c.split(b"\n", 1)[0], True) for c in self.continuations(tail[i:].lower(), True, folded))
        return [(c, f) for c, f in conts if c]  # a copy runs within one line of the source (one value)

    def text_draft(self, out: bytes) -> list[bytes]:
        """What a free-text copy of one of the source's values would write next after ``out`` (verify's drafts): where
        the text has begun copying a value as written (:meth:`text_continuations`), the rest of that value, from
        the longest begun copy. Empty where no copy is begun, or only in another case."""
        conts = [c for c, folded in self.text_continuations(out) if not folded]
        return conts[-1:]  # the longest tail's (text_continuations goes from the shortest tail up)

    def cuts_number(self, digits: bytes, token: bytes) -> bool:
        """Whether ``token`` ends the number at ``digits`` (+ its own number bytes) that only begins one of the
        source's numbers: ``127`` of ``$127,000``, ``2`` of ``2.1``, where a copy stopped at a thousands separator or
        a decimal point (the extract figures: 14 of 40 salaries written ``127`` for ``$127,000``)."""
        i = 0
        while i < len(token) and token[i] in NUMBER_BYTES:
            i += 1
        head = digits + token[:i]
        if i == len(token) or not head or head in self.numbers:
            return False
        return any(n.startswith(head) for n in self.numbers)

    def _add(self, logits: torch.Tensor, allowed: torch.Tensor | None, bonus: float, copies,
             cuts=None) -> torch.Tensor:
        """``bonus`` added to the tokens among the likeliest allowed (None: all) that ``copies``, taken from those that
        ``cuts`` (a copy stopped short; only with ``DecodeConfig.copy_first_digit``, extract's setting)."""
        k = min(TOP, int(allowed.sum()) if allowed is not None else logits.shape[-1])
        if k == 0:
            return logits
        top = torch.topk(logits if allowed is None else masked_logits(logits, allowed), k).indices.tolist()
        known = [t for t in top if t < len(self.token_bytes) and self.token_bytes[t] is not None]
        hit = [t for t in known if copies(self.token_bytes[t])]
        cut = [t for t in known if cuts(self.token_bytes[t])] if cuts is not None and hit else []
        if not hit:
            return logits
        out_logits = logits.clone()
        out_logits[hit] += bonus
        if cut:
            out_logits[cut] -= bonus
        return out_logits
