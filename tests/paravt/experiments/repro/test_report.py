"""``paravt repro`` end to end at smoke scale: shared cold start, two arms (trained at once, ``--jobs 2``),
evaluation, report, resume."""

import json

import pytest

from paravt.cli import main
from paravt.experiments.repro.arms import ReproConfig
from paravt.experiments.repro.report import claims, compare, halved_at

FAST = ["sft.steps=4", "sft.episodes=4", "rollout.group_size=2", "rollout.prompts_per_step=1",
        "rollout.max_new_tokens=24", "data.synth_n=3", "perception.steps=2", "perception.videos=2",
        "data.heldout_n=2", "env.max_turns=2"]  # fmt: skip


def test_repro_smoke_gates_resumes_and_reports(tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "repro"
    args = ["repro", "--out", str(out), "--arms", "vanilla_grpo,para_grpo", "--seeds", "0", "--steps", "1",
            "--eval-frame-budgets", "4,8", "--no-progress", *FAST]  # fmt: skip
    # a 2-step cold start is blind: the probe gate stops the run before any RL, naming what failed
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "failed the probe gate" in err and "--no-gate" in err and "Traceback" not in err
    gate = json.loads((out / "coldstart" / "gate.json").read_text())
    assert gate["passed"] is False and gate["passed"] == all(c["passed"] for c in gate["checks"])
    assert {c["name"] for c in gate["checks"]} == {"sees a crop", "sees the overview", "calls (vanilla_grpo)",
                                                   "calls (para_grpo)", "writes its calls"}  # fmt: skip
    # the call-writing check sampled the held-out videos at the recipe's temperature, 2 turns each
    (written,) = gate["call_writing"]["by_temperature"].values()
    assert written["turns"] == 2 * 2 and list(gate["call_writing"]["by_temperature"]) == ["0.7"]
    (check,) = [c for c in gate["checks"] if c["name"] == "writes its calls"]
    assert check["value"] == written["clean_inside"] and check["passed"] == (check["value"] >= 0.5)
    assert all(c["name"] in err for c in gate["checks"] if not c["passed"])
    assert not (out / "arms").exists()
    assert "probe gate (**failed**" in (out / "report.md").read_text()
    args.append("--no-gate")
    caplog.clear()
    assert main([*args, "--jobs", "2"]) == 0
    # one cold start and one gate per invocation: the failed gate is said once, not once per stage
    assert sum("--no-gate: going on" in r.getMessage() for r in caplog.records) == 1
    cold = out / "coldstart" / "coldstart" / "model" / "paravt.json"
    assert cold.is_file()
    for arm in ("vanilla_grpo", "para_grpo"):
        run = out / "arms" / arm / "seed0"
        config = json.loads((run / "config.json").read_text())
        assert config["model"]["path"] == str(cold.parent) and config["sft"]["steps"] == 0
        for d in ("parallel", "sequential"):
            for k in (4, 8):
                summary = json.loads((run / f"eval_{d}_k{k}" / "summary.json").read_text())
                assert summary["n"] == 2
    report = (out / "report.md").read_text()
    assert "trained with `--no-gate`" in report
    for part in ("(0) The shared cold start", "(A) Format", "(B) Tool use", "(C) Held-out accuracy", "(D) Dynamics",
                 "Which of the paper's claims", "| PARA-GRPO |", "| Vanilla GRPO |", "0.13", "K = 4, sequential",
                 "K = 8, parallel", "| step 1 |", "When does a final policy crop?"):  # fmt: skip
        assert part in report, part
    assert "one seed: no verdict" in report  # one seed: a difference, never a verdict
    assert (out / "report.png").read_bytes()[:4] == b"\x89PNG"
    wall = json.loads((out / "wall_s.json").read_text())
    assert {"cold start and probe gate", "cold start's evaluation", "arms, trained and evaluated"} <= set(wall)
    mtime = cold.stat().st_mtime
    # rerun: nothing is retrained, the report is rewritten; changed shared settings are refused
    assert main(args) == 0 and cold.stat().st_mtime == mtime
    assert main([*args[: -len(FAST) - 1], *FAST[:-1], "--no-gate"]) == 1
    assert "other settings" in capsys.readouterr().err
    # --report-only rewrites the report under the settings the run was made with
    (out / "report.md").unlink()
    assert main(["repro", "--out", str(out), "--report-only"]) == 0
    assert "sft.steps=4" in (out / "report.md").read_text() and "seeds: 0;" in (out / "report.md").read_text()
    # a report directory that keeps only the summaries (as results/repro/ does) still reports the cold start
    assert "| cold start (shared) |" in (out / "report.md").read_text()
    (out / "coldstart" / "eval_parallel_k4" / "results.jsonl").unlink()
    assert main(["repro", "--out", str(out), "--report-only"]) == 0
    assert "| cold start (shared) |" in (out / "report.md").read_text()
    assert main(["repro", "--out", str(tmp_path / "none"), "--report-only"]) == 1
    # carried to another machine as results/repro/ keeps it (summaries, states, the cold start's weights; no arm
    # weights, no videos): the same command finds every run finished and evaluated, and reports it again
    kit = tmp_path / "kit"
    for f in out.rglob("*"):
        rel = f.relative_to(out)
        weights = "model" in rel.parts and rel.parts[:3] != ("coldstart", "coldstart", "model")
        keep = rel.parts[:3] == ("coldstart", "coldstart", "model") or (not weights and rel.name in (
            "summary.json", "state.json", "config.json", "metrics.jsonl", "gate.json", "repro.json"))  # fmt: skip
        if f.is_file() and keep and "heldout" not in rel.parts:
            (kit / rel).parent.mkdir(parents=True, exist_ok=True)
            (kit / rel).write_bytes(f.read_bytes())
    assert not (kit / "arms" / "para_grpo" / "seed0" / "checkpoint" / "model").exists()
    assert main(args[:2] + [str(kit)] + args[3:]) == 0
    assert (kit / "coldstart" / "heldout" / "samples.jsonl").is_file()  # drawn again from its seed
    carried = (kit / "report.md").read_text()
    assert carried.split("## (0)")[1] == (out / "report.md").read_text().split("## (0)")[1]


def test_a_claim_is_a_paired_difference_over_seeds_with_its_interval():
    assert compare({0: 0.9, 1: 0.8, 2: 0.85}, {0: 0.1, 1: 0.2, 2: 0.15})["verdict"] == "reproduced"
    assert compare({0: 0.1, 1: 0.2, 2: 0.15}, {0: 0.9, 1: 0.8, 2: 0.85})["verdict"].startswith("NOT reproduced")
    wide = compare({0: 0.9, 1: 0.1, 2: 0.5}, {0: 0.2, 1: 0.6, 2: 0.4})
    assert wide["verdict"].startswith("not resolved") and wide["mean"] - wide["ci95"] < 0 < wide["mean"] + wide["ci95"]
    # pairs by seed: a seed only one arm finished does not enter, nor does pairing depend on dict order
    paired = compare({2: 1.0, 0: 0.5, 7: 0.0}, {0: 0.25, 2: 0.5})
    assert paired["seeds"] == [0, 2] and paired["diffs"] == [0.25, 0.5]
    assert compare({0: 1.0}, {0: 0.0})["verdict"] == "one seed: no verdict"
    assert compare({}, {0: 0.0})["verdict"] == "not measured"


def test_claims_cover_both_rewards_and_every_evaluated_k():
    cfg = ReproConfig(eval_frame_budgets=(4, 64))
    found = claims(cfg)
    rewards = {r for _, r, _, _ in found}
    assert rewards == {"released", "prefix scored"}
    scored = [c for c in found if c[1] == "prefix scored"]
    assert scored and all(c[2][0].endswith("_scored") for c in scored)
    held_out = [c for c in found if c[2][1][0] == "eval"]
    assert {c[2][1][2] for c in held_out} == {4, 64}
    # claims need both of their arms run
    only = claims(ReproConfig(arms=("vanilla_grpo", "para_grpo"), eval_frame_budgets=(4,)))
    assert only and all({c[2][0], c[3][0]} <= {"vanilla_grpo", "para_grpo"} for c in only)


def test_a_recorded_run_with_one_eval_budget_still_loads():
    cfg = ReproConfig.from_saved({"recipe": "repro_cpu", "arms": ["para_grpo"], "seeds": [0, 1], "steps": None,
                                  "overrides": [], "eval_limit": None, "dispatch": ["parallel"],
                                  "eval_frame_budget": 8})  # fmt: skip
    assert cfg.eval_frame_budgets == (8,) and cfg.seeds == (0, 1) and cfg.gate is True


def test_halved_at_finds_the_step_where_tool_use_fell_to_half():
    # early mean 1.0; the 10-step running mean first drops below 0.5 when 6 zeros have entered the window
    assert halved_at([1.0] * 10 + [0.0] * 20) == 16
    assert halved_at([1.0] * 30) is None  # never fell
    assert halved_at([0.0] * 30) is None  # nothing to halve
    assert halved_at([1.0] * 5) is None  # too short to say
    assert halved_at([2.0, None] * 10 + [0.0] * 10, window=4) == 13  # missing steps are skipped


def _fake_repro(out, arms=("para_grpo", "vanilla_grpo"), seeds=(0, 1)):
    """A finished repro directory written by hand: every file the report reads, two RL steps a run."""
    from dataclasses import asdict

    cfg = ReproConfig(arms=arms, seeds=seeds, steps=2, eval_frame_budgets=(4,))
    out.mkdir(parents=True, exist_ok=True)
    (out / "repro.json").write_text(json.dumps(asdict(cfg)))
    (out / "wall_s.json").write_text(json.dumps({"arms, trained and evaluated": 12.5}))
    for arm in arms:
        for seed in seeds:
            run = out / "arms" / arm / f"seed{seed}"
            (run / "checkpoint").mkdir(parents=True)
            (run / "checkpoint" / "state.json").write_text(json.dumps({"step": 2}))
            (run / "config.json").write_text(json.dumps({"steps": 2}))
            rows = [{"step": s, "format_reward": 1.0, "format_compliance": 1.0, "tool_calls_per_rollout": 1.0 + seed,
                     "accuracy": 0.5, "reward_mean": 1.5} for s in (1, 2)]  # fmt: skip
            (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            for d in ("parallel", "sequential"):
                (run / f"eval_{d}_k4").mkdir()
                (run / f"eval_{d}_k4" / "summary.json").write_text(json.dumps({"accuracy": 0.5 + 0.1 * seed, "avg_tool_calls": 1.0, "n": 4}))
    return cfg


DAMAGE = [  # (file, what is written, the words of the error)
    ("repro.json", "[1, 2]", "repro.json: damaged, holds a JSON list where a dict belongs"),
    ("repro.json", '{"seeds": 5}', "repro.json: damaged"),
    ("wall_s.json", "{", "wall_s.json: damaged, not JSON"),
    ("wall_s.json", '{"arms": "long"}', "wall_s.json: damaged, stage 'arms' holds 'long'"),
    ("arms/para_grpo/seed1/metrics.jsonl", '{"step": 1}\n{"step": 2, "acc', "metrics.jsonl: damaged, line 2 is not JSON (cut short)"),
    ("arms/para_grpo/seed1/metrics.jsonl", b'{"step": 1, "x": "\xff"}\n', "metrics.jsonl: damaged, not UTF-8"),
    ("arms/para_grpo/seed0/eval_parallel_k4/summary.json", "", "summary.json: damaged, not JSON"),
    ("arms/para_grpo/seed0/eval_parallel_k4/summary.json", '{"accuracy": 0.5, "n": 4}', "field 'avg_tool_calls' is None"),
    ("coldstart/gate.json", "null", "gate.json: damaged, holds a JSON NoneType"),
    ("coldstart/gate.json", '{"passed": true, "checks": [{"name": "sees a crop", "what": "x", "value": "0.5", "threshold": 0.3, '
                            '"passed": true, "detail": ""}]}', "gate.json: damaged, checks[0].value is '0.5'"),
    ("coldstart/gate.json", '{"passed": "yes", "checks": []}', "gate.json: damaged, field 'passed' is 'yes'"),
    ("coldstart/gate.json", '{"passed": true, "checks": {}}', "gate.json: damaged, field 'checks' is dict, not a list"),
]


@pytest.mark.parametrize(("name", "content", "words"), DAMAGE)
def test_a_damaged_file_in_a_repro_directory_is_named(tmp_path, capsys, name, content, words):
    out = tmp_path / "repro"
    _fake_repro(out)
    assert main(["repro", "--out", str(out), "--report-only"]) == 0  # sound: the report is written
    capsys.readouterr()
    path = out / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert main(["repro", "--out", str(out), "--report-only"]) == 1
    err = capsys.readouterr().err
    assert words in err and str(path.parent) in err and "Traceback" not in err, err


def test_a_seed_whose_run_cannot_be_read_is_named_not_silently_dropped(tmp_path, capsys):
    out = tmp_path / "repro"
    _fake_repro(out)
    (out / "arms" / "para_grpo" / "seed1" / "config.json").write_text("{garbled")
    assert main(["repro", "--out", str(out), "--report-only"]) == 0
    report = (out / "report.md").read_text()
    assert "Arms with fewer finished seeds: PARA-GRPO: 0." in report
    assert "**1 run(s) not read (damaged), left out of every figure:** PARA-GRPO seed 1:" in report
    assert "seed1/config.json: damaged, not JSON" in report
    record = json.loads((out / "report.json").read_text())
    assert record["arms"]["para_grpo"]["seeds"] == [0] and record["unreadable_runs"][0]["seed"] == 1
