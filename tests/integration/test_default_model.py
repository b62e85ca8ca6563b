"""Integration tests on the embedded default model (SmolLM2-135M-Instruct). Correctness only; speed is in evals/."""

import pytest
import torch

from agentkit.config import DecodeConfig

pytestmark = pytest.mark.model

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about rain.",
    "List three fruits.",
    "Explain what a CPU does in one sentence.",
    "Say hello in Spanish.",
    "What is 12 times 3?",
    "Name a famous painter.",
    "Give me a synonym for happy.",
    "What color is the sky?",
    "Translate 'thank you' to French.",
    "Who wrote Hamlet?",
    "What is water made of?",
    "Suggest a name for a cat.",
    "How many days are in a week?",
    "What is the opposite of cold?",
    "Describe a tree in five words.",
    "What do bees make?",
    "Finish the sentence: The early bird",
    "What is the boiling point of water in Celsius?",
    "Recommend a book for children.",
]
N = 12


def test_ar_greedy_equals_transformers_generate(default_engine):
    for prompt in PROMPTS[:5]:
        ids = default_engine.encode_prompt(prompt)
        ref = default_engine.lm.model.generate(
            torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long), max_new_tokens=N,
            do_sample=False,
        )[0, len(ids):].tolist()
        got = default_engine.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=N)).token_ids
        eos = set(default_engine.lm.eos_ids)
        assert got == [t for t in ref if t not in eos][: len(got)], prompt


@pytest.mark.parametrize("mode", ["verify", "diffusion"])
def test_verify_and_causal_canvas_equal_ar(default_engine, mode):
    from agentkit.config import EngineConfig
    from agentkit.engine.engine import Engine

    # the causal canvas: the same weights with the block-diffusion adapter off (the adapter is another distribution)
    causal = Engine.from_loaded(default_engine.lm, EngineConfig(adapter=False))
    assert causal.adapter_path is None
    for prompt in PROMPTS:
        ar = causal.generate(prompt, DecodeConfig(mode="ar", max_new_tokens=N))
        other = causal.generate(prompt, DecodeConfig(mode=mode, max_new_tokens=N, canvas_length=N))
        assert other.token_ids == ar.token_ids, (prompt, ar.text, other.text)


def test_schema_output_validates_in_every_mode(default_engine):
    """The embedded model under a JSON Schema: every mode (adapter diffusion included) returns valid JSON."""
    import jsonschema

    from agentkit.constrain.compiler import compile_schema

    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 120}},
              "required": ["name", "age"], "additionalProperties": False}
    template = compile_schema(schema)
    messages = [{"role": "system", "content": "Extract the person as JSON."},
                {"role": "user", "content": "Ana Souza is 31 years old."}]
    for mode in ("ar", "diffusion", "verify"):
        res = default_engine.generate(messages, DecodeConfig(mode=mode, max_new_tokens=64), template=template)
        assert res.stats.finish_reason == "template", (mode, res.text)
        jsonschema.validate(res.value, schema)
        assert res.stats.pinned_tokens > 0


def test_pinned_runs_are_the_same_taken_whole_or_token_by_token(default_engine):
    # AR (jump-forward) takes a pinned run in one step; verify and the canvas walk re-ask after every token. At a
    # seam like '"stops":[' followed by string items, SmolLM2 has '["': from the literal's start the '[' looks
    # pinned, from just before it '[' vs '["' is the model's choice. Both views must agree everywhere.
    from agentkit.constrain.compiler import compile_schema

    schema = {"type": "object", "properties": {"city": {"type": "string"},
                                               "stops": {"type": "array", "items": {"type": "string"}}},
              "required": ["city", "stops"]}
    c = default_engine.constraint(compile_schema(schema, style="compact"))  # the texts below are compact JSON
    tok = default_engine.tokenizer
    checked = 0
    for text in ['{"city":"Rome","stops":["Pisa","Siena"]}', '{"city":"Oslo","stops":[]}']:
        s = c.start()
        for t in tok.encode(text, add_special_tokens=False):
            run = c.forced(s)
            if run:
                assert c.forced(c.advance(s, run[0])) == run[1:]
                checked += 1
            s = c.advance(s, t)
            if s is None:
                break
    assert checked > 5
    seam = c.start()
    for t in tok.encode('{"city":"Rome","stops":', add_special_tokens=False):
        seam = c.advance(seam, t)
    assert c.forced(seam) == [] and c.allowed(seam)[tok.encode('["', add_special_tokens=False)[0]]



def test_byte_greedy_weighs_spellings_of_one_closing_together(default_engine):
    # after '"heat": 5' the object may close ('}' then the pinned '}', or '}}' in one token) or take another
    # argument (','): byte greedy weighs the two closing spellings together
    from agentkit.constrain.compiler import compile_schema
    from agentkit.engine.sampler import greedy_by_byte
    from agentkit.toolcall import call_template

    tpl = compile_schema({"type": "object", "properties": {"heat": {"type": "integer"}, "iso": {"type": "boolean"}},
                          "required": ["heat"], "additionalProperties": False})
    c = default_engine.constraint(call_template([("f", tpl)]))
    tok = default_engine.tokenizer
    s = c.start()
    for t in tok.encode('{"name": "f", "arguments": {"heat": 5', add_special_tokens=False):
        s = c.advance(s, t)
    close, close2, comma = (tok.convert_tokens_to_ids(x) for x in ("}", "}}", ","))
    allowed = c.allowed(s)
    assert allowed[close] and allowed[close2] and allowed[comma]
    logits = torch.full((len(tok),), -30.0)
    logits[[comma, close, close2]] = torch.log(torch.tensor([0.4, 0.3, 0.29]))
    assert greedy_by_byte(logits, allowed, c.vocab.first_bytes, c.vocab.token_bytes) == close
    assert int(logits.masked_fill(~allowed, float("-inf")).argmax()) == comma


@pytest.mark.parametrize("q4", [False, True])
def test_fixed_shape_passes_are_exact_in_bf16_across_key_blocks(default_engine, grouped_logits, q4):
    """bf16, pass_width 8: a position gets the same bits one token a pass or grouped, including groupings whose
    passes read different key counts (320 vs 384: below 512 they differ on this model unless rounded to a block),
    also with the layers on their 4-bit weights (passes of 8 rows: all on the int4 kernel)."""
    from agentkit.engine.fixed import FixedShapeBackbone
    from agentkit.models.loader import load_model
    from agentkit.models.q4 import safetensors_source, use_q4_steps

    lm = load_model(dtype="bfloat16")
    if q4:
        assert use_q4_steps(lm.model, safetensors_source(lm.meta["weights"])) == 210
    bb = FixedShapeBackbone(lm, 8)
    text = " ".join(["The history of computing spans calculators, mainframes and phones."] * 40)
    ids = default_engine.tokenizer.encode(text, add_special_tokens=False)[:329]
    prompt, rest = ids[:305], ids[305:]

    def run(groups: list[int]) -> torch.Tensor:
        return grouped_logits(bb, prompt, rest, groups)

    one_by_one = run([1] * 24)
    for groups in ([5, 1, 8, 2, 8], [8, 8, 8]):
        assert torch.equal(one_by_one, run(groups)), groups


def test_dtype_auto_takes_the_4bit_short_passes_in_its_own_dtype(default_engine, grouped_logits):
    """The engine that loads the default model with dtype="auto" runs bf16 where the CPU has native bf16 and float32
    elsewhere, with the 4-bit short passes in either; an explicit float32 engine (the default_engine fixture) has
    none."""
    from agentkit.config import EngineConfig
    from agentkit.engine.engine import Engine
    from agentkit.models.loader import resolve_dtype
    from agentkit.models.q4 import Q4Linear

    eng = Engine(EngineConfig(backend="torch"))
    assert str(eng.lm.model.dtype) == f"torch.{resolve_dtype('auto')}"
    assert sum(isinstance(m, Q4Linear) for m in eng.lm.model.modules()) == 210
    out = eng.generate("What is 12 times 3?", DecodeConfig(mode="ar", max_new_tokens=8))
    assert 1 <= len(out.token_ids) <= 8 and out.text.strip()
    # row-exact passes (Backbone.exact_rows): a position's logits are the same one token a pass or grouped, in
    # groups of any size (longer ones are cut into pieces of 8)
    assert eng.backbone.exact_rows == 8
    ids = eng.encode_prompt("Call get_weather for Paris as JSON.")
    rest = eng.tokenizer.encode('{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}',
                                add_special_tokens=False)[:22]
    one_by_one = grouped_logits(eng.backbone, ids, rest, [1] * len(rest))
    for groups in ([5, 1, 8, 2, 6], [22]):
        assert torch.equal(one_by_one, grouped_logits(eng.backbone, ids, rest, groups)), groups
    shared = Engine.from_loaded(default_engine.lm, EngineConfig(adapter=False))  # dtype auto, a model loaded elsewhere
    assert not any(isinstance(m, Q4Linear) for m in shared.lm.model.modules())
