"""Every decoding setting, declared once: name, type, range or choices, default, and where it applies.

:data:`SETTINGS` is the table. ``DecodeConfig`` (``agentkit/config.py``) takes its checks from it; the SDK's
``ModelSettings`` (``sdk/_settings.py``), the server's request fields and ``"agentkit"`` extension
(``serving/protocol.py``, ``serving/plan.py``), the HTTP client's body (``sdk/_http.py``), the evals' context
(``evals/runner.py``), the CLI's options (``cli.py``) and the Ray config (``serving/ray_serve.py``, the engine's
settings) are derived from it or checked against it by ``tests/test_settings_table.py``: a setting declared
anywhere without the table knowing it fails that test. The engine's settings are ``EngineConfig``'s fields
(``agentkit/config.py``): the CLI's engine options take their types and defaults from them. Every class or function
in ``agentkit`` and ``serving`` that declares three or more names of either table is a known rendering, checked for
the tables' types, defaults and ranges by ``tests/test_settings_renderings.py``.

Where a setting applies (:data:`PATHS`):

- ``engine``: ``DecodeConfig``, what an in-process ``Engine.generate`` honours (every setting but the template's,
  :data:`TEMPLATE_SETTINGS`: ``json_style``, ``open_objects`` and ``parallel_tool_calls``);
- ``sdk``: a ``ModelSettings`` key (``Setting.sdk``, the name there);
- ``server``: a field of the chat-completions request (``Setting.server``: ``"body.NAME"`` at the top level,
  ``"agentkit.NAME"`` in the extension); the HTTP client sends exactly these, and refuses a config whose other
  settings differ from their defaults (the server could not honour them);
- ``cli``: an option of ``agentkit generate``;
- ``evals``: a field of the evals' ``EvalContext``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .validate import SEED_MAX, SEED_MIN

MODES: tuple[str, ...] = ("ar", "diffusion", "verify")
GREEDY: tuple[str, ...] = ("byte", "token")
SAMPLERS: tuple[str, ...] = ("auto", "jacobi", "mask", "uniform")
STYLES: tuple[str, ...] = ("compact", "spaced", "spaced-schema-order")  # agentkit.constrain.canonical.STYLES
DEFAULT_STYLE = "spaced"  # agentkit.constrain.canonical.DEFAULT_STYLE
PATHS: tuple[str, ...] = ("engine", "sdk", "server", "cli", "evals")
INF = math.inf


@dataclass(frozen=True)
class Setting:
    """One decoding setting. ``kind``: ``int``, ``float``, ``bool``, ``str`` (one of ``choices``), ``text`` (any
    string), ``list`` (of non-empty strings) or ``bias`` (token id -> a number); numbers (a bias's too) lie in
    ``low..high`` (``low_open``: ``low`` itself excluded); ``optional``: None is allowed."""

    name: str
    kind: str
    default: Any
    applies: tuple[str, ...]
    doc: str
    choices: tuple[str, ...] = ()
    low: float = -INF
    high: float = INF
    low_open: bool = False
    optional: bool = False
    sdk: str | None = None  # its ModelSettings key ("sdk" in applies)
    server: str | None = None  # "body.NAME" or "agentkit.NAME" ("server" in applies)


_E, _S, _V, _C, _V2 = "engine", "sdk", "server", "cli", "evals"
SETTINGS: tuple[Setting, ...] = (
    Setting("mode", "str", "ar", (_E, _S, _V, _C), "decoding mode", MODES, sdk="mode", server="agentkit.mode"),
    Setting("max_new_tokens", "int", 256, (_E, _S, _V, _C, _V2), "output token budget", low=1, high=32768, sdk="max_tokens",
            server="body.max_tokens"),
    Setting("temperature", "float", 0.0, (_E, _S, _V, _C), "0: greedy", low=0, high=2, sdk="temperature",
            server="body.temperature"),
    Setting("greedy", "str", "byte", (_E, _S, _V, _V2), "greedy pick under a template: byte by byte or argmax",
            GREEDY, sdk="greedy", server="agentkit.greedy"),
    Setting("copy_bias", "float", 2.0, (_E, _S, _V, _V2), "logit bonus for copying the source in JSON strings",
            low=0, high=100, sdk="copy_bias", server="agentkit.copy_bias"),
    Setting("copy_from", "str", "user", (_E, _S, _V, _V2), "the copy prior's source", ("prompt", "user"),
            sdk="copy_from", server="agentkit.copy_from"),
    Setting("copy_numbers", "bool", True, (_E, _S, _V, _V2), "the copy prior in number slots too",
            sdk="copy_numbers", server="agentkit.copy_numbers"),
    Setting("copy_source", "text", None, (_E, _V), "the copy prior's source text itself (extract: the text being "
            "extracted; the agent's answer after tools: the results' values); None: as copy_from says, and no "
            "prior on free text", optional=True, server="agentkit.copy_source"),
    Setting("copy_text_bias", "float", 8.0, (_E, _S, _V), "logit bonus for copying copy_source's values in free text "
            "(the agent's answer after tool results); 0: off", low=0, high=100, sdk="copy_text_bias",
            server="agentkit.copy_text_bias"),
    Setting("copy_first_digit", "bool", False, (_E, _V), "the number copy prior at a number's first digit too "
            "(on for extract and the server's response_format)", server="agentkit.copy_first_digit"),
    Setting("top_k", "int", None, (_E, _V), "sample among the k likeliest tokens", low=1, optional=True,
            server="body.top_k"),
    Setting("top_p", "float", None, (_E, _S, _V), "nucleus sampling", low=0, high=1, low_open=True, optional=True,
            sdk="top_p", server="body.top_p"),
    Setting("frequency_penalty", "float", 0.0, (_E, _S, _V), "subtracted from a token's logit once per time it is "
            "already in the output (OpenAI's definition; every mode, the template's mask still applies)", low=-2,
            high=2, sdk="frequency_penalty", server="body.frequency_penalty"),
    Setting("presence_penalty", "float", 0.0, (_E, _S, _V), "subtracted from the logit of a token already in the "
            "output (OpenAI's definition)", low=-2, high=2, sdk="presence_penalty", server="body.presence_penalty"),
    Setting("logit_bias", "bias", {}, (_E, _S, _V), "token id -> a bonus added to its logit (OpenAI's logit_bias; "
            "-100 bans the token, 100 all but forces it; inside a template only among the tokens its mask allows)",
            low=-100, high=100, sdk="logit_bias", server="body.logit_bias"),
    Setting("seed", "int", None, (_E, _S, _V, _C, _V2), "sampling seed", low=SEED_MIN,
            high=SEED_MAX, optional=True, sdk="seed", server="body.seed"),
    Setting("canvas_length", "int", 32, (_E, _V, _C, _V2), "canvas positions per block", low=1,
            high=4096, server="agentkit.canvas_length"),
    Setting("sized_passes", "bool", True, (_E,), "cut verify blocks to the length the cost curve pays for"),
    Setting("max_denoising_steps", "int", 48, (_E, _V), "denoising steps per block", low=1,
            high=4096, server="agentkit.max_denoising_steps"),
    Setting("sampler", "str", "auto", (_E, _V, _C), "canvas sampler", SAMPLERS, server="agentkit.sampler"),
    Setting("confidence_threshold", "float", 0.99, (_E,), "mask sampler: accept positions above this", low=0,
            high=1),
    Setting("entropy_bound", "float", 0.1, (_E,), "uniform sampler's entropy bound", low=0),
    Setting("stable_steps", "int", 1, (_E,), "adaptive stop: argmax canvas unchanged this many steps", low=1),
    Setting("entropy_threshold", "float", 0.05, (_E,), "adaptive stop: mean entropy below this", low=0),
    Setting("final_temperature", "float", None, (_E,), "linear temperature schedule's end", low=0, optional=True),
    Setting("stop", "list", [], (_E, _V), "stop strings (the output is cut before the first)", server="body.stop"),
    Setting("stop_loops", "int", 0, (_E, _S, _V), "the output ends once it has written one piece of 1..32 tokens this "
            "many times in a row (12 tokens at least; finish reason loop, a template's output is then incomplete, as "
            "at the token budget); 0: off, else >= 2. The SDK agent's free-text reply: 4 unless set", low=0, high=64,
            sdk="stop_loops",
            server="agentkit.stop_loops"),
    Setting("weights", "str", "auto", (_E, _C), "which weights decode; auto: the adapter for diffusion only, "
            "adapted: the adapter in every mode (AR on the adapted weights), loaded: no LoRA merged (the weights as "
            "loaded)", ("auto", "base", "adapted", "loaded")),
    Setting("draft", "str", "auto", (_E,), "verify mode's drafts: auto = prompt lookup, and the block drafter for free "
            "text where the engine has one; lookup; adapter; drafter (where lookup has no guess, templates too)",
            ("auto", "lookup", "adapter", "drafter")),
    Setting("draft_steps", "int", 1, (_E,), "adapter drafts: mask-sampler passes per draft", low=1),
    Setting("keep_cache", "bool", False, (_E,), "the decode's keys/values stay with the engine for one reader "
            "(extract's settling, and the server's for a response_format)"),
    Setting("json_style", "str", DEFAULT_STYLE, (_S, _V), "how structured steps write the pinned JSON punctuation "
            "(the template's setting, not the decoder's)", STYLES, sdk="json_style", server="agentkit.json_style"),
    Setting("open_objects", "bool", False, (_S, _V), "False: an object schema that lists its properties and says "
            "nothing of additionalProperties generates those keys only (closed); True: other keys too, as the schema "
            "allows. Validation is the schema's own either way (the template's setting)", sdk="open_objects",
            server="agentkit.open_objects"),
    # the SDK's default is off: on SmolLM2 a reply that may hold several calls writes its one call again before
    # it stops (engine/lines.py), 1.6x the p50 of a single call on 40 BFCL questions, none of which needed a second
    # call (evals/results/serving/parallel_calls_stop.json). The server's default is OpenAI's, on (serving/plan.py).
    Setting("parallel_tool_calls", "bool", False, (_S, _V), "a tool step may make several calls, one per line (run "
            "concurrently by the SDK, returned as several tool_calls by the server); False: one call at most (the "
            "template's setting; OpenAI's and pydantic-ai's name). The server's default is true, as OpenAI's",
            sdk="parallel_tool_calls", server="body.parallel_tool_calls"),
    Setting("grounded_arguments", "bool", True, (_S, _V), "a tool call's argument values come from the "
            "conversation's user and tool messages (spans, the numbers they write, the currencies they name: "
            "agentkit.steps.arguments), and a tool with a required argument they give no value for is not chosen "
            "(the template's setting)", sdk="grounded_arguments", server="agentkit.grounded_arguments"),
)
# the template's, not the decoder's
TEMPLATE_SETTINGS: tuple[str, ...] = ("json_style", "open_objects", "parallel_tool_calls", "grounded_arguments")
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
DECODE: tuple[Setting, ...] = tuple(s for s in SETTINGS if "engine" in s.applies)  # DecodeConfig's fields


def where(path: str) -> tuple[Setting, ...]:
    """The settings that apply on ``path`` (one of :data:`PATHS`)."""
    if path not in PATHS:
        raise ValueError(f"unknown path {path!r}; known: {PATHS}")
    return tuple(s for s in SETTINGS if path in s.applies)


def bounds(name: str) -> dict[str, float]:
    """A numeric setting's range as pydantic's ``Field`` keywords (``ge``/``gt``, ``le``): the server's request
    models take their bounds from here."""
    s = BY_NAME[name]
    out: dict[str, float] = {}
    if s.low != -INF:
        out["gt" if s.low_open else "ge"] = s.low
    if s.high != INF:
        out["le"] = s.high
    return out


def sdk_names() -> dict[str, str]:
    """``ModelSettings`` key -> setting name."""
    return {s.sdk: s.name for s in SETTINGS if s.sdk}


def server_fields(place: str) -> dict[str, str]:
    """Request field -> setting name, for ``place`` ``"body"`` (the top level) or ``"agentkit"`` (the extension)."""
    return {s.server.split(".", 1)[1]: s.name for s in SETTINGS if s.server and s.server.startswith(place + ".")}


def _range(s: Setting) -> str:
    """A setting's range or choices as the docs' table writes them."""
    num = lambda x: "inf" if x == INF else f"{x:g}"
    if s.choices:
        text = " \\| ".join(s.choices)
    elif s.name == "seed":
        text = "-2^63 .. 2^64-1"
    elif s.kind in ("int", "float", "bias") and (s.low != -INF or s.high != INF):
        text = f"{'(' if s.low_open else '['}{num(s.low)}, {num(s.high)}{']' if s.high != INF else ')'}"
    else:
        text = ""
    return f"{text} or null" if s.optional and text else ("null allowed" if s.optional else text)


def markdown_table() -> str:
    """The table of :data:`SETTINGS` that ``docs/settings.md`` holds (``tests/test_settings_table.py`` checks they
    are the same; ``python -m agentkit.settings`` prints it)."""
    rows = ["| name | type | range / choices | default | applies | names | what |", "|---|---|---|---|---|---|---|"]
    for s in SETTINGS:
        names = "; ".join(x for x in (f"SDK `{s.sdk}`" if s.sdk else "", f"HTTP `{s.server}`" if s.server else "")
                          if x)
        rows.append(f"| `{s.name}` | {s.kind} | {_range(s)} | `{s.default!r}` | {', '.join(s.applies)} | {names} | "
                    f"{s.doc.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
