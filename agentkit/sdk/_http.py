"""A remote generator over HTTP, speaking OpenAI chat completions plus agentkit's extension fields.

Request: ``POST {base}/v1/chat/completions`` with ``messages``, ``max_tokens``, ``temperature``, a
``response_format`` of type ``json_schema`` when the step has a template with a schema, every decoding setting the
server takes (``agentkit/settings.py``) at the top level or in ``"agentkit"`` (``{"mode": ..., "step": ...,
"json_style": ..., "greedy": ..., ...}``). Response: ``choices[0].message.content``, ``usage`` and
``agentkit_stats`` (the fields of ``DecodeStats``). Connection errors, 429 and 5xx are retried (bounded attempts,
exponential backoff, ``Retry-After`` honoured up to ``max_wait_s``).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Self

import httpx
from pydantic import BaseModel
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from .. import settings as table
from ..config import DecodeConfig
from ..constrain.nodes import Template
from ..engine.stats import DecodeStats, GenerationResult
from ..errors import ModelHTTPError, UserError

if TYPE_CHECKING:  # _generator builds an HTTPGenerator for a URL: importing it here would be a cycle
    from ._generator import OnDraft, OnText

_STATS_FIELDS = {f.name for f in fields(DecodeStats)}
log = logging.getLogger("agentkit.sdk.http")
_RETRY_CONNECT = (httpx.ConnectError, httpx.ConnectTimeout)


class _RetryableStatus(Exception):
    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


class HTTPGenerator:
    """A ``Generator`` backed by an OpenAI-compatible agentkit server (``agentkit serve``).

    ``max_attempts`` bounds tries per request (first try included); ``backoff_s`` is the first retry's wait,
    doubling after; a ``Retry-After`` header replaces the backoff (capped at ``max_wait_s``). ``transport`` is the
    httpx seam for tests (``httpx.MockTransport``); ``sleep`` the coroutine used to wait between attempts.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        model: str = "agentkit",
        timeout: float = 120.0,
        max_attempts: int = 4,
        backoff_s: float = 0.5,
        max_wait_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise UserError(f"base_url must start with http:// or https://, got {base_url!r}")
        if max_attempts < 1:
            raise UserError(f"max_attempts must be >= 1, got {max_attempts}")
        base = base_url.rstrip("/")
        self.base_url = base
        self.url = base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")
        self.api_key = api_key
        self.model = model
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s
        self._transport = transport
        self._sleep = sleep
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> httpx.AsyncClient:
        """One client per event loop (``run_sync`` starts a fresh loop each time; pools do not cross loops)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.AsyncClient(timeout=self.timeout, transport=self._transport, headers=headers)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def request_body(self, messages: list[dict[str, str]], config: DecodeConfig,
                     template: Template | None) -> dict[str, Any]:
        """The JSON body sent for one generation: every setting the server takes (``agentkit.settings``, its
        ``server`` field: the top level or the ``"agentkit"`` extension) and the template's JSON style; a setting
        it does not take, set to anything but its default, is a ``UserError`` (the server could not honour it)."""
        ext: dict[str, Any] = {}
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        for name, value in sendable(config).items():
            place, key = table.BY_NAME[name].server.split(".", 1)  # type: ignore[union-attr]
            (body if place == "body" else ext)[key] = value
        body["agentkit"] = ext
        if template is not None:
            schema = template.schema
            if isinstance(schema, type) and issubclass(schema, BaseModel):
                schema = schema.model_json_schema()
            if not isinstance(schema, dict):
                raise UserError("the HTTP backend can only send templates that carry a JSON Schema (template.schema)")
            step = template.meta.get("step")
            if step:
                ext["step"] = step
            if template.meta.get("style"):
                ext["json_style"] = template.meta["style"]  # the server compiles the schema in the same style
            if template.meta.get("open_objects"):
                ext["open_objects"] = True  # ... and as open
            ext["schema_prompt"] = False  # the messages carry the step's own prompt already
            if template.meta.get("grounded_in") is not None:  # extract's: grounded in its text, and settled there
                ext["grounded_in"] = template.meta["grounded_in"]
                if template.meta.get("grounded_option") is not None:
                    ext["grounded"] = template.meta["grounded_option"]
            name = re.sub(r"[^A-Za-z0-9_-]", "_", str(step or schema.get("title") or "output"))[:64]
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": name, "schema": schema,
                                                       "strict": not template.meta.get("open_objects", False)}}
        return body

    async def generate(self, messages: list[dict[str, str]], config: DecodeConfig, template: Template | None = None,
                       on_draft: OnDraft | None = None, on_text: OnText | None = None) -> GenerationResult:
        """One generation. With ``on_text`` (a run being streamed) the request is ``"stream": true`` and each
        content delta of the server's SSE is passed to it as it arrives."""
        body = self.request_body(messages, config, template)
        if on_text is None:
            return self._parse(await self._post(body), config, template)
        return await self._stream({**body, "stream": True}, config, template, on_text)

    async def _stream(self, body: dict[str, Any], config: DecodeConfig, template: Template | None,
                      on_text: OnText) -> GenerationResult:
        response = await self._post(body, stream=True)
        text, last = "", None
        try:
            async for line in response.aiter_lines():
                if not line.startswith("data: {"):
                    continue  # event names, blank lines, [DONE]
                data = json.loads(line[6:])
                if isinstance(data.get("error"), dict):  # an error after the stream began
                    raise ModelHTTPError(f"{self.url} failed mid-stream: {data['error'].get('message')}",
                                         200, line[6:2006])
                if not data.get("choices"):
                    continue  # extension events (canvas drafts)
                choice = data["choices"][0]
                delta = (choice.get("delta") or {}).get("content")
                if delta:
                    text += delta
                    on_text(delta)
                if choice.get("finish_reason"):
                    last = data
        except (httpx.HTTPError, json.JSONDecodeError) as e:
            raise ModelHTTPError(f"{self.url} stream failed: {type(e).__name__}: {e}") from e
        finally:
            await response.aclose()
        if last is None:
            raise ModelHTTPError(f"{self.url} ended its stream without a finish_reason", response.status_code)
        return self._result(text, last["choices"][0], last, config, template)

    async def _post(self, body: dict[str, Any], stream: bool = False) -> httpx.Response:
        """The response to ``body`` (``stream``: its head read, the body left to the caller), retried as the class
        says; a 4xx (or a 5xx after the last attempt) is a ``ModelHTTPError``."""
        client = self._http()
        retryable = retry_if_exception(lambda e: isinstance(e, (_RetryableStatus, *_RETRY_CONNECT)))
        retrying = AsyncRetrying(stop=stop_after_attempt(self.max_attempts), wait=self._wait, retry=retryable,
                                 sleep=self._sleep, reraise=True, before_sleep=self._log_retry)
        try:
            async for attempt in retrying:
                with attempt:
                    response = await client.send(client.build_request("POST", self.url, json=body), stream=stream)
                    if stream and response.status_code >= 400:
                        await response.aread()  # an error body is small: read it for the message
                    if response.status_code == 429 or response.status_code >= 500:
                        raise _RetryableStatus(response)
        except _RetryableStatus as e:
            r = e.response
            raise ModelHTTPError(f"{self.url} answered HTTP {r.status_code} after {self.max_attempts} attempt(s)",
                                 r.status_code, r.text) from None
        except httpx.HTTPError as e:
            raise ModelHTTPError(f"{self.url} failed: {type(e).__name__}: {e}") from e
        if response.status_code >= 400:
            raise ModelHTTPError(f"{self.url} answered HTTP {response.status_code}: {response.text[:500]}",
                                 response.status_code, response.text)
        return response

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        what = f"HTTP {exc.response.status_code}" if isinstance(exc, _RetryableStatus) else type(exc).__name__
        log.warning("%s: %s on attempt %d of %d; retrying", self.url, what, state.attempt_number, self.max_attempts)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, _RetryableStatus):
            after = retry_after_s(exc.response.headers.get("Retry-After"))
            if after is not None:
                return min(after, self.max_wait_s)
        return min(self.backoff_s * 2 ** (state.attempt_number - 1), self.max_wait_s)

    def _parse(self, response: httpx.Response, config: DecodeConfig, template: Template | None) -> GenerationResult:
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise ModelHTTPError(f"{self.url} sent a malformed completion ({type(e).__name__}: {e})",
                                 response.status_code, response.text[:2000]) from None
        return self._result(text, choice, data, config, template)

    def _result(self, text: str, choice: dict[str, Any], data: dict[str, Any], config: DecodeConfig,
                template: Template | None) -> GenerationResult:
        """A ``GenerationResult`` from the reply's text, its choice (the finish reason) and the body (or last chunk)
        carrying ``usage`` and ``agentkit_stats``."""
        usage = data.get("usage") or {}
        raw = data.get("agentkit_stats") or {}
        stats = DecodeStats(**{k: v for k, v in raw.items() if k in _STATS_FIELDS})
        stats.mode = raw.get("mode", config.mode)
        stats.prompt_tokens = raw.get("prompt_tokens", usage.get("prompt_tokens", 0))
        stats.output_tokens = raw.get("output_tokens", usage.get("completion_tokens", 0))
        if "slot_tokens" not in raw:
            stats.slot_tokens = stats.output_tokens - stats.pinned_tokens
        stats.finish_reason = raw.get("finish_reason", choice.get("finish_reason") or "stop")
        value = None
        if template is not None:
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = None
        return GenerationResult(text, list(raw.get("token_ids", [])), stats, value)

    def __repr__(self) -> str:
        return f"HTTPGenerator({self.base_url!r})"


def sendable(config: DecodeConfig) -> dict[str, Any]:
    """The config's settings that go over HTTP (setting name -> value; None, an empty ``stop`` and an empty
    ``logit_bias`` left out);
    ``UserError`` naming any other setting that is not at its default."""
    over = table.where("server")
    lost = [f"{s.name}={getattr(config, s.name)!r}" for s in table.DECODE
            if s not in over and getattr(config, s.name) != s.default]
    if lost:
        raise UserError(f"the HTTP backend cannot send DecodeConfig {', '.join(lost)} (the server does not take "
                        "them): leave them at their defaults, or run the agent on an in-process Engine")
    values = {s.name: getattr(config, s.name) for s in over if s.name not in table.TEMPLATE_SETTINGS}
    for s in over:  # a bias's token ids as JSON object keys
        if s.kind == "bias" and values.get(s.name):
            values[s.name] = {str(k): v for k, v in values[s.name].items()}
    return {k: v for k, v in values.items() if v is not None and v != [] and v != {}}


def retry_after_s(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date); None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
