import pytest

from paravt_env.rewards import (
    format_reward,
    has_nonempty_answer,
    has_parseable_tool_call,
    has_substantive_think,
    think_before_tool,
    tool_reward,
)

CALL = '<tool_call>{"name": "crop_video", "arguments": {"start_time": 1, "end_time": 5}}</tool_call>'
ANSWERED = "<think>The red circle is at 41 s.</think><answer>A</answer>"
CALLING = "<think>I should crop the video.</think>" + CALL
PARAVT = {"answer_suffix": True, "anchor_weight": 0.5}
VANILLA = {"answer_suffix": False, "anchor_weight": 0.0}


@pytest.mark.parametrize(
    ("completion", "paravt", "vanilla"),
    [
        # think .2 + answer .3 + .2, anchor .5*(.4+.3), balanced .1 -> 1.15 capped | .3+.2+.1 +.1
        (ANSWERED, 1.0, 0.7),
        # think .2, anchor .5*.4, think-before-tool .3, balanced .1 | .3 + .3 + .1
        (CALLING, 0.8, 0.7),
        # unclosed think still counts as think; anchor penalty .5*-.3; unbalanced
        ("<think>unclosed thinking here and more", 0.2 - 0.15, 0.3),
        # think under 10 characters earns nothing; nothing earned -> no balance bonus
        ("<think>short</think>", 0.0, 0.0),
        # a lone <think> is penalised below zero by anchoring
        ("<think>", -0.15, 0.0),
        # empty answer tags earn nothing: think .2 + anchor .2 + balanced .1 | .3 + .1
        ("<think>Looking closely now.</think><answer> </answer>", 0.5, 0.4),
        # answer without think: .3+.2 +.1 | .2+.1 +.1
        ("<answer>B</answer>", 0.6, 0.4),
        # unbalanced answer tags: .3 (no </answer>) and no balance bonus
        ("<answer>B</answer><answer>C", 0.5, 0.3),
        ("", 0.0, 0.0),
    ],
)
def test_format_reward_hand_computed(completion, paravt, vanilla):
    assert format_reward(completion, **PARAVT) == pytest.approx(paravt, abs=1e-12)
    assert format_reward(completion, **VANILLA) == pytest.approx(vanilla, abs=1e-12)


def test_anchor_weight_scales_the_bonus():
    # answer_suffix off, λ = 1: .3 + .2 + .1 + (.4 + .3) + .1 = 1.4 -> capped at 1
    assert format_reward(ANSWERED, answer_suffix=False, anchor_weight=1.0) == 1.0
    # λ = .2 on the calling turn: .2 + .2*.4 + .3 + .1
    assert format_reward(CALLING, answer_suffix=True, anchor_weight=0.2) == pytest.approx(0.68, abs=1e-12)


def test_think_predicate_uses_first_closed_block_else_open_block():
    assert has_substantive_think("<think>0123456789</think>")
    assert not has_substantive_think("<think>   012345678   </think>")
    assert not has_substantive_think("<think>tiny</think><think>long enough here</think>")  # first closed one
    assert has_substantive_think("<think>long enough thought<tool_call>")
    assert not has_substantive_think("<think>tiny<answer>much more text after the tag</answer>")


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (CALL, True),
        ('<tool_call>{"name": "anything"}', True),  # unclosed body runs to the end
        ('<tool_call>{"arguments": {}}</tool_call>', False),  # no name
        ("<tool_call>[1, 2]</tool_call>", False),
        ("<tool_call></tool_call>", False),
        ('<tool_call><|im_end|>{"name": "x"}</tool_call>', False),
        ("<tool_code>crop_video(1, 2)</tool_code>", True),
        ("<tool_code># crop_video(1, 2)\n</tool_code>", False),
        ("<tool_code>crop video 1 2</tool_code>", False),
        ("<tool_code>\n\n  x(</tool_code>", True),
        ("<tool_call>" + "[" * 100000, False),  # the release would hit RecursionError
    ],
)
def test_parseable_tool_call(completion, expected):
    assert has_parseable_tool_call(completion) is expected


def test_answer_and_order_predicates():
    assert has_nonempty_answer("<answer> </answer><answer>x</answer>")
    assert not has_nonempty_answer("<answer> \n</answer><answer>x")
    assert think_before_tool(CALLING)
    assert not think_before_tool(CALL + "<think>later</think>")
    assert not think_before_tool("<think>no tool</think>")


@pytest.mark.parametrize(
    ("completion", "accuracy", "expected"),
    [
        ("no tools", 1.0, 0.0),
        (CALL, 0.0, 0.1),
        (CALL, 0.25, 0.6),
        (CALL + "<tool_response>x</tool_response>", 0.0, 0.3),
        (CALL + "<tool_response>", 1.0, 0.8),
        ("<tool_call></tool_call><tool_response>", 1.0, 0.0),
    ],
)
def test_tool_reward_release_levels(completion, accuracy, expected):
    assert tool_reward(completion, accuracy) == pytest.approx(expected, abs=1e-12)


def test_tool_reward_from_executed_crops():
    assert tool_reward(CALL, 1.0, source="executed", executed_tool_calls=2) == pytest.approx(0.8)
    assert tool_reward(CALL, 0.0, source="executed", executed_tool_calls=0) == pytest.approx(0.1)
    assert tool_reward("no call", 1.0, source="executed", executed_tool_calls=0) == 0.0
    with pytest.raises(ValueError, match="executed_tool_calls"):
        tool_reward(CALL, 1.0, source="executed")
    with pytest.raises(ValueError, match="'sometimes'"):
        tool_reward(CALL, 1.0, source="sometimes")


def test_the_prefix_scored_variant_scores_the_forced_think_as_the_policys_opening_tag(tmp_path):
    """The release scores only generated text: after a forced "<think>\\n" a bare answer outscores a closed
    think block. The variant scores the prefix too, so the compliant turn wins (the paper's intent)."""
    from paravt_env import EnvConfig, VideoQASample, VideoToolEnv
    from paravt_env.data.synth_plan import SynthConfig
    from paravt_env.data.synthetic import generate_dataset
    from paravt_env.rewards import RewardConfig

    [sample] = generate_dataset(tmp_path, SynthConfig(n=1, seed=3, min_duration=20, max_duration=20), progress=False)
    assert isinstance(sample, VideoQASample)
    bare, closed = f"<think>\n<answer>{sample.answer}</answer>", f"<think>\nI saw it clearly.</think>\n<answer>{sample.answer}</answer>"
    scores = {}
    for name, reward in (("release", RewardConfig.paravt()), ("scored", RewardConfig.paravt_prefix_scored())):
        env = VideoToolEnv([sample], EnvConfig(frame_budget=4, response_prefix="<think>\n", reward=reward))
        for label, action in (("bare", bare), ("closed", closed)):
            env.reset(options={"index": 0})
            *_, info = env.step(action)
            scores[name, label] = info["reward_breakdown"]["format"]
        env.close()
    assert scores["release", "bare"] == pytest.approx(0.6) and scores["release", "closed"] == pytest.approx(0.5)
    assert scores["scored", "bare"] == pytest.approx(0.35) and scores["scored", "closed"] == pytest.approx(1.0)
    assert RewardConfig.from_dict({"preset": "paravt_prefix_scored"}) == RewardConfig.paravt_prefix_scored()


CROP = ('<think>\nThe overview shows no coloured shape. I will inspect 1 window.</think>\n'
        '<tool_call>{"name": "crop_video", "arguments": {"start_time": 0, "end_time": 20}}</tool_call>')


def test_the_released_cap_hides_an_unclosed_second_think_and_the_variant_does_not():
    """Why RL drifts into ``<think>\\n<think>\\n...`` turns on the tiny model: under the release's reward the
    +0.1 for balanced tags is added before the cap, and a well-formed episode with the anchor bonus is already
    past 1.0, so the unbalanced one scores the same. ``balance_after_cap`` (a variant) makes it cost 0.1."""
    from paravt_env.rewards import RewardConfig, compute_reward

    clean = CROP + "<think>\nThe crops show a red shape.</think>\n<answer>red</answer>"
    doubled = CROP + "<think>\n<think>\nThe crops show a red shape.</think>\n<answer>red</answer>"
    release, variant = RewardConfig.paravt(), RewardConfig(balance_after_cap=True)
    for config, gap in ((release, 0.0), (variant, 0.1)):
        c = compute_reward(clean, "red", "oe", config=config).format
        d = compute_reward(doubled, "red", "oe", config=config).format
        assert c == pytest.approx(1.0) and c - d == pytest.approx(gap)
    # every other episode scores as the release scores it while the rest stays under 0.9
    for text in ("<think>\n<answer>cyan</answer>", "<answer>red</answer>", CROP, "plain text"):
        assert compute_reward(text, "red", "oe", config=variant).format == compute_reward(text, "red", "oe", config=release).format


def test_the_release_ignores_a_broken_call_beside_a_good_one_and_the_variant_counts_each():
    """Under the release's scoring a broken call beside a good one costs nothing: the +0.3 for a call needs one
    call to parse, and the answer turn reaches the cap without it. ``broken_call_penalty`` (a variant) takes that
    much off per broken ``<tool_call>``, after the cap."""
    from paravt_env.rewards import RewardConfig, compute_reward
    from paravt_env.rewards.format import broken_tool_calls

    answer = "<think>\nThe crops show a red shape.</think>\n<answer>red</answer>"
    bad_number = '<tool_call>{"name": "crop_video", "arguments": {"start_time": 80.0, "end_time": 10.0.0}}</tool_call>'
    clean = CROP + answer
    one_broken = CROP.replace("</tool_call>", "</tool_call>\n" + bad_number) + answer
    two_broken = CROP.replace("</tool_call>", "</tool_call>\n" + bad_number + "\n<tool_call></tool_call>") + answer
    assert [broken_tool_calls(t) for t in (clean, one_broken, two_broken)] == [0, 1, 2]
    assert broken_tool_calls('<tool_call>{"arguments": {}}</tool_call><tool_call>{"name": "crop_video"') == 2
    release, variant = RewardConfig.paravt(), RewardConfig.paravt_prefix_scored()
    variant = RewardConfig(**{**variant.as_dict(), "broken_call_penalty": 0.1})
    scores = {name: [compute_reward(t, "red", "oe", config=c).format for t in (clean, one_broken, two_broken)]
              for name, c in (("release", release), ("variant", variant))}  # fmt: skip
    assert scores["release"] == pytest.approx([1.0, 1.0, 1.0])
    assert scores["variant"] == pytest.approx([1.0, 0.9, 0.8])
    # without broken calls the variant scores as the release does
    for text in ("<think>\n<answer>cyan</answer>", "<answer>red</answer>", CROP, "plain text", clean):
        assert compute_reward(text, "red", "oe", config=RewardConfig(broken_call_penalty=0.1)).format == \
            compute_reward(text, "red", "oe", config=release).format
    with pytest.raises(ValueError, match="broken_call_penalty must be >= 0"):
        RewardConfig(broken_call_penalty=-0.1)

