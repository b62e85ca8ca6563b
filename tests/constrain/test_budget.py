"""Length budgets: a template always closes within ``max_new_tokens``, in every mode and JSON style, whatever the
model wants.

Budgets are set relative to the shortest valid output of the template in its style (``min_tokens`` at the start;
the spaced style's separators cost tokens of their own), so each style is tested just above, at and just below it.
"""

import jsonschema
import pytest

from agentkit.config import DecodeConfig
from agentkit.constrain.compiler import STYLES, compile_schema_uncached
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

SLACK = [3, 10, 19, 43]  # budgets tried: the shortest output plus this many tokens
DECODE_CASES = [("ar", 1.0, "auto"), ("diffusion", 1.0, "jacobi"), ("diffusion", 1.0, "mask"), ("verify", 0.0, "auto"),
         ("ar", 0.0, "auto")]


@pytest.fixture(scope="module")
def engines():
    return {"plain": Engine.from_loaded(tiny_llama(3)), "mask": Engine.from_loaded(tiny_llama(4, mask_token=True))}


def shortest(eng, tpl) -> int:
    """Tokens of the shortest valid output of ``tpl`` on ``eng``'s tokenizer."""
    c = eng.constraint(tpl)
    return int(c.min_tokens(c.start()))


def test_styles_have_their_own_shortest_output(engines):
    # the spaced style's ", " and ": " cost tokens: a fixed budget that fits one style may not fit the other
    short = {st: shortest(engines["plain"], compile_schema_uncached(SCHEMA, style=st)) for st in STYLES}
    assert short["compact"] < short["spaced"], short
    assert all(n > 5 for n in short.values()), short  # the "too small" budget below is below every style


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("mode,temperature,sampler", DECODE_CASES)
@pytest.mark.parametrize("slack", SLACK)
def test_output_closes_within_budget(engines, style, mode, temperature, sampler, slack):
    eng = engines["mask" if sampler == "mask" else "plain"]
    tpl = compile_schema_uncached(SCHEMA, style=style)
    budget = shortest(eng, tpl) + slack
    for seed in range(3):
        cfg = DecodeConfig(mode=mode, max_new_tokens=budget, temperature=temperature, seed=seed, sampler=sampler,
                           canvas_length=12)
        res = eng.generate("x", cfg, template=tpl, raw=True)
        assert res.stats.finish_reason == "template", (mode, budget, seed, res.text)
        assert len(res.token_ids) <= budget
        jsonschema.validate(res.value, SCHEMA)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("slack", [3, 19])
def test_diffusion_gemma_closes_within_budget(style, slack):
    eng = Engine.from_loaded(tiny_diffusion_gemma(1, canvas_length=8))
    tpl = compile_schema_uncached(SCHEMA, style=style)
    budget = shortest(eng, tpl) + slack
    for seed in range(2):
        cfg = DecodeConfig(mode="diffusion", max_new_tokens=budget, temperature=1.0, seed=seed, canvas_length=8,
                           max_denoising_steps=6)
        res = eng.generate("x", cfg, template=tpl, raw=True)
        assert res.stats.finish_reason == "template", res.text
        assert len(res.token_ids) <= budget
        jsonschema.validate(res.value, SCHEMA)


@pytest.mark.parametrize("style", STYLES)
def test_closing_is_exact_at_the_shortest_completion(engines, style):
    eng = engines["plain"]
    tpl = compile_schema_uncached(SCHEMA, style=style)
    n = shortest(eng, tpl)
    res = eng.generate("x", DecodeConfig(mode="ar", max_new_tokens=n, temperature=1.0, seed=0), template=tpl,
                       raw=True)
    assert res.stats.finish_reason == "template" and len(res.token_ids) <= n
    jsonschema.validate(res.value, SCHEMA)


@pytest.mark.parametrize("style", STYLES)
def test_budget_below_the_template_is_a_clear_error(engines, style):
    eng = engines["plain"]
    tpl = compile_schema_uncached(SCHEMA, style=style)
    n = shortest(eng, tpl)
    for budget in (5, n - 1):  # far below, and one token short of the shortest completion
        with pytest.raises(InvalidRequestError, match=f"max_new_tokens={budget} cannot hold this template"):
            eng.generate("x", DecodeConfig(mode="ar", max_new_tokens=budget), template=tpl, raw=True)


@pytest.mark.parametrize("sampler", ["jacobi", "mask"])
def test_a_final_eos_in_the_canvas_ends_the_output(engines, sampler):
    # an open-ended value: the random model drafts EOS mid-canvas; once frozen (by the adaptive stop or the
    # confidence sampler) it must end the output, never be emitted as text
    from agentkit.models.loader import wrap

    lm = engines["mask"].lm
    eng = Engine.from_loaded(wrap(lm.model, lm.tokenizer, name="bidi", mask_token_id=lm.mask_token_id,
                                  bidirectional=True)) if sampler == "mask" else engines["plain"]
    schema = {"type": "integer", "minimum": 1}
    tpl = compile_schema_uncached(schema)
    for seed in range(4):
        cfg = DecodeConfig(mode="diffusion", max_new_tokens=40, temperature=1.0, seed=seed, sampler=sampler,
                           canvas_length=16, max_denoising_steps=8)
        res = eng.generate("x", cfg, template=tpl, raw=True)
        assert res.stats.finish_reason == "template" and not set(res.token_ids) & set(eng.lm.eos_ids), res.text
        jsonschema.validate(res.value, schema)
