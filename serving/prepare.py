"""Preparation: what a request needs before its first forward, inside its life (its timeout, its queue slot).

1. compile the plan's schema (``response_format`` or the forced tools) to a template, cached by schema;
2. build the template's token automata (the slot DFAs over the vocabulary: the expensive part), outside the
   engine's lock.

Steps 1-2 run under a :class:`~agentkit.constrain.limits.CompileLimits` budget (the server's ``--compile-*``
options) whose time limit is also cut to the request's remaining time, and whose cancel flag is the request's:
a build over a limit is a typed 400 (``SchemaLimitError`` naming the limit and the pointer), and a build whose
request timed out or whose client left stops at its next check.
3. tokenize the prompt and check it against the model's context minus ``max_tokens`` (a 400 naming both numbers).

Steps 1-2 run on the scheduler's preparation pool when the schema is new (never on the event loop, never in a
decoding slot); a cached schema and step 3 run on the decoding worker just before the first forward (step 3 is
cheap: a prompt that cannot fit was already refused from its length in characters, ``plan.plan_request``).

Everything here raises typed errors (:class:`~serving.errors.APIError`, agentkit's ``UserError``) that reach the
client as a 4xx before any response byte is sent, streaming or not.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from agentkit import validate
from agentkit.constrain.build import build_constraint
from agentkit.constrain.ground import Grounding, grounded_argument_template, grounded_template
from agentkit.constrain.limits import CompileLimits, budget
from agentkit.constrain.nodes import Template
from agentkit.engine.faces import Constraining, Tokenizing
from agentkit.errors import CompileCancelled, UserError
from agentkit.steps.arguments import ArgumentSources
from agentkit.steps.runner import ToolStep
from agentkit.toolcall import calls_template

from .errors import APIError, user_error
from .plan import RequestPlan, SchemaJob
from .scheduler import Job, SliceExpired

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}

Compile = Callable[..., Template]


def model_context(engine: Any) -> int | None:
    """The model's context in tokens, or None when the engine does not say (an engine without the
    :class:`~agentkit.engine.faces.Tokenizing` face: a test double)."""
    return engine.context_length if isinstance(engine, Tokenizing) else None


def longest_token_chars(engine: Any) -> int | None:
    """Characters in the vocabulary's longest token (bounds a prompt's token count from below); None without the
    :class:`~agentkit.engine.faces.Tokenizing` face."""
    return engine.longest_token_chars if isinstance(engine, Tokenizing) else None


class Preparer:
    """Compiles, builds and checks (see the module docstring). ``compile_schema(schema, strict=...)`` defaults
    to ``agentkit.constrain.compiler.compile_schema``."""

    def __init__(self, engine: Any, compile_schema: Compile | None = None, cache_size: int = 64,
                 max_context: int | None = None, limits: CompileLimits | None = None, *,
                 failure_ttl_s: float = 600.0, fast_lane_s: float = 1.0) -> None:
        self.engine = engine
        self._compile = compile_schema
        self.limits = limits or CompileLimits()
        ctx = model_context(engine)
        self.context = min(c for c in (ctx, max_context) if c is not None) if (ctx or max_context) else None
        self._lock = threading.Lock()
        self._templates: OrderedDict[str, Template] = OrderedDict()
        self._groundings: dict[str, Grounding] = {}  # a grounded response template's key -> its grounding
        self._cache_size = cache_size
        self.failure_ttl_s, self.fast_lane_s = failure_ttl_s, fast_lane_s
        self._failed: OrderedDict[str, tuple[APIError, float]] = OrderedDict()  # digest -> (error, expiry)

    def compiler(self) -> Compile:
        if self._compile is None:
            try:
                from agentkit.constrain.compiler import compile_schema
            except ImportError as e:
                raise APIError(501, f"structured output is unavailable: the schema compiler failed to import "
                                    f"({e})", "server_error", "compiler_unavailable") from None
            self._compile = compile_schema
        return self._compile

    def compile_one(self, schema: Any, where: str, strict: bool = False, style: str | None = None) -> Template:
        if not isinstance(schema, dict):
            raise APIError(400, f"{where}: a JSON Schema must be an object", param=where)
        kw = {"style": style} if style else {}  # a custom compile_schema need not know styles unless one is asked
        try:
            return self.compiler()(schema, strict=True, **kw) if strict else self.compiler()(schema, **kw)
        except UserError as e:
            raise user_error(e, where) from None
        except RecursionError:
            raise APIError(400, f"{where}: the schema is nested too deeply to compile", param=where,
                           code="unsupported_schema") from None

    def template(self, sj: SchemaJob) -> Template:
        key = sj.key
        with self._lock:
            t = self._templates.get(key)
            if t is not None:
                self._templates.move_to_end(key)
                return t
        grounding: Grounding | None = None
        if sj.kind == "tools":  # each tool's parameters compiled here (errors name the tool), then one call template
            specs = [(tool.function.name, self.arguments(sj, tool.function.name, tool.function.parameters
                                                         or EMPTY_PARAMETERS, f"tools[{i}].function.parameters"))
                     for i, tool in enumerate(sj.tools)]
            if sj.no_call:  # tool_choice auto: "no call" is one more option, with {} (serving/toolchoice.py)
                specs.append((sj.no_call, None))
            t = calls_template(specs, max_calls=sj.max_calls, style=sj.style, meta={"step": "tool_call"})
        elif sj.source is not None:  # grounded in the request's text, as extract grounds (agentkit.constrain.ground)
            t, grounding = grounded_template(sj.schema, sj.source, lambda s: self.compile_one(
                s, sj.where, sj.strict, sj.style), grounded=sj.grounded)
        else:
            t = self.compile_one(sj.schema, sj.where, sj.strict, sj.style)
        with self._lock:
            self._templates[key] = t
            if grounding is not None:
                self._groundings[key] = grounding
            while len(self._templates) > self._cache_size:
                old, _ = self._templates.popitem(last=False)
                self._groundings.pop(old, None)
        return t

    def grounding(self, sj: SchemaJob) -> Grounding | None:
        """What grounding did to a grounded ``response_format`` schema (what settling reads, serving/settle.py),
        built again if its template left the cache since; None for any other schema."""
        if sj.kind != "response" or sj.source is None:
            return None
        with self._lock:
            g = self._groundings.get(sj.key)
        if g is None:
            self.template(sj)
            with self._lock:
                g = self._groundings.get(sj.key)
        return g

    def arguments(self, sj: SchemaJob, tool: str, parameters: dict[str, Any], where: str) -> Template:
        """One tool's arguments compiled (errors name ``where``), grounded in ``sj.arguments_source`` when the
        request grounds its calls (:mod:`agentkit.steps.arguments`, :func:`agentkit.constrain.ground.ground_arguments`),
        those that take what the request left held to ``sj.arguments_held``."""
        compile_ = lambda s: self.compile_one(s, where, sj.strict, sj.style)
        if sj.arguments_source is None:
            return compile_(parameters)
        held = ArgumentSources(sj.arguments_source, held=sj.arguments_held)
        return grounded_argument_template(held.parameters(tool, parameters), sj.arguments_source, compile_)

    def build_automata(self, template: Template, job: Job, limits: CompileLimits) -> None:
        """Build the template's token automaton now, outside the engine's lock, within ``limits`` and stopping
        when the request is cancelled (``agentkit.constrain.build_constraint``); the engine then finds it ready."""
        if not isinstance(self.engine, Constraining) or self.engine.vocab is None:
            return  # an engine without a vocabulary (a test double): nothing to build
        job.check()
        build_constraint(template, engine=self.engine, limits=limits, cancel=job.cancelled)

    def prompt_ids(self, plan: RequestPlan) -> list[int] | None:
        if not isinstance(self.engine, Tokenizing):
            return None
        try:
            with self.engine.lock:
                if plan.raw_prompt is not None:
                    return self.engine.encode_prompt(plan.raw_prompt, raw=True)
                return self.engine.encode_prompt(plan.messages)
        except UserError as e:
            raise user_error(e, "prompt" if plan.raw_prompt is not None else "messages") from None

    def is_cached(self, sj: SchemaJob) -> bool:
        with self._lock:
            return sj.key in self._templates

    def build(self, plan: RequestPlan, job: Job) -> Template | None:
        """Steps 1-2 (the preparation pool runs this when the schema is not cached yet). On the fast lane the
        build is cut to ``fast_lane_s`` and raises :class:`SliceExpired` past it (the scheduler moves it to the slow
        lane). A build that fails is remembered (:meth:`check_failed`)."""
        if plan.schema is None:
            return None
        job.check()
        full = self.limits.max_seconds
        cap = min(x for x in (full, job.time_left_s, self.fast_lane_s if job.lane == "fast" else None)
                  if x is not None)
        limits = self.limits if cap == full else dataclasses.replace(self.limits, max_seconds=max(0.001, cap))
        try:
            with budget(limits, cancel=job.cancelled):
                template = self.template(plan.schema)
                self.build_automata(template, job, limits)
        except CompileCancelled:
            job.check()  # the request went away: Aborted (its answer, 504 or 499, is already decided)
            raise
        except (UserError, APIError) as e:
            err = e if isinstance(e, APIError) else user_error(e, plan.schema.where)
            timed = err.extra.get("limit") == "max_seconds"
            if timed and job.lane == "fast" and cap == self.fast_lane_s and cap != full:
                raise SliceExpired() from None
            if err.status == 400 and (not timed or cap == full):  # not a time-out cut by the request's deadline
                self._remember(plan.schema, err, timed)
            raise err from None
        return template

    # -- remembered failures (by digest, whatever the mode or JSON style) -----------------------------------------
    def _remember(self, sj: SchemaJob, err: APIError, timed: bool) -> None:
        with self._lock:
            self._failed[sj.digest] = (err, time.monotonic() + self.failure_ttl_s if timed else float("inf"))
            while len(self._failed) > 256:
                self._failed.popitem(last=False)

    def check_failed(self, sj: SchemaJob) -> None:
        """Raise the error this schema's build gave before, if it is remembered (a time-out for ``failure_ttl_s``
        seconds, any other failure until 256 newer ones push it out)."""
        key = sj.digest
        with self._lock:
            hit = self._failed.get(key)
            if hit is not None and time.monotonic() >= hit[1]:
                del self._failed[key]
                hit = None
        if hit is not None:
            e = hit[0]
            raise APIError(e.status, f"{e.message} (remembered: this schema failed before)", e.type, e.code,
                           e.param, **e.extra)

    def tool_template(self, plan: RequestPlan, tool: str) -> Template:
        """The template of one call to ``tool`` among the plan's tools (its name pinned; the step runner's
        ``StepIO.template_for``)."""
        assert plan.schema is not None
        one = tuple(t for t in plan.schema.tools if t.function.name == tool)
        return self.template(dataclasses.replace(plan.schema, tools=one, no_call=None, max_calls=plan.max_calls))

    def text_prompt(self, plan: RequestPlan, step: ToolStep) -> list[int] | None:
        """Step 3 for the text reply of ``tool_choice`` auto (the step runner's ``StepIO.before_text``): its prompt
        checked, and ``step``'s text config with the max_tokens that fits."""
        ids = self.check_prompt(plan, text=True)
        step.text_config = plan.text_config
        return ids

    def check_prompt(self, plan: RequestPlan, text: bool = False) -> list[int] | None:
        """Step 3 (on the decoding worker, before the request's first forward): tokenize and check the prompt;
        a default max_tokens shrinks to what the context leaves. ``text``: the text decode of ``tool_choice``
        auto (``plan.text_messages``, ``plan.text_config``)."""
        if text:
            assert plan.text_messages is not None and plan.text_config is not None
            sub = dataclasses.replace(plan, messages=plan.text_messages, config=plan.text_config)
            ids = self.check_prompt(sub)
            plan.text_config = sub.config
            return ids
        ids = self.prompt_ids(plan)
        if ids is not None:
            n = fit_max_tokens(plan, len(ids), self.context)
            if n != plan.config.max_new_tokens:
                plan.config = dataclasses.replace(plan.config, max_new_tokens=n)
        return ids


def check_context(prompt_tokens: int, context: int, max_tokens: int, *, at_least: bool = False) -> None:
    """400 if the prompt and ``max_tokens`` do not fit the model's context (naming both numbers): the engine's own
    check (``agentkit.validate.check_prompt_length``), its ``ContextLengthError`` as the API's error."""
    try:
        validate.check_prompt_length(prompt_tokens, context, max_tokens, at_least=at_least)
    except validate.ContextLengthError as e:
        raise user_error(e) from None


def fit_max_tokens(plan: RequestPlan, prompt_tokens: int, context: int | None) -> int:
    """The request's max_tokens once the prompt's length is known (a default shrinks to what the context leaves;
    a given value that does not fit is a 400)."""
    want = plan.config.max_new_tokens
    if context is None:
        return want
    if not plan.max_tokens_given:
        want = min(want, context - prompt_tokens)
    check_context(prompt_tokens, context, max(1, want))
    return want
