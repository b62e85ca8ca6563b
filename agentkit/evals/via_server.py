"""An extraction item sent to agentkit's OpenAI-compatible server: as a user would send it, the text as the user
message and the item's schema as ``response_format`` (``agentkit eval extract``'s ``+server`` rows), or by ``extract``
with the server as its model (the SDK's HTTP backend, ``+http`` rows).

The app (:func:`agentkit.serving.app.create_app`) runs in this process over the same engine as the other rows, and
is called through starlette's test client or httpx's ASGI transport, so a row measures the server's request path
(planning, the schema prompt, the grounded template, decoding, settling) with no socket in between. Needs the
``server`` extra.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import UserError

# what a +server row sends in the request's "agentkit" extension for a row setting (agentkit.evals.extract_run)
EXTENSION = {"nocopy": {"copy_bias": 0.0}, "nonum": {"copy_numbers": False}, "nofirst": {"copy_first_digit": False},
             "ungrounded": {"grounded": False}, "compact": {"json_style": "compact"},
             "spaced": {"json_style": "spaced"}}
REFUSED = ("copyuser", "retry", "drafter")  # extract's options that have no request field (parse_row refuses them)


class ServerRows:
    """One in-process app over an engine: items sent to it as requests (:meth:`run`), and the SDK's HTTP backend
    on it (``http_model``)."""

    def __init__(self, engine: Any) -> None:
        try:
            from fastapi.testclient import TestClient

            from ..serving.app import create_app
        except ImportError as e:
            raise UserError(f"a +server row needs the server extra (pip install 'agentkit[server]'): {e}") from None
        self.app = create_app(engine)
        self.client = TestClient(self.app)
        self.model = self.client.get("/v1/models").json()["data"][0]["id"]  # the name it serves
        self.http_model = _http_model(self.app)  # what extract(..., model="http://...") talks to

    def run(self, schema: dict[str, Any], text: str, mode: str, opts: set[str]) -> dict[str, Any]:
        """The item's response (``opts``: row settings, those of :data:`EXTENSION` sent; the others act in this
        process, as module switches): output (parsed JSON, None where none came back), error, output tokens and
        forwards (the response's ``agentkit_stats``)."""
        ext: dict[str, Any] = {"mode": mode}
        for o in opts:
            ext.update(EXTENSION.get(o, {}))
        body = {"model": self.model, "messages": [{"role": "user", "content": text}], "temperature": 0,
                "response_format": {"type": "json_schema", "json_schema": {"name": "extract", "schema": schema}},
                "agentkit": ext}
        r = self.client.post("/v1/chat/completions", json=body)
        if r.status_code != 200:
            return {"output": None, "error": f"HTTP {r.status_code}: {r.text[:300]}", "output_tokens": 0,
                    "forwards": 0}
        data = r.json()
        content, stats = data["choices"][0]["message"]["content"] or "", data.get("agentkit_stats") or {}
        try:
            output, error = json.loads(content), ""
        except ValueError:
            output, error = None, f"not JSON: {content[:200]!r}"
        return {"output": output, "error": error, "output_tokens": int(stats.get("output_tokens", 0)),
                "forwards": int(stats.get("forwards", 0))}


def _http_model(app: Any) -> Any:
    """The SDK's HTTP backend on ``app`` (httpx's ASGI transport: no socket)."""
    import httpx

    from ..sdk._http import HTTPGenerator

    return HTTPGenerator("http://agentkit", transport=httpx.ASGITransport(app=app))
