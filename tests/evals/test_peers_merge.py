"""evals/peers_merge.py: shards merged on the items every variant finished, and the paired comparison with the
first variant (won / lost / exact sign test)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "evals"))
import peers_merge


def test_sign_test_exact_values():
    assert peers_merge.sign_test(0, 0) == 1.0
    assert peers_merge.sign_test(3, 3) == 1.0
    # 0 of 5 discordant pairs to one side: 2 * (1/2)^5
    assert peers_merge.sign_test(0, 5) == pytest.approx(2 / 32)
    assert peers_merge.sign_test(5, 0) == peers_merge.sign_test(0, 5)
    # 14 against 17 (session 11's agentkit vs llama.cpp): far from significant
    p = peers_merge.sign_test(14, 17)
    assert p == pytest.approx(2 * sum(math.comb(31, i) for i in range(15)) / 2 ** 31)
    assert 0.5 < p < 1.0
    assert peers_merge.sign_test(2, 20) < 0.001


def _shard(path: Path, rows: list[dict], variants: list[str]) -> Path:
    doc = {"suite": "bfcl", "data": "d", "engine_dtype": "float32", "engine_backend": "torch",
           "peer_max_new_tokens": 256, "variants": variants, "env": {}, "items_total": len(rows) // len(variants),
           "items": rows}
    path.write_text(json.dumps(doc))
    return path


def _row(i: int, mode: str, success: bool, text: str) -> dict:
    return {"id": f"simple_python_{i}", "category": "simple_python", "mode": mode, "success": success,
            "valid": True, "text": text, "error": "", "error_type": "", "stats": {}, "wall_ms": 1.0}


def test_merge_pairs_every_variant_with_the_first(tmp_path):
    variants = ["ar-constrained", "verify", "llama-cpp"]
    wins = {"ar-constrained": [1, 1, 0, 0], "verify": [1, 1, 0, 0], "llama-cpp": [1, 0, 1, 1]}
    rows = [_row(i, v, bool(wins[v][i]), "same" if v != "llama-cpp" else f"peer{i}") for v in variants
            for i in range(4)]
    res = peers_merge.merge([_shard(tmp_path / "s0.json", rows, variants)])
    assert res["items_done"] == 4
    assert res["verify_identical"] == {"verify = ar-constrained": "4/4"}
    assert res["paired_with_first"]["verify"] == {"n": 4, "won": 0, "lost": 0, "sign_test_p": 1.0}
    peer = res["paired_with_first"]["llama-cpp"]
    assert (peer["won"], peer["lost"]) == (2, 1)
    assert peer["sign_test_p"] == 1.0
