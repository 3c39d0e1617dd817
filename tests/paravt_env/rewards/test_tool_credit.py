"""RewardConfig.tool_credit: the tool-neutral variant, where calling earns nothing as such."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paravt_env.rewards import RewardConfig, compute_reward

CALL = '<tool_call>{"name": "crop_video", "arguments": {"start_time": 10, "end_time": 30}}</tool_call>'
# four minimal episodes: a crop turn then an answer, or the answer alone
CALLED = "<think>The overview may miss it; crop.</think>" + CALL + "<think>The crop shows red.</think><answer>red</answer>"
SKIPPED = "<think>The overview shows red.</think><answer>red</answer>"
PRESETS = {"paravt": RewardConfig.paravt(), "prefix_scored": RewardConfig.paravt_prefix_scored(),
           "vanilla": RewardConfig.vanilla()}  # fmt: skip


def _total(completion: str, answer: str, config: RewardConfig, executed: int) -> float:
    return compute_reward(completion, answer, "open_ended", config, executed_tool_calls=executed).total


def test_the_released_reward_pays_for_a_redundant_call():
    """What the variant removes: at equal accuracy a call earns +0.9 (vanilla) or +0.6 (PARA-GRPO)."""
    assert _total(CALLED, "red", PRESETS["vanilla"], 1) == pytest.approx(2.6)
    assert _total(SKIPPED, "red", PRESETS["vanilla"], 0) == pytest.approx(1.7)
    assert _total(CALLED, "red", PRESETS["paravt"], 1) == pytest.approx(2.6)
    assert _total(SKIPPED, "red", PRESETS["paravt"], 0) == pytest.approx(2.0)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("source", ["completion", "executed"])
@pytest.mark.parametrize("answer", ["red", "blue"])  # right and wrong
def test_without_tool_credit_calling_earns_nothing_at_equal_accuracy(preset, source, answer):
    config = dataclasses.replace(PRESETS[preset], tool_source=source, tool_credit=False)
    called = compute_reward(CALLED, answer, "open_ended", config, executed_tool_calls=1)
    skipped = compute_reward(SKIPPED, answer, "open_ended", config, executed_tool_calls=0)
    assert called.tool == skipped.tool == 0.0
    assert called.accuracy == skipped.accuracy
    assert called.total == pytest.approx(skipped.total)
    # and accuracy still pays: a right answer outscores a wrong one by its accuracy
    other = "blue" if answer == "red" else "red"
    flipped = compute_reward(SKIPPED, other, "open_ended", config, executed_tool_calls=0)
    assert abs(skipped.total - flipped.total) == pytest.approx(1.0)


def test_tool_credit_must_be_a_bool():
    with pytest.raises(ValueError, match="tool_credit must be true or false"):
        RewardConfig(tool_credit="no")
    assert RewardConfig.from_dict({"preset": "vanilla", "tool_credit": False}).tool_credit is False


PIECES = ["<think>", "</think>", CALL, "<tool_call>{}</tool_call>", "<answer>", "</answer>", "red", " x ", "\n"]


@given(st.lists(st.sampled_from(PIECES), max_size=12).map("".join), st.integers(0, 3))
def test_the_variant_never_scores_above_the_released_reward(text, executed):
    """Removing credit only removes: the variant's total is the released total less its tool term and at most the
    +0.3 think-before-call format credit."""
    for config in PRESETS.values():
        full = compute_reward(text, "red", "open_ended", config, executed_tool_calls=executed)
        neutral = compute_reward(text, "red", "open_ended", dataclasses.replace(config, tool_credit=False),
                                 executed_tool_calls=executed)  # fmt: skip
        assert neutral.accuracy == full.accuracy and neutral.tool == 0.0
        assert full.total - full.tool - 0.3 - 1e-9 <= neutral.total <= full.total - full.tool + 1e-9
