"""Issue 36's connection reproducers against a real uvicorn (loopback, the settings ``agentkit serve`` uses): slow
request heads are closed and do not hold the server, a body over the bound is a 413 before it is read, the key is
checked before the body, and a body that stalls is a 408."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

import pytest
from agentkit.serving.app import create_app
from agentkit.serving.config import ServerConfig
from agentkit.serving.connections import uvicorn_settings

pytestmark = pytest.mark.usefixtures("one_thread")
KEY = "sk-test"


@pytest.fixture(scope="module")
def server():
    import uvicorn

    from agentkit.engine import tiny_engine

    cfg = ServerConfig(api_key=KEY, header_timeout_s=0.5, body_timeout_s=0.5, max_body_bytes=10_000)
    app = create_app(tiny_engine(0), cfg)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", **uvicorn_settings(cfg)))
    th = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    th.start()
    deadline = time.monotonic() + 10
    while not srv.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield sock.getsockname()
    srv.should_exit = True
    th.join(5)
    sock.close()


def _connect(addr) -> socket.socket:
    s = socket.create_connection(addr, timeout=10)
    return s


def _response(s: socket.socket) -> tuple[int, dict, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    n = int(headers.get("content-length", 0))
    while len(body) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body


def _closed(s: socket.socket, limit_s: float = 10.0) -> bool:
    """Whether the server closed ``s`` (EOF) within ``limit_s`` (a generous bound: an outcome, not a speed)."""
    s.settimeout(limit_s)
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def _health(addr) -> int:
    with contextlib.closing(_connect(addr)) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return _response(s)[0]


def test_slow_headers_are_closed_and_do_not_hold_the_server(server):
    slow = [_connect(server) for _ in range(20)]
    for s in slow:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # and never the rest of the head
    assert _health(server) == 200  # while they are open
    assert all(_closed(s) for s in slow)
    for s in slow:
        s.close()
    assert _health(server) == 200


def test_a_silent_connection_is_closed(server):
    with contextlib.closing(_connect(server)) as s:
        assert _closed(s)


@pytest.mark.parametrize("auth,status", [(None, 401), (f"Bearer {KEY}", 413)])
def test_a_huge_body_is_refused_before_it_is_read(server, auth, status):
    with contextlib.closing(_connect(server)) as s:
        head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        head += (f"Authorization: {auth}\r\n" if auth else "") + "Content-Length: 300000000\r\n\r\n"
        s.sendall(head.encode())  # no body byte sent: the answer cannot depend on reading it
        code, _, body = _response(s)
    assert code == status
    err = json.loads(body)["error"]
    assert err["code"] == ("invalid_api_key" if status == 401 else "body_too_large")


def test_a_chunked_body_over_the_bound_is_413(server):
    with contextlib.closing(_connect(server)) as s:
        s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                  "Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n".encode())
        for _ in range(3):
            s.sendall(b"1000\r\n" + b" " * 0x1000 + b"\r\n")  # 12 KiB in all, over 10,000 bytes
        code, _, body = _response(s)
    assert code == 413 and json.loads(body)["error"]["code"] == "body_too_large"


def test_a_stalled_body_is_408(server):
    with contextlib.closing(_connect(server)) as s:
        s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"messages\"".encode())
        code, _, body = _response(s)
    assert code == 408 and json.loads(body)["error"]["code"] == "body_timeout"


def test_a_normal_request_still_works(server):
    body = json.dumps({"model": "agentkit", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode()
    with contextlib.closing(_connect(server)) as s:
        s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        code, _, out = _response(s)
    assert code == 200 and json.loads(out)["choices"][0]["message"]["role"] == "assistant"
