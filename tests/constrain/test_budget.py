"""Length budgets: a template always closes within ``max_new_tokens``, in every mode, whatever the model wants."""

import jsonschema
import pytest

from agentkit.config import DecodeConfig
from agentkit.constrain.compiler import compile_schema
from agentkit.engine.engine import Engine
from agentkit.errors import InvalidRequestError
from agentkit.models.tiny import tiny_diffusion_gemma, tiny_llama

# unbounded numbers, free strings and open-ended arrays of objects: a random model never closes these by itself
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "score": {"type": "number"},
        "items": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"},
                                                                               "tag": {"type": "string"}},
                                              "required": ["id", "tag"]}},
    },
    "required": ["name", "score", "items"],
}

MODES = [("ar", 1.0, "auto"), ("diffusion", 1.0, "jacobi"), ("diffusion", 1.0, "mask"), ("verify", 0.0, "auto"),
         ("ar", 0.0, "auto")]


@pytest.fixture(scope="module")
def engines():
    return {"plain": Engine.from_loaded(tiny_llama(3)), "mask": Engine.from_loaded(tiny_llama(4, mask_token=True))}


@pytest.mark.parametrize("mode,temperature,sampler", MODES)
@pytest.mark.parametrize("budget", [24, 31, 40, 64])
def test_output_closes_within_budget(engines, mode, temperature, sampler, budget):
    eng = engines["mask" if sampler == "mask" else "plain"]
    tpl = compile_schema(SCHEMA)
    c = eng.constraint(tpl)
    assert c.min_tokens(c.start()) <= 24  # the shortest valid output fits the smallest budget tried
    for seed in range(3):
        cfg = DecodeConfig(mode=mode, max_new_tokens=budget, temperature=temperature, seed=seed, sampler=sampler,
                           canvas_length=12)
        res = eng.generate("x", cfg, template=tpl, raw=True)
        assert res.stats.finish_reason == "template", (mode, budget, seed, res.text)
        assert len(res.token_ids) <= budget
        jsonschema.validate(res.value, SCHEMA)


@pytest.mark.parametrize("budget", [24, 40])
def test_diffusion_gemma_closes_within_budget(budget):
    eng = Engine.from_loaded(tiny_diffusion_gemma(1, canvas_length=8))
    tpl = compile_schema(SCHEMA)
    for seed in range(2):
        cfg = DecodeConfig(mode="diffusion", max_new_tokens=budget, temperature=1.0, seed=seed, canvas_length=8,
                           max_denoising_steps=6)
        res = eng.generate("x", cfg, template=tpl, raw=True)
        assert res.stats.finish_reason == "template", res.text
        jsonschema.validate(res.value, SCHEMA)


def test_closing_is_exact_at_the_shortest_completion(engines):
    eng = engines["plain"]
    tpl = compile_schema(SCHEMA)
    c = eng.constraint(tpl)
    shortest = int(c.min_tokens(c.start()))
    res = eng.generate("x", DecodeConfig(mode="ar", max_new_tokens=shortest, temperature=1.0, seed=0), template=tpl,
                       raw=True)
    assert res.stats.finish_reason == "template" and len(res.token_ids) <= shortest
    jsonschema.validate(res.value, SCHEMA)


def test_budget_below_the_template_is_a_clear_error(engines):
    eng = engines["plain"]
    tpl = compile_schema(SCHEMA)
    with pytest.raises(InvalidRequestError, match="max_new_tokens=5 cannot hold this template"):
        eng.generate("x", DecodeConfig(mode="ar", max_new_tokens=5), template=tpl, raw=True)


@pytest.mark.parametrize("sampler", ["jacobi", "mask"])
def test_a_final_eos_in_the_canvas_ends_the_output(engines, sampler):
    # an open-ended value: the random model drafts EOS mid-canvas; once frozen (by the adaptive stop or the
    # confidence sampler) it must end the output, never be emitted as text
    from agentkit.models.loader import wrap

    lm = engines["mask"].lm
    eng = Engine.from_loaded(wrap(lm.model, lm.tokenizer, name="bidi", mask_token_id=lm.mask_token_id,
                                  bidirectional=True)) if sampler == "mask" else engines["plain"]
    schema = {"type": "integer", "minimum": 1}
    tpl = compile_schema(schema)
    for seed in range(4):
        cfg = DecodeConfig(mode="diffusion", max_new_tokens=40, temperature=1.0, seed=seed, sampler=sampler,
                           canvas_length=16, max_denoising_steps=8)
        res = eng.generate("x", cfg, template=tpl, raw=True)
        assert res.stats.finish_reason == "template" and not set(res.token_ids) & set(eng.lm.eos_ids), res.text
        jsonschema.validate(res.value, schema)
