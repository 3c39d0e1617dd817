"""paravt.experiments.repro.goals: the preregistered goals judged from what the report collects."""

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
    assert "(0 of 13 tests made)" in text and "8 of the 13 tests are one-sided tests" in text


def test_missing_arms_are_not_measured_rather_than_guessed():
    result = judge({}, {})
    assert result["made"] == 0 and result["count"] == 13
    assert "not measured" in result["tests"][0]["figures"]


def test_what_chance_gives_is_counted_for_the_tests_as_they_are():
    """Eight one-sided difference tests at 2.5 %; goals 3 and 5 are met by a run in which RL changed nothing where
    the cold start already meets them (it crops on every miss here), goal 1 never: about 4.2 of 13, not 0.65."""
    cold = {k: {"accuracy": 0.6, "avg_tool_calls": 4.0, "by_overview": {"missed": {"n": 50, "tool_usage_rate": 1.0}}}
            for k in ("16", "64")}  # fmt: skip
    c = judge(_arms(), cold)["chance"]
    assert c["one_sided_tests"] == 8 and c["no_difference"] == pytest.approx(0.2)
    assert c["do_nothing"] == pytest.approx(4.2) and c["unknown"] == 0
    assert sorted(c["met_by_the_cold_start"]) == ["goal 3 (released)", "goal 3 (tool-neutral)", "goal 5 (released)",
                                                  "goal 5 (tool-neutral)"]  # fmt: skip
    # a cold start that crops on few of its misses would not meet goal 3 by itself
    shy = {k: {**v, "by_overview": {"missed": {"n": 50, "tool_usage_rate": 0.2}}} for k, v in cold.items()}
    assert judge(_arms(), shy)["chance"]["do_nothing"] == pytest.approx(2.2)
    assert judge(_arms(), COLDSTART)["chance"]["unknown"] == 2  # its miss rates were not measured


def test_the_sound_reading_counts_collapses_exactly_and_keeps_proportions_in_range():
    cold = {k: {"accuracy": 0.6, "avg_tool_calls": 4.0, "by_overview": {"missed": {"n": 50, "tool_usage_rate": 1.0}}}
            for k in ("16", "64")}  # fmt: skip
    arms = _arms()
    rates = (0.0, 1.0, 1.0)  # bimodal over seeds: a t interval would run past 0 and 1
    for seed, rate in zip(SEEDS, rates, strict=True):
        for k in ("16", "64"):
            row = arms["vanilla_grpo_neutral"]["eval"]["parallel"][k][seed]
            row["by_overview"]["missed"]["tool_usage_rate"] = rate
            row["avg_tool_calls"] = 4.0 * rate
    sound = judge(arms, cold)["sound"]["vanilla_grpo_neutral"]
    assert sound["collapsed"]["count"] == 1 and sound["collapsed"]["n"] == 3
    assert sound["collapsed"]["low"] == pytest.approx(0.0084, abs=1e-4) and sound["collapsed"]["high"] == pytest.approx(0.9057, abs=1e-4)
    miss = sound["miss_crop_rate_k16"]
    assert miss["mean"] == pytest.approx(2 / 3) and 0.0 <= miss["low"] <= miss["high"] <= 1.0
    assert sound["probe_retention_k16"]["seeds"] == {0: 0.0, 1: 1.0, 2: 1.0}
    text = "\n".join(to_markdown(judge(arms, cold)))
    assert "| vanilla_grpo_neutral |" in text and "1 of 3 [0.01, 0.91]" in text
