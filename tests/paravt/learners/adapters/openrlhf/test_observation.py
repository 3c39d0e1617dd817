"""What the policy sees under OpenRLHF is what it sees under the local trainer, token for token.

One recipe (PARA-GRPO at CPU size, its frames at 12,544 pixels), one sample, the scripted episode of
``tests/engine_env.py``: the local trainer's tokens come from its own pieces (``HFPolicy`` at the trainer's pixel
budget, ``TrajectoryBuilder`` as ``run_batch`` drives it); OpenRLHF's from a row of ``paravt export openrlhf``
played by the executor with the processor OpenRLHF's ``get_tokenizer`` loads, on an engine that expands the
images as vLLM does (the checkpoint's own budget). Before the fix the executor handed the frames to OpenRLHF's
processor as the env gave them: 16 pads per 112 x 112 frame at the checkpoint's budget, 9 at the recipe's.

A second checkpoint carries a chat template that numbers its images (as Qwen's templates can): the prompt must be
the template's, as the local trainer renders it, not a ChatML written by hand.
"""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from engine_env import PARA_GRPO_CPU, SCRIPT, engine_import  # tests/engine_env.py

engine_import("openrlhf", "openrlhf.utils.agent")
torch = pytest.importorskip("torch")

from paravt.cli import main  # noqa: E402
from paravt.learners.adapters.openrlhf.local_engine import token_runs  # noqa: E402
from paravt.learners.config import load_recipe  # noqa: E402
from paravt.learners.run_setup import env_config  # noqa: E402
from paravt.learners.trajectory import TrajectoryBuilder  # noqa: E402
from paravt.policies.base import Generation  # noqa: E402
from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt.policies.tiny_model import CHAT_TEMPLATE  # noqa: E402
from paravt_env import VideoToolEnv  # noqa: E402
from paravt_env.messages import observation_messages  # noqa: E402

OVERRIDES = [*PARA_GRPO_CPU, "env.tool_result=frames"]  # frames mode: the crops' frames reach the policy too
NUMBERED = CHAT_TEMPLATE.replace(
    "{%- for message in messages -%}", "{%- set images = namespace(n=0) -%}{%- for message in messages -%}"
).replace(
    "{%- if part['type'] in ('image', 'image_url') -%}{{- '<|vision_start|>",
    "{%- if part['type'] in ('image', 'image_url') -%}{%- set images.n = images.n + 1 -%}"
    "{{- 'Picture ' + images.n|string + ': <|vision_start|>",
)  # fmt: skip
"""The tiny checkpoint's template with each image numbered ("Picture 3: <|vision_start|>..."), a template a
checkpoint may ship (Qwen's write it under ``add_vision_id``)."""


def local_trainer_episode(model_dir, cfg, samples, index: int) -> tuple[list[int], torch.Tensor, torch.Tensor]:
    """``SCRIPT`` as the local trainer turns it into tokens: its ``HFPolicy`` (think prefix, the recipe's processor
    budget), the env its recipe builds, ``TrajectoryBuilder`` fed turn by turn as ``rollout.run_batch`` feeds it.
    Returns the ids, the image grids and the pixel values."""
    lo, hi = cfg.model.processor_pixels(cfg.env.min_pixels, cfg.env.max_pixels)
    policy = HFPolicy.from_pretrained(model_dir, think_prefix=cfg.think_prefix, min_pixels=lo, max_pixels=hi)
    env = VideoToolEnv(samples, env_config(cfg))
    prefix = env.config.response_prefix  # PARA-GRPO's "<think>\n"
    obs, info = env.reset(options={"index": index})
    history = observation_messages(obs, info)
    builder = TrajectoryBuilder(policy, policy.encode(history), history)
    for turn in SCRIPT:
        ids = policy.tokenizer.encode(turn, add_special_tokens=False) + [policy.end_of_turn_id]
        builder.add_turn(Generation(text=prefix + turn, token_ids=ids, logprobs=[0.0] * len(ids), prefix=prefix,
                                    finish_reason="stop"))  # fmt: skip
        obs, _, term, trunc, info = env.step(prefix + turn)
        if term or trunc:
            break
        builder.add_feedback(observation_messages(obs, info))
    encoded = builder.encoded
    return list(encoded.input_ids), encoded.image_grid_thw, encoded.pixel_values


def openrlhf_episode(model_dir, row: dict, max_length: int) -> dict:
    """The row played by the executor OpenRLHF loads, with ``get_tokenizer``'s processor and an engine at the
    checkpoint's own pixel budget (vLLM's); the engine's served prompts come back under ``"served"``."""
    from openrlhf.trainer.ray.vllm_engine import _load_agent_executor
    from openrlhf.utils.utils import get_tokenizer

    from paravt.learners.adapters.openrlhf.launcher import AGENT_FUNC
    from paravt.learners.adapters.openrlhf.local_engine import SamplingParams, ScriptedEngine

    executor = _load_agent_executor(str(AGENT_FUNC))
    processor = get_tokenizer(str(model_dir), None, "left")
    engine = ScriptedEngine(HFPolicy.from_pretrained(model_dir), SCRIPT)
    params = SamplingParams(temperature=1.0, max_tokens=96, logprobs=1)
    result = asyncio.run(executor.execute(row["prompt"], row["label"], params, max_length, processor, engine))
    return {**result, "served": engine.served, "pad": processor.image_token_id}


def pads_per_image(ids: list[int], pad: int) -> list[int]:
    """The length of every run of image pads, in order: the image tokens each frame gets."""
    return token_runs(ids, pad)


@pytest.fixture(scope="module", params=["checkpoint_template", "numbered_images"])
def model(request, tiny_qwen3, tmp_path_factory):
    if request.param == "checkpoint_template":
        return tiny_qwen3
    copy = tmp_path_factory.mktemp("numbered") / "model"
    shutil.copytree(tiny_qwen3, copy)
    (copy / "chat_template.jinja").write_text(NUMBERED)
    return copy


def test_openrlhf_gives_the_policy_the_local_trainers_tokens(model, synth_small, tmp_path, vllm_standin):
    data, samples = synth_small
    out = tmp_path / "prompts.jsonl"
    assert main(["export", "openrlhf", "--recipe", "paragrpo_qwen3vl_8b", "--data", str(data), "--out", str(out),
                 *OVERRIDES]) == 0  # fmt: skip
    row = json.loads(out.read_text().splitlines()[0])
    cfg = load_recipe("paragrpo_qwen3vl_8b", OVERRIDES)
    local_ids, local_grids, local_pixels = local_trainer_episode(model, cfg, samples, 0)
    orl = openrlhf_episode(model, row, 16384)
    ids, pad = orl["observation_tokens"], orl["pad"]
    first = orl["action_ranges"][0][0]
    # the prompt: the same tokens (system prompt, question, time tags, every frame's pads)
    assert ids[:first] == local_ids[:first]
    # the whole episode: the tokens OpenRLHF trains on are the local trainer's; the local trajectory closes the last
    # turn with the template's "\n" (loss-masked), OpenRLHF's ends at the generated <|im_end|>
    assert local_ids[: len(ids)] == ids and len(local_ids) - len(ids) == 1
    # the image tokens per frame, overview and crops: 9 at the recipe's 12,544 pixels (96 x 96), in the trainer's
    # grids, and vLLM expanded every prompt it served to the same pads
    mm = orl["mm_train_inputs"]
    assert mm["image_grid_thw"].tolist() == local_grids.tolist() and len(local_grids) > orl["extra_logs"]["K"]
    assert pads_per_image(ids, pad) == pads_per_image(local_ids, pad) == [9] * len(local_grids)
    assert all(served == ids[: len(served)] for served in orl["served"])
    # the pixels: each frame resized once, to the trainer's size, bicubic as its processor resizes; the two resizes
    # round apart by at most one 8-bit level (0.0078 after Qwen3-VL's normalisation by 0.5)
    assert mm["pixel_values"].shape == local_pixels.shape
    assert (mm["pixel_values"] - local_pixels).abs().max() < 0.01


def test_a_checkpoint_budget_that_cannot_show_the_recipes_frames_is_refused(tiny_qwen3, synth_small, tmp_path,
                                                                             vllm_standin):  # fmt: skip
    """Qwen3-VL's own processor upscales every frame below 65,536 pixels; vLLM and OpenRLHF's processor both load it
    unchanged, so a recipe at fewer pixels cannot be shown its frames under OpenRLHF: refused, with the fix named."""
    data, _ = synth_small
    ckpt = tmp_path / "model"
    shutil.copytree(tiny_qwen3, ckpt)
    config = json.loads((ckpt / "preprocessor_config.json").read_text())
    config["size"] = {"shortest_edge": 65536, "longest_edge": 16777216}  # Qwen3-VL-8B-Instruct's budget
    (ckpt / "preprocessor_config.json").write_text(json.dumps(config))
    out = tmp_path / "prompts.jsonl"
    assert main(["export", "openrlhf", "--recipe", "paragrpo_qwen3vl_8b", "--data", str(data), "--out", str(out),
                 *OVERRIDES]) == 0  # fmt: skip
    row = json.loads(out.read_text().splitlines()[0])
    with pytest.raises(ValueError, match=r"96 x 96 pixels .*65536-16777216 .*256 x 256.*processor_min_pixels=65536"):
        openrlhf_episode(ckpt, row, 16384)
    # the recipe given the checkpoint's budget (as paragrpo_qwen3vl_8b_release is) plays, at 256 x 256: 64 pads
    assert main(["export", "openrlhf", "--recipe", "paragrpo_qwen3vl_8b", "--data", str(data), "--out", str(out),
                 *OVERRIDES, "model.processor_min_pixels=65536", "model.processor_max_pixels=16777216"]) == 0  # fmt: skip
    row = json.loads(out.read_text().splitlines()[0])
    played = openrlhf_episode(ckpt, row, 1 << 16)
    assert set(pads_per_image(played["observation_tokens"], played["pad"])) == {64}
