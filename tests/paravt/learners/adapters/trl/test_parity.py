"""The scripted PARA-GRPO episode (``engine_env.SCRIPT``) through the TRL adapter gives the local trainer's reward,
K and frames: the env a recipe builds for TRL (``recipe_env``) is the local trainer's, TRL's concurrent
``crop_video`` calls make one parallel env step, and the reward function scores the completion as TRL hands it
over (token ids; the think prefix, written by the chat template's generation prompt, sits in the tool suffix of
every later turn and before the first)."""

import asyncio

import numpy as np
import pytest
from engine_env import PARA_GRPO_CPU, SCRIPT, engine_import, local_episode  # tests/engine_env.py

engine_import("trl", "trl")
pytest.importorskip("torch")

from paravt.learners.adapters.trl import ParaVTEnvironment, dataset_rows, make_reward, recipe_env  # noqa: E402
from paravt.learners.config import load_recipe  # noqa: E402

CROPS = [(3, 13), (25, 35)]  # SCRIPT[0]'s two calls, as TRL's parser hands them to the tool


def test_the_scripted_episode_scores_as_in_the_local_trainer(tiny_qwen3, synth_small):
    from transformers import AutoTokenizer

    _, samples = synth_small
    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen3)
    cfg = load_recipe("paragrpo_qwen3vl_8b", [*PARA_GRPO_CPU, "env.tool_result=frames"])
    factory = recipe_env(cfg, samples)
    reward_fn = make_reward(tokenizer)
    logged = {}
    for index in range(3):
        env = ParaVTEnvironment(factory())
        env.reset(**{**dataset_rows(len(samples))[index], "seed": None})
        k = env.last_info["frame_budget"]

        async def turn(env=env):
            return await asyncio.gather(*(env.crop_video(a, b) for a, b in CROPS))

        responses = asyncio.run(turn())
        feedback = "".join(b["text"] for r in responses for b in r if b["type"] == "text")
        completion = (SCRIPT[0] + "<|im_end|>\n<|im_start|>user\n" + feedback + "<|im_end|>\n<|im_start|>assistant\n<think>\n"
                      + SCRIPT[1] + "<|im_end|>")  # fmt: skip
        ids = tokenizer.encode(completion, add_special_tokens=False)
        [reward] = reward_fn([ids], [env], log_metric=lambda name, value: logged.__setitem__(name, value))
        local = local_episode(samples, index, ["env.tool_result=frames"])
        assert reward == pytest.approx(local["reward"]) and k == local["K"] and k in (4, 8)
        assert len(env.shown) == len(local["frames"]) and all(np.array_equal(a, b) for a, b in zip(env.shown, local["frames"], strict=True))
        assert logged == {"paravt/replay_mismatch": 0.0, "paravt/rolled_back_tool_responses": 0.0,
                          "paravt/crops_per_episode": float(len(CROPS))}  # fmt: skip
        # TRL rolls back the tool responses of a completion cut at max_completion_length: counted, not silent
        [_] = reward_fn([tokenizer.encode(SCRIPT[0] + "<|im_end|>", add_special_tokens=False)], [env],
                        log_metric=lambda name, value: logged.__setitem__(name, value))  # fmt: skip
        assert logged["paravt/rolled_back_tool_responses"] == 1.0 and logged["paravt/replay_mismatch"] == 0.0
