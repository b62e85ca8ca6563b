"""The extraction benchmark: its generator, its committed items, its per-field scorer and its runner (tiny model)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from agentkit.config import DecodeConfig
from agentkit.errors import UserError
from agentkit.evals import extract_gen
from agentkit.evals.extract import ExtractItem, as_date, as_number, fields, load_items, score
from agentkit.evals.extract_run import parse_row, run_extract_eval, run_peer, summarize
from agentkit.sdk._extract import extract_messages

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "evals" / "extract"
TINY = DATA / "tiny"
pytestmark = pytest.mark.usefixtures("one_thread")


def _leaves(value, schema):
    """(value, its schema) for each string and number leaf."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, schema["properties"][k])
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v, schema["items"])
    else:
        yield value, schema


def test_generator_is_seeded_and_every_gold_value_validates_and_is_stated():
    items = extract_gen.generate(80, seed=3)
    assert items == extract_gen.generate(80, seed=3)
    assert items != extract_gen.generate(80, seed=4)
    assert {it["schema"] for it in items} == set(extract_gen.SCHEMAS)
    assert len({it["text"] for it in items}) == len(items)
    absent = 0
    for it in items:
        schema = extract_gen.SCHEMAS[it["schema"]]
        jsonschema.validate(it["gold"], schema)
        absent += len(set(schema["properties"]) - set(it["gold"]))
        for v, sub in _leaves(it["gold"], schema):
            if isinstance(v, str) and "enum" not in sub and sub.get("format") != "date":
                assert v.casefold() in it["text"].casefold(), (it["id"], v)
            if isinstance(v, int | float):  # stated, in some number format
                assert float(v) in {as_number(t.strip("$€£.,()")) for t in it["text"].split()} | {
                    as_number(t) for t in it["text"].replace("$", " ").replace("€", " ").replace("£", " ").split()
                }, (it["id"], v)
    assert absent > 5  # optional fields the text does not state


def test_committed_items_are_the_generators_output(tmp_path):
    committed = [json.loads(line) for line in (DATA / "items.jsonl").read_text().splitlines()]
    assert len(committed) >= 300
    assert committed == extract_gen.write(tmp_path, len(committed), seed=0)
    for name, schema in extract_gen.SCHEMAS.items():
        assert json.loads((DATA / "schemas" / f"{name}.json").read_text()) == schema
    assert len(load_items(TINY)) == 8 and len(load_items(DATA, limit=5)) == 5


def test_number_and_date_normalisation():
    assert as_number("$1,200.50") == as_number(1200.5) == 1200.5
    assert as_number("12 500") is None and as_number(True) is None
    assert {str(as_date(s)) for s in ("2024-03-05", "March 5, 2024", "5 March 2024", "Mar 5 2024")} == {"2024-03-05"}
    assert as_date("next Tuesday") is None


def _item(gold, text="Ann Lee paid $1,200 on March 5, 2024 with Bo and Cy."):
    schema = {"type": "object", "properties": {
        "name": {"type": "string"}, "amount": {"type": "number"}, "date": {"type": "string", "format": "date"},
        "people": {"type": "array", "items": {"type": "string"}}, "email": {"type": "string"},
        "org": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    return ExtractItem("x", "s", schema, text, gold)


def test_score_per_field():
    gold = {"name": "Ann Lee", "amount": 1200, "date": "2024-03-05", "people": ["Bo", "Cy"], "org": {"city": "Oslo"}}
    item = _item(gold)
    assert [f for f, _ in fields(item.schema)] == [("name",), ("amount",), ("date",), ("people",), ("email",),
                                                  ("org", "city")]
    right = {"name": " ann  LEE.", "amount": "1,200.0", "date": "March 5, 2024", "people": ["cy", "Bo"],
             "org": {"city": "oslo"}}
    s = score(item, right)
    assert s["exact"] and all(f["ok"] for f in s["fields"])
    assert [f["copy"] for f in s["fields"]] == [False, True, False, False, False, False]
    assert next(f for f in s["fields"] if f["field"] == "email")["absent"]
    wrong = {**right, "amount": 120, "people": ["Bo", "Bo"], "email": "ann@x.org", "date": "2024-05-03"}
    verdicts = {f["field"]: f["ok"] for f in score(item, wrong)["fields"]}
    assert verdicts == {"name": True, "amount": False, "date": False, "people": False, "email": False,
                        "org.city": True}
    assert not any(f["ok"] for f in score(item, None)["fields"])  # a failed extraction: every field wrong
    assert not score(item, {**right, "org": {}})["exact"]  # a stated nested field left out is wrong


class EchoPeer:
    """A peer that answers from a table keyed by the user message (the test's stand-in for Outlines)."""

    def __init__(self, answers):
        self.answers, self.seen = answers, []

    def generate(self, messages, schema, max_new_tokens):
        from agentkit.evals.peers import PeerOutput, _stats

        self.seen.append((messages, schema))
        text = self.answers(messages[-1]["content"])
        return PeerOutput(text, _stats(5, 1.0, 0.0, 10, "stop"))


def test_peer_gets_extracts_messages_and_the_closed_schema_only():
    item = load_items(TINY, limit=1)[0]
    peer = EchoPeer(lambda _: json.dumps(item.gold))
    res = run_peer(peer, item)
    messages, schema = peer.seen[0]
    assert messages == extract_messages(item.schema, item.text)
    assert schema["additionalProperties"] is False and "gold" not in json.dumps(messages)
    assert score(item, res["output"])["exact"]
    assert run_peer(EchoPeer(lambda _: "not json"), item)["output"] is None


def test_runner_on_the_tiny_directory(tiny, tmp_path):
    items = {it.text: it.gold for it in load_items(TINY)}
    oracle = EchoPeer(lambda content: json.dumps(items[content.split("\n\n")[0]]))
    out = tmp_path / "r.json"
    report = run_extract_eval(TINY, ["ar", "oracle"], limit=3, out=out, plot=tmp_path / "r.png", engine=tiny,
                              peers={"oracle": oracle}, log=lambda _: None)
    assert json.loads(out.read_text())["items"] == 3 and (tmp_path / "r.png").is_file()
    s = report["summary"]
    assert s["oracle"]["field_accuracy"] == s["oracle"]["item_exact"] == s["oracle"]["numeric_copy"] == 1.0
    assert s["ar"]["items"] == 3 and s["ar"]["valid"] == 1.0  # the random model writes valid JSON, wrong values
    assert s["ar"]["field_accuracy"] < 1.0 and s["ar"]["tokens_per_forward"] > 0
    assert set(summarize(report["results"]["ar"])) >= {"p50_ms", "p95_ms", "numeric_copy", "item_exact"}


def test_rows_rotate_and_start_from_an_empty_prefix_cache(tiny, tmp_path, monkeypatch):
    """No row always goes first, and each agentkit row finds the engine's prefix cache empty: else a later row
    reuses the prompt an earlier row encoded, and its latency says where it ran, not what it is."""
    from agentkit.evals import extract_run

    seen = []

    def run(engine, item, row):
        seen.append((item.id, row, engine.prefixes.stats()["blocks"]))
        engine.generate([{"role": "user", "content": item.text}], DecodeConfig(mode="ar", max_new_tokens=1))
        return {"output": None, "error": "", "latency_ms": 1.0, "ungrounded": [], "output_tokens": 0, "forwards": 1}

    monkeypatch.setattr(extract_run, "run_agentkit", run)
    run_extract_eval(TINY, ["ar", "verify"], limit=2, out=tmp_path / "r.json", plot=None, engine=tiny,
                     log=lambda _: None)
    assert [r for _, r, _ in seen] == ["ar", "verify", "verify", "ar"]
    assert all(blocks == 0 for *_, blocks in seen)


def test_server_and_typelist_rows_give_the_sdks_outputs(tiny, tmp_path):
    """``+server`` sends each item to the server's app as a user would and gets what ``extract`` gives (the same
    prompt, template and settling), as does ``+http`` (``extract`` with the server as its model); ``+typelist`` writes the optional fields as OpenAI's type lists, which are
    grounded as the ``anyOf`` they replace."""
    from agentkit.evals.extract_run import type_lists

    user = REPO / "evals" / "extract_user" / "dev"  # its schemas have optional fields (pydantic's anyOf)
    item = load_items(user, 1)[0]
    listed = type_lists(item.schema)
    optional = [k for k in item.schema["properties"] if k not in item.schema.get("required", [])]
    assert optional and all(isinstance(listed["properties"][k]["type"], list) for k in optional)
    assert extract_messages(listed, item.text) == extract_messages(item.schema, item.text)  # one prompt for both
    report = run_extract_eval(user, ["ar", "ar+server", "ar+http", "ar+typelist", "ar+typelist+server"], limit=2,
                              out=tmp_path / "r.json", plot=None, engine=tiny, log=lambda _: None)
    rows = report["results"]
    for row in ("ar+server", "ar+http", "ar+typelist", "ar+typelist+server"):
        assert [r["output"] for r in rows[row]] == [r["output"] for r in rows["ar"]], row
        assert all(r["forwards"] > 0 and not r["error"] for r in rows[row])


def test_row_settings_are_checked():
    assert parse_row("ar+compact+nocopy") == ("ar", {"compact", "nocopy"})
    with pytest.raises(UserError, match="unknown setting"):
        parse_row("ar+bogus")
    assert parse_row("verify+drafter") == ("verify", {"drafter"})
    for row, why in (("verify-drafter", "unknown mode"), ("ar+drafter", "needs the verify mode"),
                     ("fast", "unknown mode"), ("ar+server+retry", "no request field"),
                     ("ar+server+http", "give one")):
        with pytest.raises(UserError, match=why):  # never a row silently left out of the run
            parse_row(row)


def test_user_items_validate_and_optional_fields_score_by_their_own_kind():
    """The hand-written user-style items: every gold value validates against its schema; an optional field
    (``X | None``) is scored as X (a number as a number, a date as a date); invented values and absent fields."""
    for split in ("heldout", "dev"):
        items = load_items(REPO / "evals" / "extract_user" / split)
        assert len(items) == {"heldout": 85, "dev": 62}[split]
        for it in items:
            jsonschema.validate(it.gold, it.schema)
    order = next(it for it in load_items(REPO / "evals" / "extract_user" / "dev") if it.schema_name == "order")
    assert dict(fields(order.schema))[("unit_price",)] == "number"
    assert dict(fields(order.schema))[("delivery_date",)] == "date"
    item = ExtractItem("x", "order", order.schema, "Jo wants 3 mugs at €27, by 4 May 2025.",
                       {"customer": "Jo", "product": "mugs", "quantity": 3, "unit_price": 27, "currency": "EUR",
                        "delivery_date": "2025-05-04"})
    rows = {r["field"]: r for r in score(item, {"customer": "Jo", "product": "Mugs", "quantity": 3,
                                               "unit_price": 27.0, "currency": "EUR",
                                               "delivery_date": "May 4, 2025"})["fields"]}
    assert all(r["ok"] for r in rows.values()) and not any(r["invented"] for r in rows.values())
    item.gold = {"customer": "Jo", "product": "mugs", "quantity": 3}
    rows = {r["field"]: r for r in score(item, {"customer": "Joe", "product": "mugs", "quantity": 3,
                                               "unit_price": None, "currency": "USD",
                                               "delivery_date": "2025-05-04"})["fields"]}
    assert rows["customer"]["invented"] and rows["currency"]["invented"]  # "Joe" and "USD": not in the text
    assert rows["unit_price"]["ok"] and not rows["currency"]["ok"] and not rows["delivery_date"]["invented"]
