"""``summary.json``'s wall time is measured, not summed: the union of the episodes' intervals, with the plain sum
named as such; latency percentiles beside the cost means."""

import json
import time

import pytest

from paravt.baselines import make_baseline
from paravt.evaluation.harness import evaluate
from paravt.evaluation.report import elapsed_s, percentile, summarize
from paravt_env import EnvConfig


def row(start, end, wall=None):
    return {"id": f"{start}", "question_type": "oe", "score": 1.0, "correct": True, "tool_calls": 0, "turns": 1,
            "wall_s": end - start if wall is None else wall, "started_at": start, "ended_at": end}  # fmt: skip


def test_episodes_played_at_once_count_once_and_gaps_between_invocations_not_at_all():
    rows = [row(0, 10), row(2, 8), row(5, 12), row(100, 101)]  # three at once, then a resumed run's one
    assert elapsed_s(rows) == pytest.approx(13.0)
    summary = summarize(rows)
    assert summary["wall_s"] == pytest.approx(13.0) and summary["wall_s_episodes_sum"] == pytest.approx(24.0)
    # a row written before the times were recorded adds its own seconds
    old = {k: v for k, v in row(0, 3).items() if k not in ("started_at", "ended_at")}
    assert elapsed_s([*rows, old]) == pytest.approx(16.0)


def test_percentiles_are_linear_between_order_statistics():
    assert percentile([], 50) is None
    assert percentile([3.0], 95) == 3.0
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile(list(range(101)), 95) == pytest.approx(95.0)


def test_a_batched_evaluation_reports_its_elapsed_time_not_the_sum(synth_small, tmp_path):
    _, samples = synth_small
    config = EnvConfig(frame_budget=4, crop_max_frames=3, crop_budget=2)
    t0 = time.time()
    summary = evaluate(samples, lambda: make_baseline("detector"), tmp_path / "ev", config, concurrency=4, progress=False)
    measured = time.time() - t0
    assert summary["wall_s"] <= measured and summary["wall_s"] < summary["wall_s_episodes_sum"]
    saved = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert saved["wall_s"] == summary["wall_s"]
    assert saved["cost"]["wall_s_p50"] <= saved["cost"]["wall_s_p95"]


def test_exact_binomial_and_bootstrap_intervals_stay_within_zero_and_one():
    from paravt.evaluation.stats import bootstrap_ci, clopper_pearson, minimum_detectable, pairs_for_power

    assert clopper_pearson(0, 10) == (0.0, pytest.approx(0.3085, abs=1e-4))  # the rule of three's exact cousin
    lo, hi = clopper_pearson(3, 10)
    assert (lo, hi) == (pytest.approx(0.0667, abs=1e-4), pytest.approx(0.6525, abs=1e-4))
    assert clopper_pearson(10, 10)[1] == 1.0
    with pytest.raises(ValueError, match="0 <= k <= n"):
        clopper_pearson(4, 3)
    b = bootstrap_ci([0.0, 1.0, 1.0])
    assert b["mean"] == pytest.approx(2 / 3) and b["low"] == 0.0 and b["high"] == 1.0
    assert bootstrap_ci([0.0, 1.0, 1.0]) == b  # a fixed seed: it recomputes exactly
    assert bootstrap_ci([0.5])["low"] is None
    # power: 80 % at one-sided 2.5 % needs ((1.96 + 0.84) sd / effect)^2 + 1 pairs; the inverse gives the effect back
    assert pairs_for_power(0.1, 0.1) == 9
    assert minimum_detectable(9, 0.1) == pytest.approx(2.801585 * 0.1 / 8**0.5, abs=1e-6)  # 0.0990: back to ~0.1


def test_fishers_exact_test_and_its_power():
    from paravt.evaluation.stats import fisher_one_sided, fisher_power

    assert fisher_one_sided(5, 10, 0, 10) == pytest.approx(0.01625, abs=1e-5)  # 5 of 10 against 0 of 10
    assert fisher_one_sided(3, 10, 0, 10) == pytest.approx(0.1053, abs=1e-4)
    assert fisher_one_sided(0, 10, 0, 10) == 1.0
    assert fisher_power(0.5, 0.02, 10) == pytest.approx(0.539, abs=1e-3)
    assert fisher_power(0.02, 0.02, 10) < 0.025  # no difference: at most the level
    assert fisher_power(0.5, 0.02, 20) > fisher_power(0.5, 0.02, 10)
