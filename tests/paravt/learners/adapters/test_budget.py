"""The token budgets the launchers size engines with are upper bounds of real episodes: the env's own messages,
rendered as the engines render them (ChatML, every frame expanded into the pads the tiny Qwen3-VL's processor
gives it), never exceed them; and the arithmetic of the released recipe is what its docstring says."""

import numpy as np
import pytest

pytest.importorskip("torch")

from paravt.learners.adapters.budget import frame_pads, recipe_budget, text_tokens, token_budget  # noqa: E402
from paravt.learners.config import load_recipe  # noqa: E402
from paravt.policies.vision_inputs import (  # noqa: E402
    expand_image_tokens,
    inline_images,
    process_images,
    tokenizer_and_pil_image_processor,
)
from paravt_env import EnvConfig, VideoToolEnv  # noqa: E402
from paravt_env.messages import observation_messages  # noqa: E402

CALLS = "".join(f'<tool_call>{{"name": "crop_video", "arguments": {{"start_time": {a}, "end_time": {b}}}}}</tool_call>'
                for a, b in ((0, 30), (10, 40), (20, 60)))  # fmt: skip


def rendered_tokens(tokenizer, image_processor, messages, frames) -> int:
    text = "".join(f"<|im_start|>{m.role}\n{inline_images(m.text)}<|im_end|>\n" for m in messages) + "<|im_start|>assistant\n"
    if len(frames):
        _, grid = process_images(image_processor, list(frames))
        text = expand_image_tokens(text, grid, 2)
    return len(tokenizer.encode(text, add_special_tokens=False))


@pytest.mark.parametrize("tool_result", ["frames", "subagent"])
def test_real_episodes_fit_their_budget(tiny_qwen3, synth_small, tool_result):
    tokenizer, image_processor = tokenizer_and_pil_image_processor(tiny_qwen3)
    _, samples = synth_small
    # a sub-agent reply as long as the adapters let it be (256 new tokens in our protocol; the release's is cut at 512)
    reply = tokenizer.decode(tokenizer.encode("A red circle near the left edge, then nothing. " * 60)[:256])
    cfg = EnvConfig(frame_budget=8, max_parallel=3, crop_max_frames=8, max_pixels=12544, tool_result=tool_result,
                    subagent=(lambda request: reply) if tool_result == "subagent" else None)  # fmt: skip
    budget = token_budget(cfg, max_new_tokens=256, cell=32,
                          pads_per_frame=frame_pads(max(cfg.max_pixels, image_processor.size["shortest_edge"]), 32))  # fmt: skip
    worst_prompt = worst_feedback = 0
    for index in range(len(samples)):
        env = VideoToolEnv(samples, cfg)
        obs, info = env.reset(options={"index": index})
        prompt = rendered_tokens(tokenizer, image_processor, observation_messages(obs, info), obs["frames"])
        obs, *_, info = env.step(CALLS)
        feedback = rendered_tokens(tokenizer, image_processor, observation_messages(obs, info), obs["frames"])
        worst_prompt, worst_feedback = max(worst_prompt, prompt), max(worst_feedback, feedback)
        assert info["tool_calls"]["executed"] == 3
    print(tool_result, "measured prompt / feedback:", worst_prompt, worst_feedback, "budget:", budget.prompt, budget.feedback)
    assert worst_prompt <= budget.prompt and worst_feedback <= budget.feedback
    assert worst_feedback > budget.feedback / 4  # a bound, but not a vacuous one


def test_released_recipe_budget():
    b = recipe_budget(load_recipe("paragrpo_qwen3vl_8b"))
    # Qwen3-VL: 50,176-pixel frames upscaled to 65,536 by its processor: 64 pads each; gating's largest K, 64
    assert b.pads_per_frame == 64 and b.overview_frames == 64 and b.max_images == 64  # sub-agents: no crop frame back
    assert b.prompt >= 64 * 64 and b.response == 3 * 2048 + 2 * b.feedback
    frames = recipe_budget(load_recipe("paragrpo_qwen3vl_8b", ["env.tool_result=frames"]))
    assert frames.max_images == 64 + 5 * 16 * 2 and frames.feedback >= 5 * 16 * 64
    qwen25 = recipe_budget(load_recipe("paragrpo_qwen3vl_8b", ["model.path=Qwen/Qwen2.5-VL-7B-Instruct"]))
    assert qwen25.pads_per_frame == 50176 // 28**2
    assert text_tokens("abcd") == 2 and np.isfinite(b.total)
