"""paravt.experiments.repro.goals: issue 62's preregistered goals judged from what the report collects."""

import copy

import pytest

from paravt.experiments.repro.goals import judge, retention, to_markdown

SEEDS = (0, 1, 2)
BASE = {"vanilla_grpo": dict(kappa=(2.0, 0.2), fmt=0.4, acc=0.60, miss=0.3),
        "ea_only": dict(kappa=(2.0, 0.4), fmt=0.7, acc=0.65, miss=0.5),
        "gating_only": dict(kappa=(2.0, 1.6), fmt=0.5, acc=0.70, miss=0.9),
        "para_grpo": dict(kappa=(2.0, 1.8), fmt=0.8, acc=0.75, miss=0.95)}  # fmt: skip


def _arm(kappa, fmt, acc, miss, jitter):
    per_seed, evals = {}, {"16": {}, "64": {}}
    for i, seed in enumerate(SEEDS):
        d = jitter * (i - 1)  # a spread over seeds, so that intervals have a width
        per_seed[seed] = {"tool_calls_per_rollout": {"first": kappa[0], "last": kappa[1] + d},
                          "format_compliance": {"first": 0.8, "last": fmt + d}}  # fmt: skip
        for k in evals:
            evals[k][seed] = {"accuracy": acc + d, "n": 200,
                              "by_overview": {"missed": {"n": 60, "tool_usage_rate": miss + d}, "showed": {"n": 140}}}  # fmt: skip
    return {"per_seed": per_seed, "eval": {"parallel": evals}}


def _arms(changes=None, jitter=0.01):
    spec = copy.deepcopy(BASE)
    for arm, fields in (changes or {}).items():
        spec[arm].update(fields)
    arms = {}
    for sfx in ("", "_neutral"):
        for name, fields in spec.items():
            arms[name + sfx] = _arm(**fields, jitter=jitter)
    return arms


COLDSTART = {"16": {"accuracy": 0.55}, "64": {"accuracy": 0.7}}


def test_a_design_that_meets_every_goal_is_judged_met_on_all_thirteen():
    result = judge(_arms(), COLDSTART)
    assert result["count"] == 13 and result["made"] == 13
    assert [t["verdict"] for t in result["tests"]] == ["met"] * 13, [t for t in result["tests"] if t["verdict"] != "met"]
    assert retention(_arms()["vanilla_grpo"]) == pytest.approx({0: 0.095, 1: 0.1, 2: 0.105})


@pytest.mark.parametrize(("changes", "goal", "reward"), [
    ({"vanilla_grpo": {"kappa": (2.0, 0.6)}}, 1, "tool-neutral"),  # retention 0.3: no collapse
    ({"gating_only": {"kappa": (2.0, 0.9)}}, 2, "released"),  # retention 0.45 < 0.5
    ({"gating_only": {"miss": 0.7}}, 3, "tool-neutral"),  # crops on 0.7 of misses
    ({"para_grpo": {"fmt": 0.4}}, 4, "released"),  # no better format than vanilla
    ({"ea_only": {"acc": 0.45}}, 5, "released"),  # below the cold start's 0.55 at K = 16
    ({"para_grpo": {"acc": 0.60}}, 6, "tool-neutral"),  # the headline: no difference
])  # fmt: skip
def test_each_goal_fails_when_its_figures_miss_the_threshold(changes, goal, reward):
    tests = judge(_arms(changes), COLDSTART)["tests"]
    failed = {(t["goal"], t["reward"]) for t in tests if t["verdict"] == "NOT met"}
    assert (goal, reward) in failed
    assert all(t["verdict"] == "met" for t in tests if t["goal"] != goal)


def test_with_one_seed_no_verdict_is_given_and_the_count_says_so():
    arms = _arms()
    for arm in arms.values():
        arm["per_seed"] = {0: arm["per_seed"][0]}
        for k in arm["eval"]["parallel"]:
            arm["eval"]["parallel"][k] = {0: arm["eval"]["parallel"][k][0]}
    result = judge(arms, COLDSTART)
    assert result["made"] == 0 and {t["verdict"] for t in result["tests"]} == {"no verdict (fewer than 2 seeds, or not measured)"}
    text = "\n".join(to_markdown(result))
    assert "(0 of 13 tests made)" in text and "about 0.7 of them would come out" in text


def test_missing_arms_are_not_measured_rather_than_guessed():
    result = judge({}, {})
    assert result["made"] == 0 and result["count"] == 13
    assert "not measured" in result["tests"][0]["figures"]
