"""Real TRL GRPO steps on CPU: the tiny Qwen3-VL, synthetic videos, crops through TRL's tool loop with the
frames as images, the env's reward, weights that move.

A random model never writes a tool call, so the test first imprints one episode on it (a turn of two
parallel crops, then an answer; 80 passes, ~15 s): sampled at temperature 1 it then calls the tool most of the
time on the prompt it was imprinted on, which gives GRPO groups with reward spread. One run on 2 cores (seed
0; ``-s`` prints the figures): 4 steps of 4 rollouts (1 prompt x 4), ~1.1 s a step; 2.0, 2.0, 0, 0 tool calls
per completion, none failed; mean reward 0.10, 0.10, 0.05, 0; step 3's group had spread (std 0.058, grad
norm 0.91) and moved the weights.
"""

import asyncio
import json

import numpy as np
import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from paravt.learners.adapters.trl import ParaVTEnvironment, dataset_rows, grpo_trainer  # noqa: E402
from paravt.learners.adapters.trl.processor import load_processor  # noqa: E402
from paravt_env import VideoToolEnv  # noqa: E402

CALLS = [(5, 15), (20, 30)]


def imprint(model, processor, env: ParaVTEnvironment, passes: int) -> float:
    """Teach ``model`` one episode of ``env`` (sample 0): two parallel crops, then an answer."""
    row = dataset_rows(1)[0]
    user = env.reset(**row)

    async def crops():
        return await asyncio.gather(*(env.crop_video(a, b) for a, b in CALLS))

    results = asyncio.run(crops())
    calls = [{"type": "function", "function": {"name": "crop_video", "arguments": {"start_time": a, "end_time": b}}} for a, b in CALLS]
    first = [row["prompt"][0], {"role": "user", "content": user}]
    second = first + [{"role": "assistant", "content": "", "tool_calls": calls}] + [
        {"role": "tool", "name": "crop_video", "content": r} for r in results]  # fmt: skip
    turn1 = "".join("<tool_call>\n" + json.dumps(c["function"]) + "\n</tool_call>" for c in calls) + "<|im_end|>"
    batches = []
    for conversation, target in ((first, turn1), (second, "<answer>[6.0, 12.0]</answer><|im_end|>")):
        enc = processor.apply_chat_template(conversation, tools=[env.crop_video], add_generation_prompt=True, tokenize=True,
                                            return_dict=True, return_tensors="pt")  # fmt: skip
        tgt = processor.tokenizer(target, add_special_tokens=False, return_tensors="pt")["input_ids"]
        ids = torch.cat([enc["input_ids"], tgt], 1)
        labels = ids.clone()
        labels[:, : enc["input_ids"].shape[1]] = -100
        batches.append({"input_ids": ids, "attention_mask": torch.ones_like(ids), "pixel_values": enc["pixel_values"],
                        "image_grid_thw": enc["image_grid_thw"], "labels": labels,
                        "mm_token_type_ids": torch.cat([enc["mm_token_type_ids"], torch.zeros_like(tgt)], 1)})  # fmt: skip
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    for _ in range(passes):
        for b in batches:
            loss = model(**b).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
    return float(loss)


def test_grpo_steps_through_trl(tiny_qwen3, synth_small, tmp_path, monkeypatch):
    from transformers import AutoModelForImageTextToText
    from trl.chat_template_utils import qwen3_vl_chat_template

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.manual_seed(0)
    samples = synth_small[1][:4]
    # The tiny checkpoint carries a minimal ChatML template; a released Qwen3-VL carries this one, which TRL
    # knows how to parse tool calls from.
    processor = load_processor(tiny_qwen3, chat_template=qwen3_vl_chat_template)
    model = AutoModelForImageTextToText.from_pretrained(tiny_qwen3)

    def make_env():
        return VideoToolEnv(samples, frame_budget=4, max_pixels=12544)

    assert imprint(model, processor, ParaVTEnvironment(make_env()), passes=80) < 0.05
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    trainer = grpo_trainer(model, processor=processor, env=make_env, n_samples=len(samples), output_dir=str(tmp_path),
                           max_steps=4, per_device_train_batch_size=4, num_generations=4, max_completion_length=160,
                           use_cpu=True, report_to=[], logging_steps=1, learning_rate=1e-4, temperature=1.0,
                           save_strategy="no", seed=0)  # fmt: skip
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    keys = ("reward", "reward_std", "loss", "grad_norm", "tools/call_frequency", "completions/mean_length", "step_time")
    print(json.dumps([{k: round(h[k], 4) for k in keys} for h in logs]))  # the figures of the docstring (-s)
    assert len(logs) == 4
    assert sum(h["tools/call_frequency"] for h in logs) > 0 and all(h["tools/failure_frequency"] == 0 for h in logs)
    assert all(np.isfinite(h["reward"]) and np.isfinite(h["loss"]) for h in logs)
    assert any(h["grad_norm"] > 0 for h in logs)
    assert all(h["paravt/replay_mismatch"] == 0 for h in logs)  # every reward replayed the frames the policy saw
    assert any(not torch.equal(before[k], v) for k, v in model.named_parameters())
