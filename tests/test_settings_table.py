"""Every decoding setting is declared once (agentkit/settings.py): each place that declares settings is derived from
the table or checked here against it, so a setting declared anywhere without the table knowing it fails a test."""

import dataclasses
import inspect
import typing

import pytest

from agentkit import settings as table
from agentkit.config import DecodeConfig, EngineConfig
from agentkit.errors import InvalidRequestError, UserError

# what each declaring place holds besides decoding settings (a new field must join the table or one of these)
NOT_SETTINGS = {
    "AgentkitExt": {"canvas", "step", "schema_prompt", "grounded", "grounded_in"},  # how messages and templates are built
    "ChatRequest": {"model", "messages", "tools", "tool_choice", "response_format", "max_completion_tokens", "stream",
                    "n", "logprobs", "top_logprobs", "agentkit", "user", "metadata", "store", "service_tier",
                    "prompt_cache_key", "safety_identifier", "stream_options"},
    "EvalContext": {"free_max_new_tokens", "prompt", "on_draft", "frames"},
    "cli generate": {"prompt", "model", "schema", "no_adapter", "as_json", "backend", "threads"},
    "RayServeConfig": {"replicas", "autoscale", "address", "host", "port", "engine_factory", "num_cpus_per_replica",
                       "graceful_shutdown_timeout_s", "health_check_period_s", "health_check_timeout_s",
                       "runtime_env", "local_num_cpus", "app_name", "extra"},
}
# defaults a place sets on purpose apart from the table's (with why)
OWN_DEFAULTS = {
    ("EvalContext", "max_new_tokens"): 512,  # constrained eval modes: the template ends the output first
    ("EvalContext", "seed"): 0,  # evals are seeded
    ("cli generate", "max_new_tokens"): 128,  # a short reply on the command line
}
# the server's parallel_tool_calls is OpenAI's default (true) where the SDK's is off (agentkit/settings.py says why);
# ChatRequest's field is None (not sent) -> true in serving/plan.py max_calls


def _default(f: dataclasses.Field):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _check_place(place: str, declared: dict[str, object], path: str) -> None:
    """``declared`` (name -> default) holds the table's settings for ``path`` and nothing else unknown."""
    want = {s.name for s in table.where(path)}
    unknown = set(declared) - want - NOT_SETTINGS[place]
    assert not unknown, f"{place} declares {sorted(unknown)}: add them to agentkit/settings.py (or NOT_SETTINGS)"
    assert want <= set(declared), f"{place} lacks {sorted(want - set(declared))} that the table says apply there"
    for name in want:
        expect = OWN_DEFAULTS.get((place, name), table.BY_NAME[name].default)
        assert declared[name] == expect, (place, name, declared[name], expect)


def test_decode_config_is_the_tables_engine_settings():
    fields = {f.name: _default(f) for f in dataclasses.fields(DecodeConfig)}
    assert fields == {s.name: s.default for s in table.DECODE}
    assert all(s.server or s.sdk or "engine" in s.applies for s in table.SETTINGS)
    assert [s.name for s in table.SETTINGS if "engine" not in s.applies] == list(table.TEMPLATE_SETTINGS)


@pytest.mark.parametrize("s", table.DECODE, ids=lambda s: s.name)
def test_decode_config_checks_what_the_table_says(s):
    DecodeConfig(**{s.name: s.default})
    bad: list[object] = []
    if s.kind == "str":
        for c in s.choices:
            DecodeConfig(**{s.name: c})
        bad += ["nope", None]
    elif s.kind in ("int", "float"):
        if s.low > -table.INF:
            DecodeConfig(**{s.name: s.low if not s.low_open else s.low + 0.5})
            bad.append(s.low - 1 if not s.low_open else s.low)
        if s.high < table.INF:
            DecodeConfig(**{s.name: s.high})
            bad.append(s.high + 1)
        bad += ["1", True] + ([] if s.optional else [None]) + ([1.5] if s.kind == "int" else [float("nan")])
    elif s.kind == "bool":
        bad += [1, "yes", None]
    elif s.kind == "list":
        bad += ["x", [""], [1]]
    elif s.kind == "bias":
        assert DecodeConfig(**{s.name: {"7": s.low, 3: s.high}}).logit_bias == {7: s.low, 3: s.high}
        bad += [[1], {"x": 1}, {-1: 1}, {"1.5": 1}, {1: s.high + 1}, {1: s.low - 1}, {1: "2"}, {1: True}]
    if s.optional:
        DecodeConfig(**{s.name: None})
    for v in bad:
        with pytest.raises(InvalidRequestError, match=s.name):
            DecodeConfig(**{s.name: v})


def test_styles_are_the_compilers():
    from agentkit.constrain import canonical

    assert table.STYLES == tuple(canonical.STYLES) and table.DEFAULT_STYLE == canonical.DEFAULT_STYLE


def test_sdk_model_settings_are_the_tables():
    from agentkit.sdk._settings import KEYS, ModelSettings, apply, merge

    assert KEYS == set(ModelSettings.__annotations__) == set(table.sdk_names())
    assert {table.sdk_names()[k] for k in KEYS} == {s.name for s in table.where("sdk")}
    for s in table.where("sdk"):
        if s.choices:
            with pytest.raises(UserError, match=s.sdk):
                merge({s.sdk: "nope"})
    cfg = apply(DecodeConfig(), merge({"max_tokens": 9, "temperature": 0.5, "top_p": 0.5, "seed": 3, "mode": "verify",
                                       "greedy": "token", "copy_bias": 1.0, "copy_from": "prompt",
                                       "copy_numbers": False, "json_style": "compact"}))
    assert (cfg.max_new_tokens, cfg.temperature, cfg.top_p, cfg.seed, cfg.mode, cfg.greedy, cfg.copy_bias,
            cfg.copy_from, cfg.copy_numbers) == (9, 0.5, 0.5, 3, "verify", "token", 1.0, "prompt", False)


def test_server_fields_are_the_tables():
    from agentkit.serving.protocol import AgentkitExt, ChatRequest

    ext = set(AgentkitExt.model_fields) - NOT_SETTINGS["AgentkitExt"]
    assert ext == set(table.server_fields("agentkit")), "AgentkitExt and the table disagree"
    body = set(ChatRequest.model_fields) - NOT_SETTINGS["ChatRequest"]
    assert body == set(table.server_fields("body")), "ChatRequest's decoding fields and the table disagree"
    for key, name in table.server_fields("agentkit").items():
        s = table.BY_NAME[name]
        if s.choices:
            literal = [a for a in typing.get_args(AgentkitExt.model_fields[key].annotation) if a is not type(None)]
            assert set(typing.get_args(literal[0])) == set(s.choices), name


def _non_default() -> DecodeConfig:
    return DecodeConfig(mode="verify", max_new_tokens=17, temperature=0.0, greedy="token", copy_bias=0.5,
                        copy_from="prompt", copy_numbers=False, top_k=5, top_p=0.9, seed=11, canvas_length=12,
                        max_denoising_steps=9, sampler="jacobi", stop=["END"], copy_first_digit=True,
                        copy_source="Maria Lopez, 41", copy_text_bias=3.0,
                        frequency_penalty=0.5, presence_penalty=-0.25, logit_bias={5: -100.0}, stop_loops=4)


def test_http_body_carries_every_server_setting_and_the_style():
    from agentkit.serving.plan import plan_request
    from agentkit.serving.protocol import ChatRequest

    from agentkit.constrain.compiler import compile_schema_cached
    from agentkit.sdk._http import HTTPGenerator

    cfg = _non_default()
    assert {s.name for s in table.where("server")} - set(table.TEMPLATE_SETTINGS) <= {
        s.name for s in table.DECODE if getattr(cfg, s.name) != s.default} | {"temperature"}
    tpl = compile_schema_cached({"type": "object", "properties": {"a": {"type": "string"}}}, style="compact")
    body = HTTPGenerator("http://x").request_body([{"role": "user", "content": "hi"}], cfg, tpl)
    assert body["agentkit"]["json_style"] == "compact" and body["agentkit"]["greedy"] == "token"
    plan = plan_request(ChatRequest(**body))  # what the server decodes is what the client asked for
    assert plan.config == cfg and plan.schema.style == "compact"


@pytest.mark.parametrize("field,value", [("weights", "base"), ("draft", "adapter"), ("sized_passes", False),
                                         ("confidence_threshold", 0.9), ("final_temperature", 0.1)])
def test_http_refuses_a_setting_the_server_cannot_honour(field, value):
    from agentkit.sdk._http import HTTPGenerator

    assert "server" not in table.BY_NAME[field].applies
    with pytest.raises(UserError, match=f"cannot send DecodeConfig {field}="):
        HTTPGenerator("http://x").request_body([], DecodeConfig(**{field: value}), None)


def test_evals_context_is_checked():
    from agentkit.evals.runner import EvalContext

    _check_place("EvalContext", {f.name: _default(f) for f in dataclasses.fields(EvalContext)}, "evals")


def test_cli_generate_options_are_checked():
    from agentkit.cli import generate

    opts = {k: p.default.default for k, p in inspect.signature(generate).parameters.items()}
    _check_place("cli generate", opts, "cli")


def test_ray_config_and_cli_serve_have_the_engines_settings():
    """The engine's settings are EngineConfig's fields: the Ray config and `agentkit serve` restate them with the
    same names and defaults, and declare nothing else unknown."""
    pytest.importorskip("fastapi")
    from agentkit.serving.ray_serve import RayServeConfig

    from agentkit.cli import serve

    engine = {f.name: _default(f) for f in dataclasses.fields(EngineConfig)}
    ray = {f.name: _default(f) for f in dataclasses.fields(RayServeConfig)}
    unknown = set(ray) - set(engine) - NOT_SETTINGS["RayServeConfig"]
    assert not unknown, f"RayServeConfig declares {sorted(unknown)}, neither EngineConfig's nor listed"
    assert {k: v for k, v in ray.items() if k in engine} == {k: engine[k] for k in ray if k in engine}
    opts = {k: p.default.default for k, p in inspect.signature(serve).parameters.items()}
    assert {k: v for k, v in opts.items() if k in engine} == {k: engine[k] for k in opts if k in engine}


def test_the_docs_table_is_the_declaration():
    """docs/settings.md holds the table ``python -m agentkit.settings`` prints (it drifted when written by hand:
    two settings missing, a default wrong)."""
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[1] / "docs" / "settings.md").read_text()
    assert table.markdown_table() in docs


def test_the_servers_ranges_are_the_tables():
    """Every numeric setting the server takes has the table's range in its request model (protocol.py takes it
    from agentkit.settings.bounds), and DecodeConfig refuses a value past it as the server does."""
    import annotated_types as at
    from agentkit.serving.protocol import AgentkitExt, ChatRequest

    for place, model in (("agentkit", AgentkitExt), ("body", ChatRequest)):
        for key, name in table.server_fields(place).items():
            s = table.BY_NAME[name]
            if s.kind not in ("int", "float"):
                continue
            got = {}
            for m in model.model_fields[key].metadata:
                for kind, attr in ((at.Ge, "ge"), (at.Gt, "gt"), (at.Le, "le"), (at.Lt, "lt")):
                    if isinstance(m, kind):
                        got[attr] = getattr(m, attr)
            assert got == table.bounds(name), (place, key, got, table.bounds(name))
            if s.high != table.INF and s.kind == "float":
                with pytest.raises(UserError):
                    DecodeConfig(**{name: s.high + 1})
