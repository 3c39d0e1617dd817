"""paravt.experiments.generalisation: a finished run's two policies under settings it was not all trained on."""

import json

import pytest

from paravt.cli import main as cli
from paravt.evaluation.report import overview_showed
from paravt.evaluation.store import read_results
from paravt.experiments.generalisation import main, summarise

FAST = ["steps=1", "sft.steps=2", "sft.episodes=2", "rollout.group_size=2", "rollout.prompts_per_step=1",
        "rollout.max_new_tokens=24", "data.synth_n=3", "perception.steps=2", "perception.videos=2", "data.heldout_n=3",
        "env.max_turns=2"]  # fmt: skip


def test_a_run_is_evaluated_per_budget_on_longer_videos_and_sampled(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    assert cli(["train", "--recipe", "tiny_cpu", "--out", str(run), "--no-progress", *FAST]) == 0
    # both checkpoints carry the tokens per turn their rollouts had, and the run's evaluations use it
    for model, ev in (("checkpoint/model", "eval"), ("coldstart/model", "eval_coldstart")):
        assert json.loads((run / model / "paravt.json").read_text())["max_new_tokens"] == 24
        assert json.loads((run / ev / "eval_config.json").read_text())["max_new_tokens"] == 24
    out = tmp_path / "gen.json"
    assert main([str(run), "--budgets", "2,4", "--long", "100-120,auto", "--out", str(out), "--no-progress"]) == 0
    data = json.loads(out.read_text())
    top = json.loads((run / "config.json").read_text())["data"]["max_duration"]
    names = ["K=2", "K=4", "100-120 s, K=8", f"{top:g}-{top + 50:g} s, K=8", "sampled T=0.7, K=8"]
    assert data["settings"] == names
    for lo, hi in ((100, 120), (top, top + 50)):  # "auto": longer than anything the run trained on
        long = [json.loads(x) for x in (run / f"heldout_{lo:g}-{hi:g}s" / "samples.jsonl").read_text().splitlines()]
        assert len(long) == 3 and all(lo <= s["duration"] <= hi for s in long)
    for label, folder in (("RL", "RL"), ("cold start", "cold_start")):
        for name in names:
            target = run / "generalisation" / folder / name.replace(" ", "_").replace(",", "")
            rows = read_results(target / "results.jsonl")
            missed = [r for r in rows if overview_showed(r["episode"]) is False]
            got = data["per_run"][str(run)][label][name]
            assert got["accuracy"] == pytest.approx(sum(r["score"] for r in rows) / len(rows))
            want = sum(r["tool_calls"] > 0 for r in missed) / len(missed) if missed else None
            assert got["crops_on_miss"] == (pytest.approx(want) if want is not None else None)
            config = json.loads((target / "eval_config.json").read_text())
            assert config.get("temperature") == (0.7 if name.startswith("sampled") else None)
            assert config["frame_budget"] == int(name.rsplit("K=", 1)[1])
    capsys.readouterr()
    assert main(["--from", str(out)]) == 0
    assert "| RL − cold start, paired | K=2 |" in capsys.readouterr().out
    assert main([str(tmp_path / "nope")]) == 1


def test_the_paired_difference_is_taken_run_by_run():
    def figs(acc, miss):
        return {"accuracy": acc, "crops_on_miss": miss, "crops_on_hit": 0.0, "missed": 0.5}

    per_run = {"a": {"cold start": {"K=8": figs(0.5, 0.0)}, "RL": {"K=8": figs(0.9, 1.0)}},
               "b": {"cold start": {"K=8": figs(0.4, None)}, "RL": {"K=8": figs(0.6, 0.5)}}}  # fmt: skip
    data = summarise(per_run)
    gain = data["mean"]["RL − cold start, paired"]["K=8"]
    assert gain["accuracy"]["values"] == pytest.approx([0.4, 0.2])
    assert gain["crops_on_miss"]["values"] == [1.0]  # a run without a miss has nothing to pair
    assert data["mean"]["cold start"]["K=8"]["crops_on_miss"]["values"] == [0.0]
