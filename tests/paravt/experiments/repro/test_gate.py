"""paravt.experiments.repro.gate: the thresholds, the saved result and the message (the measuring itself runs
end to end in test_report.py's smoke repro)."""

import json
from dataclasses import asdict

import pytest

from paravt.experiments.repro import gate as gate_module
from paravt.experiments.repro.arms import ReproConfig
from paravt.experiments.repro.gate import (
    GateConfig,
    GateFailed,
    best_constant_rate,
    gate_path,
    kappa_seeds_for,
    run_gate,
)
from paravt_env.data import VideoQASample


def _result(passed: bool, gate: GateConfig, seeds=None) -> dict:
    seeds = kappa_seeds_for(ReproConfig().seeds, gate.kappa_seeds) if seeds is None else seeds
    value = 0.5 if passed else 0.1
    checks = [{"name": "sees a crop", "what": "oracle - grey", "value": value, "threshold": gate.min_crop_lift,
               "passed": value >= gate.min_crop_lift, "detail": "oracle 0.6, grey 0.5"}]  # fmt: skip
    return {"passed": passed, "checks": checks, "gate": json.loads(json.dumps(asdict(gate))), "seeds": list(seeds), "n": 40,
            "version": gate_module.GATE_VERSION}


def test_a_saved_gate_is_reused_only_for_the_same_thresholds_and_seeds(tmp_path, monkeypatch):
    cfg, gate = ReproConfig(), GateConfig()
    gate_path(tmp_path).parent.mkdir(parents=True)
    gate_path(tmp_path).write_text(json.dumps(_result(True, gate)))
    calls = []
    monkeypatch.setattr(gate_module, "measure", lambda out, cfg, gate, progress: calls.append(gate) or _result(True, gate))
    assert run_gate(tmp_path, cfg, gate)["passed"] and not calls
    stricter = GateConfig(min_crop_lift=0.6)
    run_gate(tmp_path, cfg, stricter)
    assert calls == [stricter]  # other thresholds: measured again, and saved
    assert json.loads(gate_path(tmp_path).read_text())["gate"]["min_crop_lift"] == 0.6
    run_gate(tmp_path, ReproConfig(seeds=(5, 6, 7)), stricter)
    assert len(calls) == 2  # other RL seeds: the step-1 κ is another measurement
    monkeypatch.setattr(gate_module, "GATE_VERSION", gate_module.GATE_VERSION + 1)
    run_gate(tmp_path, ReproConfig(seeds=(5, 6, 7)), stricter)
    assert len(calls) == 3  # figures measured another way are measured again


@pytest.mark.parametrize("damage", ["{cut", '{"passed": true, "checks": [{"value": "0.5"}]}'])
def test_a_damaged_gate_is_named_and_never_overwritten(tmp_path, monkeypatch, damage):
    from paravt_env.storage import DamagedFile

    gate_path(tmp_path).parent.mkdir(parents=True)
    gate_path(tmp_path).write_text(damage)
    monkeypatch.setattr(gate_module, "measure", lambda *a, **k: pytest.fail("a damaged gate was measured over"))
    with pytest.raises(DamagedFile, match="gate.json: damaged.*move it aside"):
        run_gate(tmp_path, ReproConfig(), GateConfig())
    assert gate_path(tmp_path).read_text() == damage


def test_kappa_is_sampled_at_the_runs_own_seeds_first_then_at_unused_ones():
    """The κ check sees the step 1 the run's arms train on, and enough more batches that one lucky or unlucky
    8-rollout step does not decide it (vanilla GRPO's step-1 κ ranged 0.25-2.62 over 13 seeds)."""
    assert GateConfig().kappa_seeds >= 8
    assert kappa_seeds_for([0, 1, 2], 8) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert kappa_seeds_for([5, 3], 4) == [5, 3, 0, 1]
    assert kappa_seeds_for([2, 2, 9], 3) == [2, 9, 0]  # a repeated seed is one batch, not two
    assert kappa_seeds_for(list(range(10, 20)), 3) == [10, 11, 12]


def test_a_failed_gate_stops_naming_each_failed_check_unless_told_to_go_on(tmp_path, caplog):
    gate = GateConfig()
    gate_path(tmp_path).parent.mkdir(parents=True)
    gate_path(tmp_path).write_text(json.dumps(_result(False, gate)))
    with pytest.raises(GateFailed, match=r"sees a crop: oracle - grey = 0\.100 < 0\.300 \(oracle 0\.6, grey 0\.5\)"):
        run_gate(tmp_path, ReproConfig(), gate)
    assert run_gate(tmp_path, ReproConfig(), gate, enforce=False)["passed"] is False
    assert "--no-gate: going on" in caplog.text


def test_the_constant_rate_is_the_best_single_answer():
    def s(i, answer):
        return VideoQASample(id=str(i), video_path="v.mp4", question="q", answer=answer, question_type="oe")

    samples = [s(0, "red"), s(1, "red"), s(2, "blue"), s(3, "green")]
    assert best_constant_rate(samples) == pytest.approx(0.5)
    assert best_constant_rate([]) == 0.0


def test_a_gate_saved_before_the_habit_check_is_reused_unless_the_check_is_asked_for(tmp_path, monkeypatch):
    cfg = ReproConfig()
    saved = _result(True, GateConfig())
    del saved["gate"]["min_crop_habit"]  # what a gate.json written before the habit check holds
    gate_path(tmp_path).parent.mkdir(parents=True)
    gate_path(tmp_path).write_text(json.dumps(saved))
    calls = []
    monkeypatch.setattr(gate_module, "measure", lambda out, cfg, gate, progress: calls.append(gate) or _result(True, gate))
    run_gate(tmp_path, cfg, GateConfig())
    assert not calls  # the committed repro reports keep their gate
    run_gate(tmp_path, cfg, GateConfig(min_crop_habit=0.5))
    assert [g.min_crop_habit for g in calls] == [0.5]


@pytest.mark.parametrize(("rate", "passed"), [(0.55, True), (0.45, False)])
def test_the_habit_check_reads_the_cold_starts_greedy_evaluation_at_the_gates_k(tmp_path, monkeypatch, rate, passed):
    from paravt.experiments.repro import evaluations

    asked = []

    def evaluated(model, heldout, target, cfg, **kwargs):  # the evaluation itself: tested in the harness
        asked.append((target.name, kwargs))
        target.mkdir(parents=True, exist_ok=True)
        split = {"showed": {"n": 30, "tool_usage_rate": 0.4}, "missed": {"n": 10, "tool_usage_rate": 1.0}}
        (target / "summary.json").write_text(json.dumps({"n": 40, "tool_usage_rate": rate, "avg_tool_calls": 2.2,
                                                         "by_overview": split}))  # fmt: skip

    monkeypatch.setattr(evaluations, "evaluate_policy", evaluated)
    assert gate_module._habit_checks(tmp_path, ReproConfig(), GateConfig()) == []  # not asked for: not measured
    (check,) = gate_module._habit_checks(tmp_path, ReproConfig(), GateConfig(min_crop_habit=0.5))
    # the report's own K = 64 evaluation, with no bar unless the caller shows progress (``paravt repro --no-progress``
    # printed this evaluation's bar into its log)
    assert asked == [("eval_parallel_k64", {"frame_budget": 64, "progress": False})]
    gate_module._habit_checks(tmp_path, ReproConfig(), GateConfig(min_crop_habit=0.5), progress=True)
    assert asked[-1] == ("eval_parallel_k64", {"frame_budget": 64, "progress": True})
    assert (check["name"], check["value"], check["threshold"], check["passed"]) == ("calls by habit", rate, 0.5, passed)
    assert "overview showed the event: 0.400 of 30" in check["detail"] and "missed the event: 1.000 of 10" in check["detail"]
