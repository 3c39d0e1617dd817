"""Property tests: neither the parser nor the reward raises, and rewards stay finite and bounded, on any text."""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paravt_env.protocol import parse_response
from paravt_env.rewards import RewardConfig, compute_reward, extract_answer

TOKENS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_code>",
    "</tool_code>",
    "<answer>",
    "</answer>",
    "<tool_response>",
    "</tool_response>",
    "<|im_end|>",
    "<|im_start|>",
    "\n",
    " ",
    "crop_video(",
    ")",
    "{",
    "}",
    '"name"',
    ":",
    ",",
    '"arguments"',
    '"start_time"',
    '"end_time"',
    "1e309",
    "NaN",
    "-3",
    "01:05",
    "[",
    "]",
    "A",
    "B",
    "The answer is",
    "Option",
    "red circle",
    "the",
    "[1.5, 2.5]",
    ".",
    "#",
    "'",
    "\x00",
    "\u2028",
]
protocol_text = st.lists(st.one_of(st.sampled_from(TOKENS), st.text(max_size=12)), max_size=40).map("".join)
any_text = st.one_of(st.text(max_size=400), protocol_text)
CONFIGS = [
    RewardConfig.paravt(),
    RewardConfig.vanilla(),
    RewardConfig(True, 2.0, 0.5, "exact"),
    RewardConfig(False, 0.5, 1.0, "llm", tool_source="executed"),
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=any_text)
def test_parser_never_raises_and_spans_point_at_tags(text):
    p = parse_response(text)
    for span in p.spans:
        assert text[span.start : span.end] == span.tag
    for call in p.tool_calls:
        assert 0 <= call.span[0] < call.span[1] <= len(text)
        assert call.error is None or isinstance(call.error, str)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    completion=any_text,
    answer=st.one_of(st.sampled_from(["A", "B", "[1.5, 2.5]", "red circle", ""]), st.text(max_size=20)),
    question_type=st.sampled_from(["mcq", "tvg", "oe", "other"]),
    config=st.sampled_from(CONFIGS),
    executed=st.integers(0, 5),
)
def test_reward_is_finite_and_bounded(completion, answer, question_type, config, executed, monkeypatch):
    monkeypatch.delenv("LLM_JUDGE_BASE_URL", raising=False)
    r = compute_reward(completion, answer, question_type, config, executed_tool_calls=executed)
    assert all(math.isfinite(x) for x in (r.total, r.accuracy, r.format, r.tool))
    assert 0.0 <= r.accuracy <= 1.0 and 0.0 <= r.tool <= 1.0
    assert -0.3 * config.anchor_weight - 1e-12 <= r.format <= 1.0
    assert r.total == r.accuracy + config.format_weight * r.format + r.tool
    assert isinstance(extract_answer(completion), str)
