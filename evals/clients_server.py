"""The clients people use, unchanged, against ``agentkit serve`` on the default model (SmolLM2-135M).

Each check calls the client's own API the way its docs show and records whether it worked (no error, and a result
of the asked type: a tool call where one was required, a validated model for a structured output, streamed pieces
that add up to the final text), its wall time, and a short note. What the model writes is not scored here (task
success is the evals' business); "works" means the client got a well-formed answer it could use.

- openai: chat (plain, streamed, a required tool call, ``parallel_tool_calls`` true and false), completions (plain
  and streamed), responses (plain, streamed, a required tool call, ``responses.parse`` with a pydantic model);
- pydantic-ai: ``OpenAIChatModel`` and ``OpenAIResponsesModel``: a function tool the model is made to call, an
  ``output_type``, ``run_stream``;
- instructor: ``Mode.TOOLS``, ``Mode.JSON_SCHEMA``, ``create_partial``;
- an open pydantic schema (no ``additionalProperties``, as instructor sends it) against the same schema closed:
  model forwards of each (the server generates open objects closed unless asked).

    python evals/clients_server.py --out evals/results/serving/clients_server.json

The app runs in this process on a loopback port (uvicorn in a thread); the JSON is rewritten after each check.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel


class City(BaseModel):
    name: str
    country: str
    population_millions: float


TEXT = "Paris is the capital of France and has about 2.1 million inhabitants."
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def openai_checks(url: str) -> dict[str, Callable[[], str]]:
    import openai

    c = openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=300)
    chat_tool = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                                   "parameters": WEATHER}}]
    resp_tool = [{"type": "function", "name": "get_weather", "description": "Weather for a city",
                  "parameters": WEATHER}]

    def chat() -> str:
        r = c.chat.completions.create(model="agentkit", messages=QUESTION, max_tokens=24)
        assert r.choices[0].message.content
        return r.choices[0].message.content[:80]

    def chat_stream() -> str:
        parts = [ch.choices[0].delta.content for ch in c.chat.completions.create(
            model="agentkit", messages=QUESTION, max_tokens=24, stream=True) if ch.choices and ch.choices[0].delta.content]
        assert len(parts) >= 2
        return f"{len(parts)} deltas"

    def chat_stream_n() -> str:
        texts: dict[int, str] = {}
        usage = None
        for ch in c.chat.completions.create(model="agentkit", messages=QUESTION, max_tokens=16, stream=True, n=2,
                                            temperature=1.0, seed=1):
            for choice in ch.choices:
                texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            usage = getattr(ch, "usage", None) or usage
        assert sorted(texts) == [0, 1] and all(texts.values()) and usage is not None
        return f"2 choices: {texts[0][:30]!r} / {texts[1][:30]!r}; usage {usage.completion_tokens} tokens"

    def chat_tools(parallel: bool | None = None) -> Callable[[], str]:
        def run() -> str:
            kw = {} if parallel is None else {"parallel_tool_calls": parallel}
            r = c.chat.completions.create(model="agentkit", messages=QUESTION, tools=chat_tool, tool_choice="required",
                                          max_tokens=64, **kw)
            calls = r.choices[0].message.tool_calls
            assert calls and all(json.loads(t.function.arguments) for t in calls)
            return "; ".join(f"{t.function.name}({t.function.arguments})" for t in calls)
        return run

    def completions() -> str:
        r = c.completions.create(model="agentkit", prompt="The capital of France is", max_tokens=8)
        assert r.choices[0].text
        return repr(r.choices[0].text)

    def completions_stream() -> str:
        parts = [ch.choices[0].text for ch in c.completions.create(model="agentkit", prompt="The capital of France is",
                                                                    max_tokens=8, stream=True) if ch.choices]
        assert "".join(parts)
        return f"{len(parts)} chunks"

    def responses() -> str:
        r = c.responses.create(model="agentkit", input="Where is the Eiffel tower?", max_output_tokens=32)
        assert r.output_text
        return r.output_text[:80]

    def responses_stream() -> str:
        events = list(c.responses.create(model="agentkit", input="Where is the Eiffel tower?", max_output_tokens=32,
                                         stream=True))
        deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert events[-1].type in ("response.completed", "response.incomplete")
        assert deltas == events[-1].response.output_text
        return f"{len(events)} events, last {events[-1].type}"

    def responses_tools() -> str:
        r = c.responses.create(model="agentkit", input="What is the weather in Paris?", tools=resp_tool,
                               tool_choice="required", max_output_tokens=64)
        assert r.output[0].type == "function_call"
        return f"{r.output[0].name}({r.output[0].arguments})"

    def responses_parse() -> str:
        r = c.responses.parse(model="agentkit", input=TEXT, text_format=City, max_output_tokens=96)
        assert isinstance(r.output_parsed, City)
        return repr(r.output_parsed)

    return {"openai chat": chat, "openai chat stream": chat_stream, "openai chat stream n=2": chat_stream_n,
            "openai chat tools required": chat_tools(),
            "openai chat parallel_tool_calls true": chat_tools(True),
            "openai chat parallel_tool_calls false": chat_tools(False), "openai completions": completions,
            "openai completions stream": completions_stream, "openai responses": responses,
            "openai responses stream": responses_stream, "openai responses tools required": responses_tools,
            "openai responses.parse": responses_parse}


def pydantic_ai_checks(url: str) -> dict[str, Callable[[], str]]:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    out: dict[str, Callable[[], str]] = {}
    for label, cls in (("OpenAIChatModel", OpenAIChatModel), ("OpenAIResponsesModel", OpenAIResponsesModel)):
        model = cls("agentkit", provider=OpenAIProvider(base_url=url, api_key="none"))

        def tool(model: Any = model) -> str:
            calls: list[str] = []
            agent = Agent(model, model_settings={"max_tokens": 96})

            @agent.tool_plain
            def get_weather(city: str) -> str:
                """Weather for a city."""
                calls.append(city)
                return f"Sunny in {city}."

            r = agent.run_sync("Use get_weather to tell me the weather in Paris.")
            return f"tool called {len(calls)}x {calls[:3]}; output {str(r.output)[:60]!r}"

        def output(model: Any = model) -> str:
            r = Agent(model, output_type=City, model_settings={"max_tokens": 160}).run_sync(TEXT)
            assert isinstance(r.output, City)
            return repr(r.output)

        def stream(model: Any = model) -> str:
            async def go() -> tuple[list[str], str]:
                async with Agent(model, model_settings={"max_tokens": 32}).run_stream("Say hello.") as run:
                    parts = [t async for t in run.stream_text(delta=True, debounce_by=None)]
                    return parts, await run.get_output()
            parts, text = asyncio.run(go())
            assert parts and "".join(parts) == text
            return f"{len(parts)} deltas"

        out |= {f"pydantic-ai {label} tool": tool, f"pydantic-ai {label} output_type": output,
                f"pydantic-ai {label} run_stream": stream}
    return out


def instructor_checks(url: str) -> dict[str, Callable[[], str]]:
    import instructor
    import openai

    def make(mode: Any) -> Any:
        return instructor.from_openai(openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=300),
                                      mode=mode)

    msgs = [{"role": "user", "content": TEXT}]

    def run(mode: Any) -> Callable[[], str]:
        def go() -> str:
            city = make(mode).chat.completions.create(model="agentkit", response_model=City, max_tokens=160,
                                                      max_retries=0, messages=msgs)
            assert isinstance(city, City)
            return repr(city)
        return go

    def partial() -> str:
        parts = list(make(instructor.Mode.TOOLS).chat.completions.create_partial(
            model="agentkit", response_model=City, max_tokens=160, max_retries=0, messages=msgs))
        assert parts and isinstance(parts[-1], BaseModel)
        return f"{len(parts)} partials, last {parts[-1]!r}"

    return {"instructor TOOLS": run(instructor.Mode.TOOLS), "instructor JSON_SCHEMA": run(instructor.Mode.JSON_SCHEMA),
            "instructor create_partial": partial}


def open_vs_closed(url: str) -> dict[str, Any]:
    import httpx

    schema = City.model_json_schema()  # pydantic's default: no additionalProperties (open)
    closed = {**schema, "additionalProperties": False}
    out = {}
    for label, s in (("open", schema), ("closed", closed)):
        body = {"model": "agentkit", "messages": [{"role": "user", "content": TEXT}], "max_tokens": 256,
                "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": s}}}
        r = httpx.post(url + "/chat/completions", json=body, timeout=300).json()
        st = r["agentkit_stats"]
        out[label] = {"forwards": st["forwards"], "output_tokens": st["output_tokens"],
                      "content": r["choices"][0]["message"]["content"]}
    out["forwards_ratio_open_vs_closed"] = round(out["open"]["forwards"] / max(1, out["closed"]["forwards"]), 3)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", default="", help="run only the checks whose name contains this text")
    a = ap.parse_args(argv)

    from agentkit.serving.app import create_app
    from ttfb_server import _serve  # evals/ttfb_server.py: the app on a loopback port, uvicorn in a thread

    from agentkit.engine.engine import Engine

    base, stop = _serve(create_app(Engine()))
    url = base + "/v1"
    cmd = "python " + " ".join(["evals/clients_server.py", *(argv if argv is not None else sys.argv[1:])])
    result: dict[str, Any] = {"command": cmd, "model": "SmolLM2-135M-Instruct (embedded)", "checks": {}}
    try:
        for group in (openai_checks, pydantic_ai_checks, instructor_checks):
            for name, fn in group(url).items():
                if a.only not in name:
                    continue
                t0 = time.perf_counter()
                try:
                    note, ok = fn(), True
                except Exception as e:  # noqa: BLE001 -- recorded: the check failed
                    note, ok = f"{type(e).__name__}: {e}"[:300], False
                    traceback.print_exc()
                result["checks"][name] = {"ok": ok, "ms": round(1000 * (time.perf_counter() - t0)), "note": note}
                print(f"{'ok ' if ok else 'FAIL'} {name}: {note}", flush=True)
                a.out.parent.mkdir(parents=True, exist_ok=True)
                a.out.write_text(json.dumps(result, indent=1))
        if not a.only:
            result["open_vs_closed"] = open_vs_closed(url)
        ok = sum(c["ok"] for c in result["checks"].values())
        result["summary"] = {"checks": len(result["checks"]), "ok": ok}
        a.out.write_text(json.dumps(result, indent=1))
        print(json.dumps(result["summary"]), json.dumps(result.get("open_vs_closed"))[:300])
    finally:
        stop()


if __name__ == "__main__":
    main()
