"""The TRL environment plays the env's episodes: the same frames, the same reward as in process (and through
``paravt serve-env``), with a turn's crops as one parallel env step, and the env's feedback handed to TRL's calls
so that, concatenated, it is the env's message exactly (what the adapter's chat template renders as the local
trainer does)."""

import asyncio
import json

import numpy as np
import pytest

from paravt.learners.adapters.trl.environment import (
    ParaVTEnvironment,
    assistant_turns,
    content_blocks,
    tool_results,
)
from paravt.learners.adapters.trl.recipe import dataset_rows
from paravt.learners.adapters.trl.template import ROLE_KEY
from paravt_env import VideoToolEnv
from paravt_env.messages import Message

pytest.importorskip("PIL")

CALLS = [(2.0, 12.0), (20.0, 31.0), (500.0, 400.0)]  # the third is invalid: the env says why
TURN1 = "".join("<tool_call>\n" + json.dumps({"name": "crop_video", "arguments": {"start_time": a, "end_time": b}})
                + "\n</tool_call>" for a, b in CALLS)  # fmt: skip
TURN2 = "<think>seen</think><answer>[3.0, 9.0]</answer>"


def images(blocks):
    return [np.asarray(b["image"]) for b in blocks if b["type"] == "image"]


def joined(results):
    """The text of the calls' content lists, concatenated, each image as the env's ``<image>`` placeholder."""
    return "".join(b["text"] if b["type"] == "text" else "<image>" for blocks in results for b in blocks)


def play_trl(env_factory, index):
    """What TRL does with the environment: reset, gather the turn's calls, then the reward by replay."""
    env = ParaVTEnvironment(env_factory())

    async def turn():
        return await asyncio.gather(*(env.crop_video(a, b) for a, b in CALLS))

    user = env.reset(**{**dataset_rows(index + 1)[index], "seed": 1})
    per_call = asyncio.run(turn())
    out = env._replay([TURN1, TURN2])
    env.env.close()
    return user, per_call, out


@pytest.fixture(scope="module")
def env_samples(synth_small):
    return synth_small[1][:3]


@pytest.fixture
def in_process(env_samples):
    def play(index):
        env = VideoToolEnv(env_samples, frame_budget=8)
        obs0, info0 = env.reset(seed=1, options={"index": index, "epoch": 0})
        obs1, *_ , info1 = env.step(TURN1)
        _, reward, terminated, _, info2 = env.step(TURN2)
        assert terminated
        return obs0, info0, obs1, info1, reward, info2

    return play


def check_same(env_samples, factory, in_process):
    for index in range(len(env_samples)):
        obs0, info0, obs1, info1, reward, info2 = in_process(index)
        user, per_call, out = play_trl(factory, index)
        assert np.array_equal(np.stack(images(user)), obs0["frames"])
        assert "".join(b["text"] for b in user if b["type"] == "text") == info0["user_prompt"].replace("<image>", "")
        assert len(per_call) == 3 and images(per_call[2]) == [] and "rejected: start_time (500)" in per_call[2][0]["text"]
        shown = [f for call in per_call for f in images(call)]
        assert np.array_equal(np.stack(shown), obs1["frames"]) and info1["tool_calls"]["executed"] == 2
        # the calls' responses, concatenated, are the env's feedback message: its text, its role, its frames
        [feedback] = info1["messages"]
        assert joined(per_call) == feedback["text"] and per_call[0][0][ROLE_KEY] == feedback["role"] == "user"
        assert [ROLE_KEY in b for call in per_call for b in call].count(True) == 1
        assert all(joined([call]).startswith("<tool_response>") for call in per_call)
        assert out["frames_match"] and out["reward"] == reward and out["reward_breakdown"] == info2["reward_breakdown"]


def test_same_numbers_as_in_process(env_samples, in_process):
    check_same(env_samples, lambda: VideoToolEnv(env_samples, frame_budget=8), in_process)


def test_same_numbers_through_serve_env(env_samples, in_process, start_env_server):
    from paravt_env.remote import RemoteVideoToolEnv

    server = start_env_server(env_samples)
    check_same(env_samples, lambda: RemoteVideoToolEnv(server.url, frame_budget=8), in_process)


def test_assistant_turns_cut_the_tool_responses_out():
    text = ("<tool_call>\n{}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nx\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n<answer>B</answer><|im_end|>")  # fmt: skip
    assert assistant_turns(text) == ["<tool_call>\n{}\n</tool_call>", "<answer>B</answer>"]
    assert assistant_turns("<think>cut by the length lim") == ["<think>cut by the length lim"]


def test_tool_results_hold_the_feedback_exactly():
    frames = [np.full((28, 28, 3), i, np.uint8) for i in range(3)]
    text = ("note: cut\n<tool_response>\na <1.0 seconds><image><2.0 seconds><image>\n</tool_response>\n"
            "<tool_response>\nb <3.0 seconds><image>\n</tool_response>\nlast turn")  # fmt: skip
    one, two = tool_results([Message("user", text, frames)], 2)
    assert joined([one, two]) == text and one[0][ROLE_KEY] == "user" and ROLE_KEY not in two[0]
    assert [int(f[0, 0, 0]) for f in images(one) + images(two)] == [0, 1, 2] and len(images(one)) == 2
    assert joined([one]).startswith("note: cut\n<tool_response>") and joined([two]).endswith("last turn")
    # more responses than calls (the env answered calls TRL's parser missed): the last call carries the rest
    [only] = tool_results([Message("user", text, frames)], 1)
    assert joined([only]) == text and len(images(only)) == 3
    # fewer pieces than calls: the calls past them answer with an empty text
    *_, empty = tool_results([Message("user", "no response blocks", [])], 3)
    assert empty == [{"type": "text", "text": ""}]
    # several messages a turn (the release's protocol: one per crop): each message's first block says its role
    a, b = tool_results([Message("user", "first <image>", frames[:1]), Message("user", "", [])], 2)
    assert a[0][ROLE_KEY] == b[0][ROLE_KEY] == "user" and joined([a, b]) == "first <image>"
    with pytest.raises(ValueError, match="placeholders"):
        content_blocks("<image>", np.stack(frames))


def test_a_row_with_another_prompt_is_refused(env_samples):
    env = ParaVTEnvironment(VideoToolEnv(env_samples, frame_budget=4))  # the agentic prompt
    with pytest.raises(ValueError, match="not this env's"):
        env.reset(**dataset_rows(1, prompt_mode="agentic_compact")[0])
    with pytest.raises(ValueError, match="not this env's"):
        env.reset(**{**dataset_rows(1)[0], "prompt": [{"role": "user", "content": ""}]})  # no system prompt
    assert env.reset(**dataset_rows(1)[0])  # the env's own prompt
    env.env.close()
