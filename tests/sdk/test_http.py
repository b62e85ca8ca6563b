import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import httpx
import pytest

from agentkit.config import DecodeConfig
from agentkit.constrain.nodes import Lit, Template
from agentkit.errors import ModelHTTPError, UserError
from agentkit.sdk import Agent, HTTPGenerator, RoutingPolicy, tool
from agentkit.sdk._http import retry_after_s

MESSAGES = [{"role": "user", "content": "hi"}]


def completion(content, stats=None, usage=None):
    body = {"id": "c1", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage or {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
    if stats is not None:
        body["agentkit_stats"] = stats
    return body


def scripted(*responses):
    """A MockTransport answering each request with the next (status, headers, body) and recording requests."""
    it = iter(responses)
    requests = []

    def handler(request):
        requests.append(request)
        item = next(it)
        if isinstance(item, Exception):
            raise item
        status, headers, body = item
        return httpx.Response(status, headers=headers, json=body)

    return httpx.MockTransport(handler), requests


def generator(transport, waits, **kw):
    async def sleep(s):
        waits.append(s)

    return HTTPGenerator("http://test", transport=transport, sleep=sleep, **kw)


async def test_request_body_and_stats_parsing():
    stats = {"mode": "diffusion", "prompt_tokens": 9, "output_tokens": 12, "pinned_tokens": 8, "slot_tokens": 4,
             "encoder_forwards": 2, "decoder_forwards": 5, "prefill_ms": 3.5, "denoise_ms": 10.0, "commit_ms": 1.0,
             "latency_ms": 15.0, "forwards": 6, "tokens_per_forward": 2.0}
    transport, requests = scripted((200, {}, completion('{"a":1}', stats)))
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    template = Template(root=Lit('{"a":1}'), schema=schema, meta={"step": "extract"})
    gen = generator(transport, [], api_key="sk-test")
    result = await gen.generate(MESSAGES, DecodeConfig(mode="diffusion", max_new_tokens=64, stop=["\n"]), template)
    req = requests[0]
    assert (req.method, str(req.url)) == ("POST", "http://test/v1/chat/completions")
    assert req.headers["authorization"] == "Bearer sk-test"
    assert json.loads(req.content) == {
        "model": "agentkit", "messages": MESSAGES, "max_tokens": 64, "temperature": 0.0, "stop": ["\n"],
        "frequency_penalty": 0.0, "presence_penalty": 0.0,
        "agentkit": {"mode": "diffusion", "canvas_length": 32, "max_denoising_steps": 48, "sampler": "auto",
                     "greedy": "byte", "copy_bias": 2.0, "copy_from": "user", "copy_numbers": True,
                     "copy_text_bias": 8.0, "copy_first_digit": False, "stop_loops": 0, "step": "extract",
                     "schema_prompt": False},
        "response_format": {"type": "json_schema", "json_schema": {"name": "extract", "schema": schema,
                                                                   "strict": True}},
    }
    assert (result.text, result.value) == ('{"a":1}', {"a": 1})
    s = result.stats
    assert (s.mode, s.prompt_tokens, s.output_tokens, s.pinned_tokens, s.slot_tokens) == ("diffusion", 9, 12, 8, 4)
    assert (s.encoder_forwards, s.decoder_forwards, s.latency_ms, s.finish_reason) == (2, 5, 15.0, "stop")
    await gen.aclose()


async def test_usage_fills_stats_without_extension():
    transport, requests = scripted((200, {}, completion("hello")))
    result = await generator(transport, []).generate(MESSAGES, DecodeConfig())
    assert "response_format" not in json.loads(requests[0].content)
    assert (result.text, result.value, result.stats.mode) == ("hello", None, "ar")
    assert (result.stats.prompt_tokens, result.stats.output_tokens, result.stats.slot_tokens) == (3, 2, 2)


async def test_retries_429_and_5xx_honouring_retry_after():
    transport, requests = scripted((429, {"Retry-After": "2"}, {"error": "busy"}),
                                   (503, {}, {"error": "down"}),
                                   (500, {"Retry-After": "999"}, {}),
                                   (200, {}, completion("ok")))
    waits = []
    result = await generator(transport, waits, max_attempts=4, backoff_s=0.5, max_wait_s=30).generate(
        MESSAGES, DecodeConfig())
    assert result.text == "ok"
    assert len(requests) == 4
    assert waits == [2.0, 1.0, 30.0]  # Retry-After, backoff 0.5*2**1, Retry-After capped at max_wait_s


async def test_gives_up_after_max_attempts_with_typed_error():
    transport, requests = scripted(*[(502, {}, {"error": "bad gateway"})] * 3)
    waits = []
    with pytest.raises(ModelHTTPError) as exc:
        await generator(transport, waits, max_attempts=3).generate(MESSAGES, DecodeConfig())
    assert (exc.value.status_code, len(requests), waits) == (502, 3, [0.5, 1.0])
    assert str(exc.value) == "http://test/v1/chat/completions answered HTTP 502 after 3 attempt(s)"
    assert json.loads(exc.value.body) == {"error": "bad gateway"}


async def test_client_errors_are_not_retried():
    transport, requests = scripted((400, {}, {"error": "bad schema"}))
    with pytest.raises(ModelHTTPError) as exc:
        await generator(transport, []).generate(MESSAGES, DecodeConfig())
    assert (exc.value.status_code, len(requests)) == (400, 1)


async def test_connect_errors_are_retried():
    transport, requests = scripted(httpx.ConnectError("refused"), httpx.ConnectError("refused"),
                                   (200, {}, completion("ok")))
    waits = []
    result = await generator(transport, waits).generate(MESSAGES, DecodeConfig())
    assert (result.text, len(requests), waits) == ("ok", 3, [0.5, 1.0])


async def test_malformed_completion_is_typed_error():
    transport, _ = scripted((200, {}, {"choices": []}))
    with pytest.raises(ModelHTTPError, match="malformed completion"):
        await generator(transport, []).generate(MESSAGES, DecodeConfig())


def test_retry_after_parsing():
    assert retry_after_s("3") == 3.0
    assert retry_after_s(None) is None
    assert retry_after_s("soon") is None
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: no wait


def test_base_url_validation_and_v1_suffix():
    assert HTTPGenerator("http://h:8000/v1/").url == "http://h:8000/v1/chat/completions"
    assert HTTPGenerator("http://h:8000").url == "http://h:8000/v1/chat/completions"
    with pytest.raises(UserError):
        HTTPGenerator("h:8000")


class _Handler(BaseHTTPRequestHandler):
    script: ClassVar[list] = []
    bodies: ClassVar[list] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        status, content = type(self).script.pop(0)
        data = json.dumps(completion(content) if status == 200 else {"error": "x"}).encode()
        self.send_response(status)
        if status == 503:
            self.send_header("Retry-After", "0")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@tool
def add(a: int, b: int) -> int:
    return a + b


async def test_agent_over_a_real_loopback_server():
    _Handler.script = [(503, ""), (200, '{"tool":"add","arguments":{"a":2,"b":3}}'),
                       (200, '{"tool":"final_answer","arguments":{}}'), (200, "5")]
    _Handler.bodies = []
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        # a structured mode other than the reply's, so the mode each body carries is told apart
        agent = Agent(f"http://127.0.0.1:{server.server_port}", tools=[add],
                      routing=RoutingPolicy(tool_call="diffusion"))
        assert isinstance(agent.generator, HTTPGenerator)
        result = await agent.run("2+3?")
        await agent.generator.aclose()
    finally:
        server.shutdown()
        server.server_close()
    assert result.output == "5"
    assert result.messages[3] == {"role": "user", "content": "Tool add returned: 5"}
    assert [b["agentkit"]["mode"] for b in _Handler.bodies] == ["diffusion", "diffusion", "diffusion",
                                                                  RoutingPolicy().reply]
    rf = _Handler.bodies[1]["response_format"]["json_schema"]
    assert rf["name"] == "tool_call" and [v["properties"]["name"]["const"] for v in rf["schema"]["anyOf"]] == [
        "add", "final_answer"]
    assert "response_format" not in _Handler.bodies[3]


async def test_retries_are_logged_and_top_p_is_sent(caplog):
    transport, requests = scripted((503, {}, {"error": "down"}), (200, {}, completion("ok")))
    with caplog.at_level("WARNING", logger="agentkit.sdk.http"):
        await generator(transport, [], max_attempts=2).generate(MESSAGES, DecodeConfig(temperature=0.5, top_p=0.9))
    assert [r.getMessage() for r in caplog.records] == [
        "http://test/v1/chat/completions: HTTP 503 on attempt 1 of 2; retrying"]
    assert json.loads(requests[-1].content)["top_p"] == 0.9
