import pytest

from paravt_env.rewards import RewardBreakdown, RewardConfig, compute_reward

CALL = '<tool_call>{"name": "crop_video", "arguments": {"start_time": 1, "end_time": 5}}</tool_call>'
ANSWERED = "<think>The red circle is at 41 s.</think><answer>A</answer>"
TWO_TURNS = (
    "<think>I should crop the video.</think>"
    + CALL
    + "<think>The frames show a circle.</think><answer>B</answer>"
)


def test_presets_are_the_released_recipes():
    assert RewardConfig.paravt() == RewardConfig(True, 0.5, 1.0, "f1")
    assert RewardConfig.vanilla() == RewardConfig(False, 0.0, 1.0, "f1")
    assert RewardConfig.paravt().tool_source == "completion"


def test_answered_mcq():
    assert compute_reward(ANSWERED, "A", "mcq", RewardConfig.paravt()) == RewardBreakdown(2.0, 1.0, 1.0, 0.0)
    r = compute_reward(ANSWERED, "A", "mcq", RewardConfig.vanilla())
    assert (r.total, r.accuracy, r.format, r.tool) == pytest.approx((1.7, 1.0, 0.7, 0.0), abs=1e-12)
    wrong = compute_reward(ANSWERED, "C", "mcq", RewardConfig.paravt())
    assert (wrong.total, wrong.accuracy) == (1.0, 0.0)


def test_tool_using_episode():
    # format capped at 1; tool .1 (parseable call, no <tool_response> in the generated text) + .5 (correct)
    r = compute_reward(TWO_TURNS, "B", "mcq", RewardConfig.paravt())
    assert (r.total, r.accuracy, r.format, r.tool) == pytest.approx((2.6, 1.0, 1.0, 0.6), abs=1e-12)
    # the executed-crops option credits the crops the env really ran
    executed = RewardConfig(True, 0.5, 1.0, "f1", tool_source="executed")
    r = compute_reward(TWO_TURNS, "B", "mcq", executed, executed_tool_calls=2)
    assert (r.total, r.tool) == pytest.approx((2.8, 0.8), abs=1e-12)
    r = compute_reward(TWO_TURNS, "B", "mcq", executed, executed_tool_calls=0)
    assert r.tool == pytest.approx(0.6, abs=1e-12)


def test_format_weight_scales_format_only():
    r = compute_reward(ANSWERED, "A", "mcq", RewardConfig(True, 0.5, 0.5, "f1"))
    assert (r.total, r.format) == (1.5, 1.0)


def test_degenerate_completion_scores_zero():
    spam = "<|im_start|>" * 5 + "<answer>A</answer>"
    assert compute_reward(spam, "A", "mcq", RewardConfig.paravt()) == RewardBreakdown(0.0, 0.0, 0.0, 0.0)
    long_spam = spam + "x" * 300  # 300+ characters is not degenerate
    assert compute_reward(long_spam, "A", "mcq", RewardConfig.paravt()).accuracy == 1.0


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("f1", 0.5), ("exact", 0.0), ("llm", 0.5)],  # llm without an endpoint falls back to F1
)
def test_open_ended_modes(mode, expected, monkeypatch):
    monkeypatch.delenv("LLM_JUDGE_BASE_URL", raising=False)
    r = compute_reward(
        "<answer>a red square</answer>", "red circle", "oe", RewardConfig(True, 0.5, 1.0, mode)
    )
    assert r.accuracy == pytest.approx(expected, abs=1e-12)


def test_normalised_match_wins_for_any_type():
    # "[10, 20]" and "10, 20" both normalise to "10 20"
    assert compute_reward("<answer>10, 20</answer>", "[10, 20]", "tvg").accuracy == 1.0
    assert compute_reward("<answer>[12, 18]</answer>", "[10, 20]", "tvg").accuracy == pytest.approx(0.6)
    assert compute_reward("<answer>The blue square.</answer>", "blue square", "mcq").accuracy == 1.0


def test_empty_sides_score_no_accuracy():
    assert compute_reward("<answer></answer>", "A", "mcq").accuracy == 0.0
    assert compute_reward("<answer>A</answer>", "", "mcq").accuracy == 0.0
    assert compute_reward("<answer>A</answer>", None, "mcq").accuracy == 0.0


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="mode"):
        RewardConfig(True, 0.5, 1.0, "bleu")
    with pytest.raises(ValueError, match="anchor_weight"):
        RewardConfig(True, float("nan"), 1.0, "f1")
    with pytest.raises(ValueError, match="tool_source"):
        RewardConfig(tool_source="maybe")


def test_config_from_recipe_block():
    assert RewardConfig.from_dict({"preset": "vanilla", "mode": "exact"}) == RewardConfig(
        False, 0.0, 1.0, "exact"
    )
    assert RewardConfig.from_dict({"anchor_weight": 0.3}).anchor_weight == 0.3
    with pytest.raises(ValueError, match="'anchor'"):
        RewardConfig.from_dict({"anchor": 0.3})
    with pytest.raises(ValueError, match="'grpo'"):
        RewardConfig.from_dict({"preset": "grpo"})
