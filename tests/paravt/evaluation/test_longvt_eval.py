"""``paravt eval --protocol longvt`` and ``paravt bench dispatch --peers longvt``: LongVT's protocol played by the
scripted detector and by a tiny model, at most one call a turn, beside our two dispatch modes at one budget."""

from __future__ import annotations

import json

from paravt.cli import main
from paravt.evaluation.store import read_results


def executed_per_turn(row: dict) -> list[int]:
    return [sum(c["status"] == "executed" for c in t["crops"]) for t in row["episode"]["turns"]]


def test_detector_and_a_tiny_model_play_it_one_call_a_turn(synth_small, tiny_qwen3, tmp_path):
    data, samples = synth_small
    for policy, out in (("detector", tmp_path / "det"), (f"hf:{tiny_qwen3}", tmp_path / "tiny")):
        argv = ["eval", "--policy", policy, "--data", str(data), "--out", str(out), "--protocol", "longvt",
                "--frame-budget", "8", "--no-progress"]  # fmt: skip
        if policy.startswith("hf:"):
            argv += ["--max-new-tokens", "24", "--threads", "1"]
        assert main(argv) == 0
        rows = read_results(out / "results.jsonl")
        assert len(rows) == len(samples) and not any(r["error"] for r in rows)
        assert all(n <= 1 for r in rows for n in executed_per_turn(r))
        config = json.loads((out / "eval_config.json").read_text())
        assert config["protocol"] == "longvt"
        if policy == "detector":  # it crops where the overview misses: the calls carry the episode's path and run
            assert sum(r["tool_calls"] for r in rows) > 0
            assert any(max(executed_per_turn(r), default=0) == 1 for r in rows)


def test_bench_dispatch_plays_longvt_at_the_same_budgets(synth_small, tmp_path):
    data, samples = synth_small
    out = tmp_path / "bench"
    argv = ["bench", "dispatch", "--data", str(data), "--policy", "detector", "--frame-budget", "4", "--crop-budget", "2",
            "--peers", "longvt", "--limit", "4", "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    results = json.loads((out / "dispatch.json").read_text())
    assert results["arms"]["longvt"] == {"protocol": "longvt", "dispatch": "sequential"}
    cells = {c["mode"]: c for c in results["cells"]}
    assert set(cells) == {"parallel", "sequential", "longvt"} and cells["longvt"]["n"] == 4
    rows = read_results(out / "longvt_budget2" / "results.jsonl")
    for r in rows:
        assert sum(executed_per_turn(r)) <= 2 and all(n <= 1 for n in executed_per_turn(r))
        assert r["episode"]["cost"]["visual_tokens"] > 0
    [diff] = results["parallel_minus_longvt"]
    assert diff["n"] == 4 and diff["crop_budget"] == 2
    assert "Parallel - longvt (its own protocol)" in (out / "dispatch.md").read_text()
