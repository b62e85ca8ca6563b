"""``"stream": true``: SSE content deltas as tokens are committed.

The status line is sent only once the request has produced its first event (a committed token, a canvas draft,
or its end): everything that can go wrong before that -- a prompt too long, a schema that does not compile or
cannot fit ``max_tokens``, a timeout while queued -- is an ordinary 4xx/5xx response, not an error inside a
200 stream. After that, an error is reported in-stream (OpenAI's error object as a ``data:`` event).

Content: with free text or a ``response_format`` schema, one delta per committed run of tokens (AR: a token and
the pinned run after it; diffusion: a block; verify: the verified prefix). A forced tool call streams the same
way as OpenAI's: a first ``tool_calls`` delta with the id and the name once the name is committed, then argument
fragments (the raw JSON text of the arguments as it is committed; they concatenate to the call's ``arguments``).
With ``tool_choice: "auto"`` the choice decode (``serving/toolchoice.py``) is not streamed: a call comes as one
``tool_calls`` delta at the end, a text reply streams as content deltas from its own decode. Canvas drafts
(diffusion, verify), when the request asks for them (``"agentkit": {"canvas": true}``), are
``event: agentkit.canvas`` chunks with ``choices: []`` (the choice's ``index`` inside).

With ``n`` > 1 every choice is submitted at once (they batch like separate requests); the status line waits for
each choice's first event, their chunks then interleave as they are committed (each with its choice ``index``, as
OpenAI's), and a last chunk with ``choices: []`` carries the request's ``usage``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse

from agentkit.toolcall import CALL_SEP, parse_calls, reply_calls

from .outcome import job_stats, response_parts, total_usage
from .plan import RequestPlan
from .scheduler import ClientDisconnected, Job
from .sse import DONE, Chunks, TextDeltas, event

Item = tuple[str, Any]  # ("text", str) | ("canvas", dict)
# what a stream produces, whatever API frames it: (None, a chat.completion.chunk), ("agentkit.canvas", a chunk
# without choices) or ("error", an error body); the chat route writes them as SSE events (chat_events),
# /v1/completions and /v1/responses translate them (serving/completions.py, serving/responses.py)
Frame = tuple[str | None, dict[str, Any]]
Render = Callable[[AsyncIterator[Frame]], AsyncIterator[str]]


async def chat_events(frames: AsyncIterator[Frame]) -> AsyncIterator[str]:
    """Chat completions' SSE: each frame as an event (an error as a plain ``data:`` event), then ``[DONE]``."""
    async with contextlib.aclosing(frames) as fs:  # type: ignore[type-var]
        async for name, data in fs:
            yield event(data, None if name == "error" else name)
    yield DONE
_CALL_HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"arguments"\s*:\s*')


async def open_stream(svc: Any, plans: list[RequestPlan], request: Request, t0: float, *, model: str,
                      render: Render = chat_events) -> StreamingResponse:
    """Submit ``plans`` (the choices of one request, ``n`` of them) and answer with their SSE stream once each has
    its first event (see the module docstring); ``render`` writes the frames as the API's events. With several
    choices their chunks interleave as they are committed, each with its ``index``, and a last chunk without
    choices carries the request's usage (the prompt counted once, as without ``stream``)."""
    chunks = Chunks("chatcmpl-" + uuid.uuid4().hex, int(time.time()), model)
    streams = [_Stream(svc, p, chunks.for_choice(i), t0, primary=i == 0, own_usage=len(plans) == 1)
               for i, p in enumerate(plans)]
    firsts: list[Item | None] = []
    try:
        for s in streams:
            s.submit()
        for s in streams:
            firsts.append(await s.first(request))
    except BaseException as e:
        for s in streams:
            s.abandon()
        if isinstance(e, asyncio.CancelledError):
            raise
        raise svc.error(e, plans[0].mode) from None
    frames = streams[0].frames(firsts[0]) if len(streams) == 1 else _merged(svc, streams, firsts, chunks)
    return StreamingResponse(render(frames), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _merged(svc: Any, streams: list[_Stream], firsts: list[Item | None],
                  chunks: Chunks) -> AsyncIterator[Frame]:
    """The frames of several choices as they come; an error in one ends the stream (the others are cancelled)."""
    q: asyncio.Queue[Frame | BaseException | None] = asyncio.Queue()

    async def pump(s: _Stream, first: Item | None) -> None:
        try:
            async with contextlib.aclosing(s.frames(first)) as fs:  # type: ignore[type-var]
                async for f in fs:
                    q.put_nowait(f)
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # noqa: BLE001 -- re-raised by the reader
            q.put_nowait(e)
        q.put_nowait(None)

    tasks = [asyncio.ensure_future(pump(s, f)) for s, f in zip(streams, firsts)]
    try:
        left = len(tasks)
        while left:
            f = await q.get()
            if f is None:
                left -= 1
                continue
            if isinstance(f, BaseException):
                raise f
            yield f
            if f[0] == "error":
                return
        yield None, chunks.chunk(None, usage=total_usage([s.outcome() for s in streams]))
    except asyncio.CancelledError:
        svc.metrics.reject("disconnect")
        raise
    finally:
        for s in streams:
            s.quiet = True  # a choice cancelled here was not cut by its client
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _quiet(f: asyncio.Future) -> None:
    """Mark the waiter's outcome as seen (the stream reports it when it still listens; a cut stream does not)."""
    if not f.cancelled():
        f.exception()


class _Stream:
    """One choice's stream: its job, its committed text as deltas, its frames."""

    def __init__(self, svc: Any, plan: RequestPlan, chunks: Chunks, t0: float, *, primary: bool = True,
                 own_usage: bool = True) -> None:
        self.svc, self.plan, self.chunks, self.t0 = svc, plan, chunks, t0
        self.primary = primary  # records the request's metrics (one per request, whatever its n)
        self.own_usage = own_usage  # the final chunk carries usage (n 1; with more, the merged stream's last)
        self.quiet = False  # cancelled by the merged stream, not by its client: no disconnect metric
        self.loop = asyncio.get_running_loop()
        self.q: asyncio.Queue[Item] = asyncio.Queue()
        self.deltas = TextDeltas(svc.decode_text, plan.stop)
        self.steps = 0
        self._job: Job | None = None
        self._waiter: asyncio.Future | None = None
        self.first_content: float | None = None
        self.call_text = ""  # a forced call's text so far
        self.call_id: str | None = None  # set once its first delta (id, name) is sent
        self.args_sent = 0  # characters of the first call's arguments sent
        self.calls: list[tuple[str, Any]] = []  # the calls sent whole (the first once its line is complete)
        self.later_sent = 0  # complete lines after the first that were looked at

    @property
    def job(self) -> Job:
        assert self._job is not None, "submit() first"
        return self._job

    @property
    def waiter(self) -> asyncio.Future:
        assert self._waiter is not None, "submit() first"
        return self._waiter

    def outcome(self) -> Any:
        return self.waiter.result()

    # -- the decoding thread's callbacks ------------------------------------------------------------------------
    def _put(self, item: Item) -> None:
        self.loop.call_soon_threadsafe(self.q.put_nowait, item)

    def _on_tokens(self, ids: list[int]) -> None:
        d = self.deltas.feed(ids)
        if d:
            self._put(("text", d))

    def _on_draft(self, tokens: list[int], frozen: list[bool]) -> None:
        self.steps += 1
        self._put(("canvas", {"step": self.steps, "draft": self.svc.decode_text(tokens), "frozen": sum(frozen),
                              "length": len(frozen)}))

    # -- submit, first event, abandon ---------------------------------------------------------------------------
    def submit(self) -> None:
        want_canvas = self.plan.canvas and self.plan.mode != "ar"
        self._job = self.svc.submit(self.plan, self._on_tokens, self._on_draft if want_canvas else None)
        self._waiter = asyncio.ensure_future(self.svc.scheduler.wait(self._job, self.svc.cfg.request_timeout_s))
        self._waiter.add_done_callback(_quiet)  # a cut stream never reads the waiter: no "never retrieved" log

    async def first(self, request: Request) -> Item | None:
        """The choice's first event, None if it ended without one; raises what it failed with (4xx before the
        status line is sent), or :class:`ClientDisconnected`."""
        while True:
            getter = asyncio.ensure_future(self.q.get())
            done, _ = await asyncio.wait({self.waiter, getter}, timeout=0.1, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                return getter.result()
            getter.cancel()
            if self.waiter in done:
                self.waiter.result()  # raises the job's error
                return None
            if await request.is_disconnected():
                raise ClientDisconnected("client disconnected")

    def abandon(self) -> None:
        """Stop the choice's job (its stream is not sent)."""
        if self._waiter is not None and not self._waiter.done():
            self._waiter.cancel()
        if self._job is not None and not self._job.future.done():
            self.svc.scheduler.cancel(self._job)

    def _call(self, text: str, final: bool = False) -> list[Frame]:
        """The ``tool_calls`` deltas for more of a forced reply's text: the first call's as it is committed (its id
        and name once the name is, then argument fragments), each later call (parallel calls, one per line) whole
        once its line is complete, unless it repeats an earlier one (:func:`agentkit.toolcall.reply_calls`)."""
        self.call_text += text
        lines = self.call_text.split(CALL_SEP)
        out = [f] if (f := self._first_call(lines[0], final or len(lines) > 1)) else []
        done = lines[1:] if final else lines[1:-1]
        for line in done[self.later_sent:]:
            self.later_sent += 1
            call = parse_calls(line)
            if call and reply_calls(self.plan.step, self.calls + call)[len(self.calls):]:
                self.calls += call
                tc = {"index": len(self.calls) - 1, "id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                      "function": {"name": call[0][0], "arguments": json.dumps(call[0][1])}}
                out.append((None, self.chunks.chunk({"tool_calls": [tc]})))
        return out

    def _first_call(self, line: str, complete: bool) -> Frame | None:
        m = _CALL_HEAD.match(line)
        if m is None:
            return None
        args = line[m.end():]
        args = args.rstrip()[:-1] if complete else args.rstrip().rstrip("}")  # the call's own closing brace
        delta: dict[str, Any] = {"index": 0, "function": {"arguments": args[self.args_sent:]}}
        self.args_sent = max(self.args_sent, len(args))
        if complete and not self.calls:
            self.calls = parse_calls(line)[:1]
        if self.call_id is None:
            self.call_id = "call_" + uuid.uuid4().hex[:24]
            delta.update(id=self.call_id, type="function")
            delta["function"]["name"] = json.loads(m.group(1))
        elif not delta["function"]["arguments"]:
            return None
        return None, self.chunks.chunk({"tool_calls": [delta]})

    def _text(self, text: str, final: bool = False) -> list[Frame]:
        """The frames for content ``text`` (none when it is held back or suppressed)."""
        if self.plan.tool_mode == "forced":
            return self._call(text, final)
        if not text:
            return []
        if self.first_content is None:
            self.first_content = time.perf_counter()
            if self.primary:
                    self.svc.metrics.first_token.labels(self.plan.mode).observe(self.first_content - self.t0)
        return [(None, self.chunks.chunk({"content": text}))]

    def _item(self, item: Item) -> list[Frame]:
        kind, value = item
        if kind == "canvas":
            return [("agentkit.canvas", self.chunks.chunk(None, agentkit_canvas={"index": self.chunks.index, **value}))]
        return self._text(value)

    async def _items(self) -> AsyncIterator[Item]:
        while not self.waiter.done() or not self.q.empty():
            getter = asyncio.ensure_future(self.q.get())
            done, _ = await asyncio.wait({self.waiter, getter}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield getter.result()
            else:
                getter.cancel()

    def _final(self, out: Any) -> list[Frame]:
        res = out.result
        message, finish = response_parts(res.text, res.stats.finish_reason, out.calls)
        events = []
        if self.call_id is not None:  # a forced reply already streaming: its last fragments and calls
            events += self._call(self.deltas.finish(res.text), final=True)
        elif message.get("tool_calls"):
            events += [(None, self.chunks.chunk({"tool_calls": [{"index": i, **tc}]}))
                       for i, tc in enumerate(message["tool_calls"])]
        else:
            events += self._text(self.deltas.finish(res.text), final=True)
        logprobs = {"content": out.logprobs} if out.logprobs is not None else None
        extra = {"usage": out.usage()} if self.own_usage else {}
        events.append((None, self.chunks.chunk({}, finish, logprobs, **extra,
                                               agentkit_stats=job_stats(out, self.job))))
        return events

    async def frames(self, first: Item | None) -> AsyncIterator[Frame]:
        status = 200
        try:
            yield None, self.chunks.chunk({"role": "assistant", "content": ""})
            for ev in self._item(first) if first is not None else []:
                yield ev
            async for item in self._items():
                for ev in self._item(item):
                    yield ev
            try:
                out = self.waiter.result()
            except BaseException as e:  # noqa: BLE001 -- reported in-stream: the status line is sent
                err = self.svc.error(e, self.plan.mode)
                status = err.status
                yield "error", err.body()
                return
            for ev in self._final(out):
                yield ev
        except asyncio.CancelledError:
            status = 499
            if not self.quiet:
                self.svc.metrics.reject("disconnect")
            raise
        finally:
            self.abandon()
            if self.primary:
                self.svc.metrics.request(self.plan.mode, status, time.perf_counter() - self.t0)
