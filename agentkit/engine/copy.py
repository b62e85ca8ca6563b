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
Defaults measured on all 600 BFCL questions in one run (``evals/results/copy600_s12.json``): off 0.385; 2.0 from the
whole prompt 0.393 (10 won, 5 lost); 2.0 from the user message 0.400 (16 won, 7 lost, sign test p = 0.09), the same
p50 latency. The bonus (2) was chosen on the first 50 questions of each file, where 1, 2 and 4 scored the same.

Only inside a JSON string (an odd count of unescaped quotes in the output), only with a template: everything else,
and the mask, are untouched. The bonus is part of the pick rule, so verify and the causal canvas, which call the
same pick with the same context, stay equal to ar-constrained under it (the adapter drafter's walk too; DiffusionGemma's
uniform sampler has its own pick and no copy prior).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .sampler import masked_logits

MAX_SPAN = 32  # bytes of a prompt continuation a token is checked against
TOP = 64  # the likeliest allowed tokens considered for the bonus


def _word(b: int) -> bool:
    return chr(b).isalnum() or b >= 0x80  # a byte of a word (non-ASCII: part of a multi-byte letter)


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

    def __init__(self, text: bytes, token_bytes: Sequence[bytes | None]) -> None:
        """``text``: what values may be copied from; ``token_bytes``: each token's bytes (None: a special one)."""
        self.token_bytes = token_bytes
        self.text = t = text.lower()
        self.starts = [i for i in range(len(t)) if _word(t[i]) and (i == 0 or not _word(t[i - 1]))]
        self._first: set[bytes] | None = None

    @classmethod
    def from_tokens(cls, prompt: Sequence[int], token_bytes: Sequence[bytes | None]) -> CopyPrior:
        """Copies from the prompt's own text (special tokens as line breaks)."""
        text = b"".join(token_bytes[t] or b"\n" if t < len(token_bytes) else b"\n" for t in prompt)
        return cls(text, token_bytes)

    def _first_prefixes(self) -> set[bytes]:
        if self._first is None:
            self._first = {self.text[i:i + n] for i in self.starts for n in range(1, MAX_SPAN + 1)}
        return self._first

    def continuations(self, value: bytes) -> list[bytes]:
        """What follows ``value`` (lowercased) at each of its occurrences in the prompt that begin a word."""
        value = value.lower()
        out, t, i = [], self.text, self.text.find(value)
        while i >= 0:
            if i == 0 or not _word(t[i - 1]):
                out.append(t[i + len(value):i + len(value) + MAX_SPAN])
            i = t.find(value, i + 1)
        return out

    def copies(self, value: bytes, token: bytes, conts: list[bytes] | None) -> bool:
        """Whether ``token`` continues a copy of the prompt after ``value`` (``conts``: its continuations)."""
        tok = token.lower()
        if not tok:
            return False
        if not value:
            return tok in self._first_prefixes()
        if tok[:1] == b'"':  # closing the value where a copied span ends at a word boundary
            return any(c == b"" or not _word(c[0]) for c in conts or ())
        return any(c.startswith(tok) for c in conts or ())

    def bias(self, logits: torch.Tensor, allowed: torch.Tensor, out: bytes, bonus: float) -> torch.Tensor:
        """``logits`` [V] with ``bonus`` added where a token among the ``TOP`` likeliest allowed ones copies from
        the prompt, inside a JSON string value; ``logits`` itself when there is nothing to add."""
        value = open_string(out)
        if value is None or bonus == 0:
            return logits
        conts = self.continuations(value) if value else None
        if value and not conts:
            return logits  # the value so far is no copy of the prompt: nothing to continue
        k = min(TOP, int(allowed.sum()))
        if k == 0:
            return logits
        top = torch.topk(masked_logits(logits, allowed), k).indices.tolist()
        hit = [t for t in top if t < len(self.token_bytes) and self.token_bytes[t] is not None
               and self.copies(value, self.token_bytes[t], conts)]
        if not hit:
            return logits
        out_logits = logits.clone()
        out_logits[hit] += bonus
        return out_logits
