"""paravt.experiments.powered_goals: the powered design's goals, judged on the seeds 3-12 of its runs' files and
never on the pilots' 0-2."""

import pytest

from paravt.experiments.powered_goals import SEEDS, judge, main, to_markdown


def _report(gating_retention, vanilla_retention, gating_miss, vanilla_miss, pilot=True):
    def row(retention, miss):
        seeds = {str(s): r for s, r in zip(SEEDS, retention, strict=True)}
        misses = {str(s): m for s, m in zip(SEEDS, miss, strict=True)}
        if pilot:  # the pilots' seeds are in the same report and must be ignored
            seeds.update({"0": 99.0, "1": -99.0})
            misses.update({"0": 0.0, "1": 0.0})
        return {"probe_retention_k16": {"seeds": seeds}, "miss_crop_rate_k16": {"seeds": misses}}

    return {"goals": {"sound": {"gating_only_neutral": row(gating_retention, gating_miss),
                                "vanilla_grpo_neutral": row(vanilla_retention, vanilla_miss)}}}  # fmt: skip


def _comparison(diffs, disagree=300, pairs=2000):
    return {"seeds": list(SEEDS), "disagree": disagree, "smallest_resolvable": {"pairs": pairs},
            "per_seed": [{"seed": s, "parallel": {"accuracy": 0.6 + d}, "sequential": {"accuracy": 0.6}}
                         for s, d in zip(SEEDS, diffs, strict=True)]}  # fmt: skip


def test_a_world_with_the_claimed_effects_meets_every_goal():
    report = _report([0.6 + 0.01 * i for i in range(10)], [0.1 + 0.02 * i for i in range(10)],
                     [1.0] * 10, [0.0] * 6 + [0.9] * 4)  # fmt: skip
    result = judge(report, _comparison([0.05 + 0.01 * (i % 3) for i in range(10)]),
                   _comparison([0.1 + 0.01 * (i % 3) for i in range(10)]))  # fmt: skip
    assert [t["verdict"] for t in result["tests"]] == ["met"] * 6, result["tests"]
    a2 = next(t for t in result["tests"] if t["goal"] == "A2")
    assert "vanilla 6 of 10, gating 0 of 10" in a2["figures"]
    assert result["null_met_if_nothing_differs"] == pytest.approx(2.075)


def test_a_world_without_them_meets_none_of_the_difference_tests():
    report = _report([0.5 + 0.05 * (-1) ** i for i in range(10)], [0.5 + 0.05 * (-1) ** (i + 1) for i in range(10)],
                     [1.0] * 8 + [0.0] * 2, [1.0] * 8 + [0.0] * 2)  # fmt: skip
    result = judge(report, _comparison([0.03 * (-1) ** i for i in range(10)], disagree=50))
    verdicts = {t["goal"]: t["verdict"] for t in result["tests"]}
    assert verdicts == {"A1": "NOT met", "A2": "NOT met", "A3": "NOT met", "B1": "NOT met",
                        "B2": "no verdict (runs missing)", "B3": "NOT met"}  # fmt: skip
    assert "not resolved" in next(t for t in result["tests"] if t["goal"] == "B1")["figures"]


def test_missing_runs_give_no_verdict_and_say_so(capsys):
    result = judge({}, None)
    assert result["made"] == 0 and result["count"] == 6
    assert "0 of 10 runs evaluated" in result["tests"][1]["figures"]
    # a comparison of the pilots' seeds alone is not the design's
    pilot = _comparison([0.1] * 10)
    pilot["per_seed"] = [{**r, "seed": i} for i, r in enumerate(pilot["per_seed"][:3])]
    pilot["seeds"] = [0, 1, 2]
    assert all(t["passed"] is None for t in judge({}, pilot)["tests"] if t["goal"].startswith("B"))
    assert main([]) == 0 and "(0 of 6 tests made)" in capsys.readouterr().out
    assert "| B3 |" in to_markdown(result)
