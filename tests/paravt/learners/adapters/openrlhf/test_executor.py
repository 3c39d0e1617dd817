"""Our OpenRLHF AgentExecutor, run on CPU against a local engine that honours ``llm_engine.generate``."""

import json

import numpy as np
import pytest
from engine_env import engine_import  # tests/engine_env.py

torch = pytest.importorskip("torch")
engine_import("openrlhf", "openrlhf.utils.agent")

from paravt.learners.adapters.openrlhf import run_local_episode  # noqa: E402
from paravt.learners.adapters.openrlhf.alignment import check_alignment  # noqa: E402
from paravt.learners.adapters.openrlhf.local_engine import ScriptedEngine as LibraryScriptedEngine  # noqa: E402
from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt_env import gated_frame_budget  # noqa: E402

TURNS = [
    '<think>Two windows at once.</think><tool_call>{"name": "crop_video", "arguments": {"start_time": 2, "end_time": 9}}</tool_call>'
    '<tool_call>{"name": "crop_video", "arguments": {"start_time": 20, "end_time": 27}}</tool_call>',
    "<think>I saw enough of the video.</think><answer>A</answer>",
]


def ScriptedEngine(policy):  # noqa: N802 - an engine factory, as run_local_episode takes one
    """The script's main-agent turns, scored by the model (``paravt.learners.adapters.openrlhf.local_engine.ScriptedEngine``)."""
    return LibraryScriptedEngine(policy, TURNS)


@pytest.mark.parametrize("mode", ["frames", "subagent"])
def test_executor_plays_a_parallel_tool_episode(tiny_qwen3, synth_small, mode):
    _, samples = synth_small
    s = samples[0]
    r = run_local_episode(tiny_qwen3, s, engine=ScriptedEngine, frame_budget=4, max_turns=3, tool_result=mode)
    toks, lps, ranges = r["observation_tokens"], r["rollout_log_probs"], r["action_ranges"]
    assert len(toks) == len(lps) and len(ranges) == 2
    assert all(0 < a < b <= len(toks) for a, b in ranges) and ranges[0][1] < ranges[1][0]
    assert all(np.isfinite(lps[i]) and lps[i] <= 0 for a, b in ranges for i in range(a, b))
    assert all(lps[i] == 0.0 for i in range(ranges[0][0]))  # prompt: no behaviour log-probs
    from transformers import AutoTokenizer

    pad_id = AutoTokenizer.from_pretrained(tiny_qwen3).convert_tokens_to_ids("<|image_pad|>")
    mm = r["mm_train_inputs"]
    n_images = mm["image_grid_thw"].shape[0]
    # the overview's 4 frames, plus the crops' frames when they come back to the main agent
    assert n_images == 4 if mode == "subagent" else n_images > 4
    pads = sum(1 for t in toks if t == pad_id)
    assert pads == sum(int(np.prod(g)) for g in mm["image_grid_thw"].tolist()) // 4  # merge 2 x 2
    # the loss-masked span between the two turns is exactly the env's feedback as a user turn
    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen3)
    between = tokenizer.decode(toks[ranges[0][1] : ranges[1][0]])
    assert between.startswith("\n<|im_start|>user\n<tool_response>\ncrop_video call #1")
    assert between.endswith("<|im_end|>\n<|im_start|>assistant\n") and between.count("<tool_response>") == 2
    assert ("sub-agent summary:" in between) == (mode == "subagent")
    logs = r["extra_logs"]
    assert logs["kappa"] == 2.0 and logs["K"] == 4.0
    assert r["reward"] == pytest.approx(logs["accuracy"] + logs["format"] + logs["tool"])
    assert json.loads(r["label"])["sample"]["id"] == s.id


def test_executor_uses_the_shared_gating(tiny_qwen3, synth_small):
    _, samples = synth_small
    s = samples[1]
    r = run_local_episode(tiny_qwen3, s, max_new_tokens=8, nframes_gating=True, max_turns=1, epoch=3)
    assert r["extra_logs"]["K"] == gated_frame_budget(s.id, 3, 0)
    assert len(r["observation_tokens"]) == len(r["rollout_log_probs"])


def PrefixedEngine(policy):  # noqa: N802
    """The same episode as a policy writes it after a forced ``<think>\\n`` (the prefix is not generated)."""
    return LibraryScriptedEngine(policy, [t.removeprefix("<think>") for t in TURNS])


def test_think_prefix_is_prompt_and_the_reward_scores_only_generated_text(tiny_qwen3, synth_small):
    from transformers import AutoTokenizer

    _, samples = synth_small
    s = samples[0]
    plain = run_local_episode(tiny_qwen3, s, engine=ScriptedEngine, frame_budget=4, max_turns=3)
    forced = run_local_episode(tiny_qwen3, s, engine=PrefixedEngine, frame_budget=4, max_turns=3,
                               response_prefix="<think>\n")  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen3)
    toks, ranges = forced["observation_tokens"], forced["action_ranges"]
    # each assistant turn opens with the forced prefix, outside the action ranges (never trained on)
    for a, _ in ranges:
        assert tokenizer.decode(toks[:a]).endswith("<|im_start|>assistant\n<think>\n")
        assert not tokenizer.decode(toks[a : a + 1]).startswith("<think>")
    # same turns, same accuracy and tool use; the format term no longer credits a <think> the policy never wrote
    assert forced["extra_logs"]["kappa"] == plain["extra_logs"]["kappa"] == 2.0
    assert forced["extra_logs"]["accuracy"] == plain["extra_logs"]["accuracy"]
    assert forced["extra_logs"]["format"] < plain["extra_logs"]["format"]


def test_launcher_passes_the_think_prefix_of_the_arm():
    from paravt.learners.adapters.recipe_env import env_options
    from paravt.learners.config import load_recipe

    assert env_options(load_recipe("tiny_cpu"), "openrlhf")["response_prefix"] == "<think>\n"
    assert env_options(load_recipe("tiny_cpu", ["algorithm=grpo"]), "openrlhf")["response_prefix"] == ""


def test_release_protocol_renders_each_listed_message_and_the_released_subagent(tiny_qwen3, synth_small):
    _, samples = synth_small
    r = run_local_episode(tiny_qwen3, samples[0], engine=ScriptedEngine, protocol="release", tool_result="subagent",
                          max_turns=3, response_prefix="<think>\n")  # fmt: skip
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen3)
    toks, ranges = r["observation_tokens"], r["action_ranges"]
    prompt = tokenizer.decode(toks[: ranges[0][0]])
    assert prompt.startswith("<|im_start|>system\n# Tools\n") and prompt.endswith("<|im_start|>assistant\n<think>\n")
    assert "seconds><|vision_start|>" in prompt  # each overview frame after its time tag, as the release
    between = tokenizer.decode(toks[ranges[0][1] : ranges[1][0]])
    # one user turn per crop, each holding only its summary
    assert between.count("<|im_start|>user\n<tool_response>\n") == 2 and "crop_video call #" not in between
    assert r["extra_logs"]["kappa"] == 2.0


@pytest.mark.parametrize(("engine", "mode"), [(ScriptedEngine, "frames"), (ScriptedEngine, "subagent"), (None, "frames")],
                         ids=["scripted-frames", "scripted-subagent", "sampled"])  # fmt: skip
def test_one_forward_pass_over_the_episode_gives_the_engines_log_probs(tiny_qwen3, synth_small, engine, mode):
    """What OpenRLHF trains on lines up with what was generated: the teacher-forced log-prob of every action token
    equals the engine's, so the first PPO ratio is 1 (fp32: to 1e-4)."""
    _, samples = synth_small
    r = run_local_episode(tiny_qwen3, samples[0], engine=engine, frame_budget=4, max_turns=3, tool_result=mode,
                          max_new_tokens=24, temperature=0.8)  # fmt: skip
    policy = HFPolicy.from_pretrained(tiny_qwen3, temperature=0.8)
    report = check_alignment(policy, r)
    assert report["problems"] == [] and report["action_tokens"] > 0
    assert report["max_abs_diff"] < 1e-4, report


def test_alignment_names_what_is_off(tiny_qwen3, synth_small):
    _, samples = synth_small
    r = run_local_episode(tiny_qwen3, samples[0], engine=ScriptedEngine, frame_budget=4, max_turns=3, temperature=0.8)
    policy = HFPolicy.from_pretrained(tiny_qwen3, temperature=0.8)
    shifted = {**r, "rollout_log_probs": [0.0, *r["rollout_log_probs"][:-1]]}  # log-probs one token late
    assert check_alignment(policy, shifted)["max_abs_diff"] > 0.1
    (a, b), *rest = r["action_ranges"]
    late = {**r, "action_ranges": [(a + 1, b + 1), *rest]}  # the range one token late
    assert check_alignment(policy, late)["max_abs_diff"] > 0.1 or check_alignment(policy, late)["problems"]
    mm = dict(r["mm_train_inputs"])
    mm["image_grid_thw"] = mm["image_grid_thw"][1:]  # an image lost
    assert "image pads in the tokens" in check_alignment(policy, {**r, "mm_train_inputs": mm})["problems"][0]
    assert "not ordered" in check_alignment(policy, {**r, "action_ranges": [(b, a)]})["problems"][0]
