"""The per-iteration trace of a run: where each step's time went and what it cost in forwards.

A JSONL trace is appended one whole line per iteration: a single ``os.write`` on an ``O_APPEND`` descriptor,
then ``fsync``, so a process killed mid-run leaves only complete lines (each iteration is either there or not).
Belt and braces for the kernel's one exception (a SIGKILL landing inside a write that spans a page boundary can
cut it short): an append to a file not ending in a newline starts with one, so a torn fragment stays on its own
line, and ``Trace.read_jsonl`` skips lines that do not parse.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..engine.stats import DecodeStats
from ..errors import InvalidRequestError

_LATENCY = ("queue_ms", "prefill_ms", "denoise_ms", "commit_ms", "tool_ms")
MAX_FIELD = 500  # characters of tool arguments / results kept in a record
NARROW = 140  # below this width the table shows the compact column set


@dataclass
class IterationRecord:
    """One iteration of a run: one generation (plan, tool_call, extract or reply) plus any tool it ran.

    Latency split (ms): ``queue_ms`` is the generate call's wall time not spent inside the generator (thread
    hand-off, waiting for the engine, the network for HTTP); ``prefill_ms``/``denoise_ms``/``commit_ms`` come from
    the generator's stats; ``tool_ms`` is the tool's run time; ``total_ms`` the whole iteration (includes
    ``compile_ms`` when the step's template was compiled in this iteration).
    ``retries``: how many failed attempts immediately before this one it is retrying (0 for a first attempt).
    """

    iteration: int
    step: str  # plan | tool_call | extract | reply
    mode: str  # ar | diffusion | verify
    tool: str | None = None  # the tool called (tool_call steps), "final_answer" when the model chose to stop
    queue_ms: float = 0.0
    prefill_ms: float = 0.0
    denoise_ms: float = 0.0
    commit_ms: float = 0.0
    tool_ms: float = 0.0
    compile_ms: float = 0.0
    total_ms: float = 0.0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # of those, reused from the engine's prefix cache (not encoded)
    encoder_forwards: int = 0
    decoder_forwards: int = 0
    output_tokens: int = 0
    pinned_tokens: int = 0
    slot_tokens: int = 0
    tokens_per_forward: float = 0.0
    # verify mode: its checking passes and the drafted slot tokens they kept (accepted_per_pass: their ratio)
    verify_forwards: int = 0
    accepted_slot_tokens: int = 0
    accepted_per_pass: float = 0.0
    retries: int = 0
    error: str | None = None
    run_id: str = ""
    agent: str = ""
    finish_reason: str = ""  # the generation's: stop | length | template | cancelled (timeout, cancellation)
    tool_args: str | None = None  # the tool's arguments as JSON, clipped to MAX_FIELD characters
    tool_result: str | None = None  # what the tool returned (as the model reads it), clipped likewise
    # the tool step's call-or-answer decision by the model's scores (``_decide.py``), made at the start of this
    # iteration (its ms are in ``total_ms``): {"call", "tool", "no_call_margin", "no_call_margin_null"}
    decide_ms: float = 0.0
    decision: dict[str, Any] | None = None

    def add_stats(self, stats: DecodeStats) -> None:
        """Copy a generation's counts and latency split into this record."""
        self.prefill_ms = stats.prefill_ms
        self.denoise_ms = stats.denoise_ms
        self.commit_ms = stats.commit_ms
        self.prompt_tokens = stats.prompt_tokens
        self.cached_prompt_tokens = stats.cached_prompt_tokens
        self.encoder_forwards = stats.encoder_forwards
        self.decoder_forwards = stats.decoder_forwards
        self.output_tokens = stats.output_tokens
        self.pinned_tokens = stats.pinned_tokens
        self.slot_tokens = stats.slot_tokens
        self.tokens_per_forward = round(stats.tokens_per_forward, 4)
        self.verify_forwards = stats.verify_forwards
        self.accepted_slot_tokens = stats.accepted_slot_tokens
        self.accepted_per_pass = round(stats.accepted_per_pass, 4)
        self.finish_reason = stats.finish_reason or ""

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> IterationRecord:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class Trace:
    """The iterations of a run, in order. With ``path`` set, each added record is appended to that JSONL file."""

    records: list[IterationRecord] = field(default_factory=list)
    path: str | None = None

    def __post_init__(self) -> None:
        if self.path is not None:
            check_trace_path(self.path)

    def add(self, record: IterationRecord) -> None:
        self.records.append(record)
        if self.path is not None:
            append_jsonl(self.path, [record])

    def __iter__(self) -> Iterator[IterationRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> IterationRecord:
        return self.records[i]

    def totals(self) -> dict[str, float]:
        """Sums over the run (``tokens_per_forward`` is total output tokens over total forwards after prefill)."""
        keys = (*_LATENCY, "compile_ms", "total_ms", "encoder_forwards", "decoder_forwards", "output_tokens",
                "pinned_tokens", "slot_tokens", "verify_forwards", "accepted_slot_tokens", "retries")
        out: dict[str, float] = {k: sum(getattr(r, k) for r in self.records) for k in keys}
        out["accepted_per_pass"] = round(out["accepted_slot_tokens"] / max(out["verify_forwards"], 1), 4)
        forwards = sum(max(r.encoder_forwards + r.decoder_forwards - (1 if r.prompt_tokens else 0), 0)
                       for r in self.records)
        out["tokens_per_forward"] = round(out["output_tokens"] / max(forwards, 1), 4)
        out["iterations"] = len(self.records)
        return out

    def write_jsonl(self, path: str | os.PathLike[str]) -> None:
        """Append every record to ``path`` (one line each, written and fsynced in one call)."""
        append_jsonl(path, self.records)

    @classmethod
    def read_jsonl(cls, path: str | os.PathLike[str]) -> Trace:
        """Load records from a JSONL trace, skipping blank lines and torn fragments that do not parse."""
        records = []
        for line in Path(path).read_text(encoding="utf-8", errors="replace").split("\n"):
            try:
                records.append(IterationRecord.from_dict(json.loads(line)))
            except (json.JSONDecodeError, TypeError, AttributeError):
                continue
        return cls(records)

    def to_table(self, title: str | None = "agent trace", width: int | None = None) -> Any:
        """A ``rich.table.Table`` with one row per iteration and a totals row; for a ``width`` under 140 columns
        the compact one (time, forwards, tokens), which stays readable in an 80-column terminal."""
        from rich import box
        from rich.table import Table

        if width is not None and width < NARROW:
            return self._compact_table(title)
        table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
        cols = ("#", "step", "mode", "tool", "total ms", "queue", "prefill", "denoise", "commit", "tool ms",
                "enc", "dec", "out", "pinned", "slot", "tok/fwd", "retries", "error")
        for c in cols:
            text = c in ("step", "mode", "tool", "error")
            table.add_column(c, justify="left" if text else "right", no_wrap=c != "error")
        for r in self.records:
            table.add_row(str(r.iteration), r.step, r.mode, r.tool or "", f"{r.total_ms:.1f}",
                          *(f"{getattr(r, k):.1f}" for k in _LATENCY), str(r.encoder_forwards),
                          str(r.decoder_forwards), str(r.output_tokens), str(r.pinned_tokens), str(r.slot_tokens),
                          f"{r.tokens_per_forward:.2f}", str(r.retries), _short(r.error))
        if self.records:
            t = self.totals()
            table.add_section()
            table.add_row("all", "", "", "", f"{t['total_ms']:.1f}", *(f"{t[k]:.1f}" for k in _LATENCY),
                          str(int(t["encoder_forwards"])), str(int(t["decoder_forwards"])),
                          str(int(t["output_tokens"])), str(int(t["pinned_tokens"])), str(int(t["slot_tokens"])),
                          f"{t['tokens_per_forward']:.2f}", str(int(t["retries"])), "")
        return table

    def _compact_table(self, title: str | None) -> Any:
        from rich import box
        from rich.table import Table

        table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
        for c in ("#", "step", "mode", "tool", "ms", "fwd", "out", "tok/fwd", "error"):
            table.add_column(c, justify="left" if c in ("step", "mode", "tool", "error") else "right",
                             no_wrap=c != "error", overflow="fold")
        for r in self.records:
            table.add_row(str(r.iteration), r.step, r.mode, r.tool or "", f"{r.total_ms:.0f}",
                          str(r.encoder_forwards + r.decoder_forwards), str(r.output_tokens),
                          f"{r.tokens_per_forward:.2f}", _short(r.error, 60))
        if self.records:
            t = self.totals()
            table.add_section()
            table.add_row("all", "", "", "", f"{t['total_ms']:.0f}",
                          str(int(t["encoder_forwards"] + t["decoder_forwards"])), str(int(t["output_tokens"])),
                          f"{t['tokens_per_forward']:.2f}", "")
        return table

    def render(self, width: int = 100) -> str:
        """The table as plain text, ``width`` columns (the compact column set under 140; ``render(200)`` shows
        the full latency split)."""
        from rich.console import Console

        buf = io.StringIO()
        Console(file=buf, width=width, color_system=None).print(self.to_table(width=width))
        return buf.getvalue()

    def __str__(self) -> str:
        return self.render()


def check_trace_path(path: str | os.PathLike[str]) -> None:
    """Raise InvalidRequestError (naming ``trace_path``) unless ``path`` can be a JSONL file: not a directory,
    its parent an existing directory."""
    p = Path(path)
    if p.is_dir():
        raise InvalidRequestError(f"trace_path {str(path)!r} is a directory; give a file path (the trace is one "
                                  "JSONL file)")
    if not p.parent.is_dir():
        raise InvalidRequestError(f"trace_path {str(path)!r}: its directory {str(p.parent)!r} does not exist")


def append_jsonl(path: str | os.PathLike[str], records: list[IterationRecord]) -> None:
    """Append ``records`` as JSON lines with one ``os.write`` on an ``O_APPEND`` fd, then fsync.

    Never raises on text: a lone surrogate (``"\\ud800"`` from a tool's error, say) is written as its JSON escape
    (``\\ud800``, which reads back as the same string) and a value JSON cannot hold is written as its ``str``."""
    if not records:
        return
    text = "".join(json.dumps(r.to_dict(), ensure_ascii=False, default=str) + "\n" for r in records)
    data = text.encode("utf-8", errors="backslashreplace")  # only lone surrogates: always inside a JSON string
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":  # a torn line from a killed writer stays on its own
            data = b"\n" + data
        n = os.write(fd, data)
        if n != len(data):  # a short write on a regular file means the disk is full
            raise OSError(f"short write to {os.fspath(path)}: {n} of {len(data)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


def clip(text: str | None, n: int = MAX_FIELD) -> str | None:
    """``text`` cut to ``n`` characters (an ellipsis marks the cut)."""
    if text is None or len(text) <= n:
        return text
    return text[: n - 1] + "…"


def _short(text: str | None, n: int = 40) -> str:
    if not text:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
