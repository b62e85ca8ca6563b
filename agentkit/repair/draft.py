"""Drafting candidate replacements for one suspicious line.

A ``LineDrafter`` turns a :class:`Site` (a file, a line, the failing tests' messages) into candidate lines in the order
to validate them. Two kinds:

- :class:`OperatorDrafter`: the mutation operators of ``agentkit.repair.mutate`` applied to the line, and the
  value-based literal rewrites of ``agentkit.repair.literals`` (from the failing assertion's actual and expected
  values), in a seeded random order (:func:`operator_edits`). It is the model-free baseline and never uses a
  model.
- :class:`ModelDrafter`: a language model under a code-edit template. The prompt shows the failing assertion and the
  function with the line marked; the answer is pinned to the function's text up to the line, and the line itself is
  the open slot (it ends at its newline; its indentation is pinned to the original's). ``sample`` draws ``k``
  lines in one batched decode: the prompt is encoded once and its cache shared by ``k`` rows, one forward per
  token for all rows (``batched=False`` draws the same lines one row at a time, to measure what batching saves).
  ``rank`` orders the operators' candidates by the model's log-probability of each line, all scored in one
  batched forward. ``hybrid`` (the default) scores the sampled lines and the operators' candidates together.
  ``diffusion`` drafts the ``k`` lines as block-diffusion canvases instead (``Engine.generate`` in diffusion
  mode under a template that pins the code up to the line, ``k`` requests batched by a ``Batcher``), then scores
  them with the operators' candidates as ``hybrid`` does.

Every candidate is dropped when it equals the original line, does not parse (``ast``), or holds merge-marker text.
"""

from __future__ import annotations

import ast
import io
import math
import random
import time
import tokenize
import zlib
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from agentkit.tools.edit_guard import MARKERS

from .failures import assertion_values
from .literals import literal_variants
from .mutate import LineEdit, enclosing_function, line_variants, parses

DRAFT_MODES = ("sample", "rank", "hybrid", "diffusion")
MAX_LINE_TOKENS = 32
CONTEXT_LINES = 12  # a module-level site shows this many lines either side
MAX_MESSAGE_CHARS = 600


@dataclass
class Site:
    """One line to change: ``source`` is the file's text, ``line`` 1-based, ``message`` the failing tests' report."""

    path: str
    source: str
    line: int
    message: str = ""
    tree: ast.AST | None = None

    def __post_init__(self) -> None:
        if self.tree is None:
            self.tree = ast.parse(self.source)

    @property
    def lines(self) -> list[str]:
        return self.source.splitlines()

    @property
    def original(self) -> str:
        return self.lines[self.line - 1]

    def window(self) -> tuple[int, int]:
        """The 1-based inclusive line range shown to the model: the enclosing function, else a window."""
        fn = enclosing_function(self.tree, self.line)
        if fn is not None:
            start = min([fn.lineno, *(d.lineno for d in getattr(fn, "decorator_list", []))])
            return start, fn.end_lineno or fn.lineno
        return max(1, self.line - CONTEXT_LINES), min(len(self.lines), self.line + CONTEXT_LINES)


@dataclass
class DraftStats:
    """What drafting one site cost: model forwards, rows and seconds."""

    forwards: int = 0
    rows: int = 0
    seconds: float = 0.0
    sampled: int = 0
    kept: int = 0
    #: the model's score of each candidate (log p(line) - log p(original line)), in the order returned; None
    #: when the drafter has no scores (the operators)
    scores: list[float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class LineDrafter(Protocol):
    name: str

    def draft(self, site: Site, k: int) -> tuple[list[LineEdit], DraftStats]:
        """Candidates for ``site`` in the order to validate them (at most ``k`` sampled; operators all)."""
        ...


def keep(site: Site, text: str, seen: set[str]) -> bool:
    """Whether a drafted line is worth validating: new, free of merge markers, and the file still parses."""
    if text in seen or strip_comment(text) == strip_comment(site.original) or not text.strip():
        return False
    if any(m in text for m in MARKERS) or HOLE in text:
        return False
    seen.add(text)
    return parses(site.lines, site.line, text)


def operator_edits(site: Site) -> list[LineEdit]:
    """The operators' candidates for ``site``: the mutation operators on the line, then the value-based literal
    rewrites from the failing assertions' actual and expected values (``agentkit.repair.literals``)."""
    ops = line_variants(site.source, site.line, site.tree)
    seen = {e.text for e in ops}
    values = literal_variants(site.source, site.line, assertion_values(site.message))
    return ops + [e for e in values if e.text not in seen]


class OperatorDrafter:
    """The model-free baseline: every operator variant of the line, in a random order seeded by the site."""

    name = "operators"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def draft(self, site: Site, k: int) -> tuple[list[LineEdit], DraftStats]:
        t0 = time.perf_counter()
        cands = operator_edits(site)
        rng = random.Random(self.seed * 1_000_003 + zlib.crc32(f"{site.path}:{site.line}".encode()))
        rng.shuffle(cands)
        return cands, DraftStats(seconds=time.perf_counter() - t0, kept=len(cands))


HOLE = "<the line to write>"


def build_prompt(site: Site) -> tuple[list[dict[str, str]], str]:
    """The chat messages and the pinned start of the answer (the code up to, not including, the line's newline).

    The line itself is not shown: the function appears with that line as a hole, so the model writes (and
    scores) the line from its context and the failing test, not by copying the wrong line."""
    a, b = site.window()
    lines = site.lines
    pad = site.original[: len(site.original) - len(site.original.lstrip())]
    shown = [pad + HOLE if i == site.line else ln for i, ln in enumerate(lines[a - 1:b], a)]
    msg = site.message.strip()[:MAX_MESSAGE_CHARS]
    user = (f"A test fails:\n{msg}\n\nOne line of this function from {site.path} is wrong; it is shown as "
            f"{HOLE}. Write the function again with that line written correctly.\n\n```python\n"
            + "\n".join(shown) + "\n```")
    system = "You are a careful Python programmer. You fix bugs by changing one line."
    pinned = "```python\n" + "\n".join(lines[a - 1:site.line - 1])
    return [{"role": "system", "content": system}, {"role": "user", "content": user}], pinned.rstrip("\n")


def strip_comment(line: str) -> str:
    """``line`` without a trailing ``#`` comment (tokenize decides what is a comment), right-stripped."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return line.rstrip()
    cut = next((t.start[1] for t in toks if t.type == tokenize.COMMENT), None)
    if cut is None:
        return line.rstrip()
    pad = line[: len(line) - len(line.lstrip())]
    return (pad + line.strip()[:cut]).rstrip()


def _copy_cache(cache: Any, backbone: Any) -> Any:
    out = backbone.new_cache()
    for i, layer in enumerate(cache.layers):
        out.update(layer.keys.clone(), layer.values.clone(), i)
    return out


def _indent(text: str, original: str) -> str:
    """``text`` with the original line's indentation (the template pins it)."""
    pad = original[: len(original) - len(original.lstrip())]
    return pad + text.strip()


class ModelDrafter:
    """Candidates from a language model (see the module docstring). ``engine``: an ``agentkit`` Engine."""

    def __init__(self, engine: Any, mode: str = "hybrid", *, temperature: float = 0.8, top_p: float = 0.95,
                 batched: bool = True, seed: int = 0, name: str | None = None) -> None:
        if mode not in DRAFT_MODES:
            raise ValueError(f"unknown draft mode {mode!r}; expected one of {DRAFT_MODES}")
        self.engine = engine
        self.mode = mode
        self.temperature = temperature
        self.top_p = top_p
        self.batched = batched
        self.seed = seed
        self.name = name or f"model-{mode}" + ("" if batched else "-one-at-a-time")

    @property
    def tokenizer(self) -> Any:
        return self.engine.tokenizer

    def prompt_cache(self, site: Site, stats: DraftStats) -> tuple[Any, torch.Tensor]:
        """The prompt and the pinned code encoded once: its cache and the logits after it."""
        messages, pinned = build_prompt(site)
        ids = self.engine.encode_prompt(messages) + self.tokenizer.encode(pinned, add_special_tokens=False)
        bb = self.engine.backbone
        cache = bb.new_cache()
        logits = bb.encode(ids, cache)[-1]
        stats.forwards += 1
        stats.rows += 1
        return cache, logits

    def draft(self, site: Site, k: int) -> tuple[list[LineEdit], DraftStats]:
        t0 = time.perf_counter()
        stats = DraftStats()
        sampled: list[str] = []
        if self.mode == "diffusion":  # its own requests (they take the engine's lock themselves)
            sampled = self.canvases(site, k, stats)
        with self.engine.lock, torch.inference_mode():
            cache, first = self.prompt_cache(site, stats)
            if self.mode in ("sample", "hybrid"):
                sampled = self.sample(cache, first, site, k, stats)
            stats.sampled = len(sampled)
            seen: set[str] = set()
            lines = (_indent(strip_comment(s), site.original) for s in sampled)
            texts = [t for t in lines if keep(site, t, seen)]
            ops = operator_edits(site) if self.mode != "sample" else []
            kinds = {e.text: e.kind for e in ops}
            texts += [e.text for e in ops if keep(site, e.text, seen)]
            *scores, now = self.score(cache, first, [*texts, site.original], stats)
        order = sorted(range(len(texts)), key=lambda i: -scores[i])
        out = [LineEdit(site.line, texts[i], kinds.get(texts[i], "model")) for i in order]
        stats.scores = [round(scores[i] - now, 4) for i in order]
        stats.kept = len(out)
        stats.seconds = time.perf_counter() - t0
        return out, stats

    # -- sampling under the template -----------------------------------------------------------------------
    def _pick(self, logits: torch.Tensor, gen: torch.Generator, step: int) -> int:
        logits = logits.float().clone()
        if step == 0:
            for e in self.engine.lm.eos_ids:
                logits[e] = -math.inf
        probs = torch.softmax(logits / max(self.temperature, 1e-4), -1)
        if self.top_p is not None and self.top_p < 1:
            p, idx = probs.sort(descending=True)
            cut = (p.cumsum(0) - p) > self.top_p
            probs = torch.zeros_like(probs).scatter_(0, idx, p.masked_fill(cut, 0))
        return int(torch.multinomial(probs, 1, generator=gen))

    def _done(self, toks: list[int]) -> bool:
        if toks and toks[-1] in self.engine.lm.eos_ids:
            return True
        text = self.tokenizer.decode(toks)
        body = text.lstrip("\n")
        return "\n" in body and bool(body.split("\n", 1)[0].strip()) or len(toks) >= MAX_LINE_TOKENS

    def _line(self, toks: list[int]) -> str:
        ids = [t for t in toks if t not in self.engine.lm.eos_ids]
        return self.tokenizer.decode(ids).lstrip("\n").split("\n", 1)[0]

    def sample(self, cache: Any, first: torch.Tensor, site: Site, k: int, stats: DraftStats) -> list[str]:
        """``k`` lines drawn after the pinned text; one forward per token for all rows when ``batched``."""
        from agentkit.engine.backbone import Pass

        bb = self.engine.backbone
        base = zlib.crc32(f"{self.seed}:{site.path}:{site.line}".encode())
        gens = [torch.Generator().manual_seed(base + r) for r in range(k)]
        toks: list[list[int]] = [[] for _ in range(k)]
        caches = [_copy_cache(cache, bb) for _ in range(k)]
        groups = [list(range(k))] if self.batched else [[r] for r in range(k)]
        for group in groups:
            logits = {r: first for r in group}
            live = list(group)
            step = 0
            while live:
                for r in live:
                    toks[r].append(self._pick(logits[r], gens[r], step))
                live = [r for r in live if not self._done(toks[r])]
                if not live:
                    break
                outs = bb.forward_many([Pass([toks[r][-1]], caches[r], [-1], True) for r in live])
                stats.forwards += 1
                stats.rows += len(live)
                logits = {r: o[-1] for r, o in zip(live, outs)}
                step += 1
        return [self._line(t) for t in toks]

    # -- block-diffusion canvases ----------------------------------------------------------------------------
    def canvases(self, site: Site, k: int, stats: DraftStats) -> list[str]:
        """``k`` lines drafted in diffusion mode, each under a template pinning the code up to the line; the ``k``
        requests' forwards run batched (``engine/batch.py``)."""
        from concurrent.futures import ThreadPoolExecutor
        from dataclasses import replace

        from agentkit.config import DecodeConfig
        from agentkit.constrain.nodes import Lit, Slot, Template, seq
        from agentkit.engine.batch import Batcher

        messages, pinned = build_prompt(site)
        pad = site.original[: len(site.original) - len(site.original.lstrip())]
        template = Template(seq(Lit(pinned + "\n" + pad), Slot(r"[^\s][^\n]*", MAX_LINE_TOKENS), Lit("\n")),
                            kind="regex")
        room = len(self.tokenizer.encode(pinned, add_special_tokens=False)) + MAX_LINE_TOKENS + 8
        base = zlib.crc32(f"{self.seed}:{site.path}:{site.line}".encode())
        cfg = DecodeConfig(mode="diffusion", temperature=self.temperature, max_new_tokens=room)
        self.engine.constraint(template)  # the token automaton, built once before the k requests share it
        batcher = Batcher(max_batch=k)

        def one(r: int) -> Any:
            with batcher.slot(live=True) as seat:
                return self.engine.generate(messages, replace(cfg, seed=base + r), template=template, batch=seat)

        try:
            with ThreadPoolExecutor(k) as pool:
                results = list(pool.map(one, range(k)))
        finally:
            batcher.close()
        stats.forwards += max(r.stats.forwards for r in results)
        stats.rows += sum(r.stats.forwards for r in results)
        return [r.text.rstrip("\n").rsplit("\n", 1)[-1] for r in results]

    # -- scoring -------------------------------------------------------------------------------------------
    def score(self, cache: Any, first: torch.Tensor, texts: list[str], stats: DraftStats) -> list[float]:
        """The log-probability of each line (with its newline) after the pinned text; one forward for all."""
        from agentkit.engine.backbone import Pass

        if not texts:
            return []
        bb = self.engine.backbone
        seqs = [self.tokenizer.encode("\n" + t + "\n", add_special_tokens=False) for t in texts]
        first_lp = torch.log_softmax(first.float(), -1)
        out = bb.forward_many([Pass(s, cache, list(range(len(s) - 1)), False) for s in seqs if len(s) > 1])
        stats.forwards += 1
        stats.rows += len(seqs)
        scores, j = [], 0
        for s in seqs:
            lp = float(first_lp[s[0]])
            if len(s) > 1:
                rows = torch.log_softmax(out[j].float(), -1)
                lp += float(rows[torch.arange(len(s) - 1), torch.tensor(s[1:])].sum())
                j += 1
            scores.append(lp)
        return scores
