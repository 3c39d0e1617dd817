"""``protocol="longvt"``: LongVT's evaluation dialogue against a recorded transcript of its own chat template.

``tests/fixtures/longvt/template_transcript.json`` was rendered once by LongVT's eval template
(``examples/eval/tool_call_qwen2_5_vl.jinja`` @ 08d755b) through transformers' ``apply_chat_template``, from the
messages and tool entry the lmms-eval driver sends (placeholders QUESTION, VIDEO_PATH, REPLY, ERROR and one frame).
The template frames messages as ``<|im_start|>ROLE\\n...<|im_end|>`` with no newline between them, and a tool
message as ``<|im_start|>user<tool_response>\\n...</tool_response><|im_end|>``: the episode's messages, framed so,
must give the recorded text byte for byte.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from paravt_env import EnvConfig, VideoToolEnv
from paravt_env.protocol.longvt import TOOL_PROMPT, crop_problem, longvt_answer

TRANSCRIPT = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "longvt" / "template_transcript.json").read_text())
PADS = "<|vision_start|><|image_pad|><|vision_end|>"


def framed(role: str, text: str) -> str:
    """A message as LongVT's template frames it (frames written as the template writes image parts)."""
    return f"<|im_start|>{role}\n" + text.replace("<image>", PADS) + "<|im_end|>"


def env_for(samples, **kw) -> VideoToolEnv:
    return VideoToolEnv(samples, EnvConfig(protocol="longvt", frame_budget=kw.pop("frame_budget", 8), **kw))


def call(path: str, start, end, name: str = "crop_video") -> str:
    args = {"video_path": path, "start_time": start, "end_time": end}
    return f'<think>look</think>\n<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


def test_opening_is_the_drivers_prompt_byte_for_byte(env_samples):
    sample = next(s for s in env_samples if s.question_type == "oe")
    env = env_for([sample])
    try:
        obs, info = env.reset(options={"sample": sample})
    finally:
        env.close()
    system, user = info["messages"]
    assert system["role"] == "system" and user["role"] == "user" and user["frames"] == len(obs["frames"]) == 8
    path = os.path.abspath(sample.video_path)
    expected = (TRANSCRIPT["opening"].replace(PADS, PADS * 8).replace("VIDEO_PATH", path)
                .replace("QUESTION", sample.question_with_options().strip()))  # fmt: skip
    assert framed("system", system["text"]) + framed("user", user["text"]) + "<|im_start|>assistant\n" == expected
    assert user["text"].startswith("<image>" * 8 + sample.question_with_options().strip() + " " + TOOL_PROMPT)
    assert "seconds>" not in user["text"]  # no timestamps with the frames (Qwen2.5-VL's driver path)


def test_overview_is_one_frame_a_second_up_to_the_budget(env_samples):
    sample = env_samples[0]
    for k, want in ((8, 8), (4000, None)):
        env = env_for([sample], frame_budget=k)
        try:
            obs, _ = env.reset(options={"sample": sample})
        finally:
            env.close()
        n = len(obs["timestamps"])
        if want is not None:
            assert n == want
        else:  # uncapped: qwen-vl-utils' 1 fps over the whole video, floored to even
            assert n == int(sample.duration) // 2 * 2 or abs(n - sample.duration) <= 2
        assert obs["frames"].shape[1] * obs["frames"].shape[2] <= 50176


def test_a_crop_comes_back_as_one_tool_response_of_frames(env_samples):
    sample = env_samples[0]
    env = env_for([sample])
    try:
        _, info = env.reset(options={"sample": sample})
        path = info["call_arguments"]["video_path"]
        assert info["limits"]["calls_per_turn"] == 1
        obs, _, term, trunc, info = env.step(call(path, 2, 12.5))
    finally:
        env.close()
    assert not (term or trunc)
    [m] = info["messages"]
    n = len(obs["frames"])
    assert 10 <= n <= 12 and m["frames"] == n  # 1 frame a second of the window
    expected = TRANSCRIPT["tool_frames"].split("<|im_start|>user", 1)[1].split("<|im_end|>")[0]
    assert m["text"].replace("<image>", PADS) == expected.replace(PADS, PADS * n)
    assert info["tool_calls"] == {"requested": 1, "executed": 1, "rejected": 0, "failed": 0}


def test_numeric_strings_crop_their_window_as_the_tools_pydantic_reads_them(env_samples):
    sample = env_samples[0]
    env = env_for([sample])
    try:
        _, info = env.reset(options={"sample": sample})
        obs, _, _, _, info = env.step(call(info["call_arguments"]["video_path"], "2", "6.5"))
    finally:
        env.close()
    assert info["tool_calls"]["executed"] == 1 and (info["crops"][0]["start"], info["crops"][0]["end"]) == (2.0, 6.5)
    assert obs["timestamps"].min() >= 2.0 and obs["timestamps"].max() <= 6.5 and 3 <= len(obs["timestamps"]) <= 5


def test_one_call_a_turn_the_rest_recorded_as_rejected(env_samples):
    sample = env_samples[0]
    env = env_for([sample])
    try:
        _, info = env.reset(options={"sample": sample})
        path = info["call_arguments"]["video_path"]
        _, _, _, _, info = env.step(call(path, 2, 6) + "\n" + call(path, 10, 14).split("\n", 1)[1])
    finally:
        env.close()
    assert info["tool_calls"] == {"requested": 2, "executed": 1, "rejected": 1, "failed": 0}
    assert [c["status"] for c in info["crops"]] == ["executed", "rejected"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"start_time": 1, "end_time": 2}, "video_path parameter is required"),
        ({"video_path": "V", "end_time": 2}, "start_time parameter is required"),
        ({"video_path": "V", "start_time": -1, "end_time": 2}, "start_time must be non-negative, got -1.0"),
        ({"video_path": "V", "start_time": 5, "end_time": 5}, "end_time (5.0) must be greater than start_time (5.0)"),
        ({"video_path": "/elsewhere.mp4", "start_time": 1, "end_time": 2}, "Video file not found: /elsewhere.mp4"),
        ({"video_path": "V", "start_time": 61, "end_time": 62}, "start_time (61.0s) exceeds video duration (60.00s)"),
        ({"video_path": "V", "start_time": 50, "end_time": 60.5}, "end_time (60.5s) exceeds video duration (60.00s)"),
        ({"video_path": "V", "start_time": "10", "end_time": 20}, None),
    ],
)
def test_the_tool_servers_checks_in_its_order_with_its_messages(args, message, tmp_path):
    video = str(tmp_path / "v.mp4")
    args = {k: (video if v == "V" else v) for k, v in args.items()}
    assert crop_problem(args, video, 60.0) == message


def test_a_refused_call_is_the_servers_error_text(env_samples):
    sample = env_samples[0]
    env = env_for([sample])
    try:
        _, info = env.reset(options={"sample": sample})
        path = info["call_arguments"]["video_path"]
        obs, _, term, _, info = env.step(call(path, 20, 10))
    finally:
        env.close()
    assert not term and len(obs["frames"]) == 0
    expected = TRANSCRIPT["tool_error"].split("<|im_start|>user", 1)[1].split("<|im_end|>")[0]
    error = "Error executing tool crop_video: end_time (10.0) must be greater than start_time (20.0)"
    assert info["messages"][0]["text"] == expected.replace("ERROR", error)
    assert info["tool_calls"]["failed"] == 1 and info["crops"][0]["status"] == "failed"


def test_a_reply_without_a_readable_call_is_final_and_scored_on_its_first_answer(env_samples):
    sample = next(s for s in env_samples if s.question_type == "oe")
    env = env_for([sample])
    try:
        env.reset(options={"sample": sample})
        _, _, term, _, info = env.step(f"<think>x</think><answer>{sample.answer}</answer><answer>no</answer>")
    finally:
        env.close()
    assert term and info["prediction"] == sample.answer and info["reward_breakdown"]["accuracy"] > 0
    env = env_for([sample])
    try:
        env.reset(options={"sample": sample})
        _, _, term, _, info = env.step('<tool_call>{"name": "crop_video", "arguments": {"start_time": 1,</tool_call>')
    finally:
        env.close()
    assert term and info["tool_calls"]["executed"] == 0  # the Hermes parser fails: the reply is text


def test_crop_budget_is_matched_and_refused_with_a_tool_error(env_samples):
    sample = env_samples[0]
    env = env_for([sample], crop_budget=1, turn_budget=3)  # a turn left after the budget is spent
    try:
        _, info = env.reset(options={"sample": sample})
        path = info["call_arguments"]["video_path"]
        env.step(call(path, 2, 6))
        obs, _, _, _, info = env.step(call(path, 10, 14))
    finally:
        env.close()
    assert info["tool_calls"]["rejected"] == 1 and len(obs["frames"]) == 0
    assert "crop budget spent (1 crops)" in info["messages"][0]["text"]


@pytest.mark.parametrize(
    ("text", "want"),
    [("<answer> red. </answer> <answer>blue</answer>", "red"), ("so \\boxed{\\frac{1}{2}} or \\boxed{7}", "7"),
     ("the count is\nit is 3", "3"), ("nothing here", "")],
)
def test_longvt_answer_extraction(text, want):
    assert longvt_answer(text) == want


def test_protocol_refuses_what_it_cannot_run():
    with pytest.raises(ValueError, match="tool_result"):
        EnvConfig(protocol="longvt", tool_result="subagent")
    with pytest.raises(ValueError, match="video_channel"):
        EnvConfig(protocol="longvt", video_channel="video_url")
