"""One observation, whichever engine: a checkpoint trained by the local trainer reads, under TRL's own
``GRPOTrainer``, the tokens it reads under the local trainer, token for token.

The checkpoint is the repro's cold start (``results/repro/repro_cpu/coldstart``: perception stage and SFT on teacher
episodes, a card of 784-12,544 pixels; it crops 4-5 times an episode under the local trainer). TRL loads it
from its path through ``AutoProcessor`` (its own processor class, nothing patched), runs a real training step,
and every ``generate`` call TRL makes is recorded: the first turn's prompt and the second turn's prompt (the
first turn as generated, then TRL's tool suffix with the crop frames) must equal the local trainer's sequence of
the same episode (``HFPolicy.encode``, ``TrajectoryBuilder.add_turn`` / ``add_feedback``), ids and image grids.
Before the fix TRL's prompt held Qwen3-VL's tool block in the system message and 16 image pads a frame
(the processor's own budget) where the local trainer has 9 (the card's).
"""

from pathlib import Path

import numpy as np
import pytest
from engine_env import engine_import  # tests/engine_env.py

engine_import("trl", "trl")
torch = pytest.importorskip("torch")

from paravt.learners.adapters.trl import grpo_trainer, recipe_env  # noqa: E402
from paravt.learners.config import load_recipe  # noqa: E402
from paravt.learners.trajectory import TrajectoryBuilder  # noqa: E402
from paravt.policies.base import Generation  # noqa: E402
from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt_env import VideoToolEnv  # noqa: E402
from paravt_env.messages import observation_messages  # noqa: E402
from paravt_env.protocol import system_prompt  # noqa: E402

COLDSTART = Path(__file__).resolve().parents[5] / "results/repro/repro_cpu/coldstart/coldstart/model"
# the repro recipe at test size: K in {8, 16}, 5 parallel crops of at most 4 frames (one turn: 1,684 tokens)
OVERRIDES = ["para.gating_choices=[8,16]", "env.crop_max_frames=4"]


class GenerateRecorder:
    """Every ``generate`` call of the model: its inputs (ids, mask, image grids) and the sequences it returned."""

    def __init__(self, model) -> None:
        self.calls: list[dict] = []
        self._generate = model.generate
        model.generate = self

    def __call__(self, *args, **kwargs):
        out = self._generate(*args, **kwargs)
        self.calls.append({"ids": kwargs["input_ids"].cpu(), "mask": kwargs["attention_mask"].cpu(),
                           "grid": kwargs.get("image_grid_thw"), "out": out.cpu()})  # fmt: skip
        return out


def rows(call: dict) -> list[list[int]]:
    """The unpadded rows of a recorded call (TRL pads on the left)."""
    return [ids[mask.bool()].tolist() for ids, mask in zip(call["ids"], call["mask"], strict=True)]


def row_grids(call: dict, ids: list[list[int]], vision_start: int) -> list[list[list[int]]]:
    """The image grids of each row of a recorded call (the call's grids are the rows' images, in row order)."""
    grids, used = [], 0
    for row in ids:
        n = row.count(vision_start)
        grids.append(call["grid"][used : used + n].tolist() if n else [])
        used += n
    return grids


def repro_videos(cfg, out: Path, n: int):
    """``n`` videos of the repro's distribution (150-300 s, 112 px, one 2-3 s needle), of a seed it never trained
    on: the cold start writes its calls there (on other videos, e.g. 40-150 s at 224 px, it writes broken ones
    under either engine)."""
    from paravt_env.data.synthetic import generate_dataset

    return generate_dataset(out, cfg.data.synth_config(n=n, seed=4242), progress=False, workers=1)


@pytest.fixture(scope="module")
def trained_step(tmp_path_factory):
    """One real GRPO step of the cold start under TRL, every generate call recorded, the env factory and recipe."""
    import os

    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    cfg = load_recipe("repro_cpu", OVERRIDES)
    factory = recipe_env(cfg, repro_videos(cfg, tmp_path_factory.mktemp("repro_videos"), 4))
    torch.manual_seed(0)
    trainer = grpo_trainer(str(COLDSTART), env=factory, n_samples=4, output_dir=str(tmp_path_factory.mktemp("trl_obs")),
                           max_steps=1, per_device_train_batch_size=4, num_generations=4, use_cpu=True, report_to=[],
                           logging_steps=1, learning_rate=1e-5, temperature=cfg.rollout.temperature, save_strategy="no",
                           seed=0, max_completion_length=2048)  # fmt: skip
    recorder = GenerateRecorder(trainer.model)
    trainer.train()
    return trainer, recorder, factory, cfg


@pytest.fixture(scope="module")
def local_policy(trained_step):
    """The local trainer's policy of the same checkpoint and recipe (``trainer.py``: the recipe's pixel budget)."""
    _, _, _, cfg = trained_step
    low, high = cfg.model.processor_pixels(cfg.env.min_pixels, cfg.env.max_pixels)
    return HFPolicy.from_pretrained(COLDSTART, think_prefix=cfg.think_prefix, min_pixels=low, max_pixels=high,
                                    temperature=cfg.rollout.temperature)  # fmt: skip


def test_trl_loads_the_checkpoints_processor_through_its_own_class(trained_step):
    trainer, _, _, cfg = trained_step
    # a turn is capped as the local trainer caps it (TRL's own cap is the whole completion)
    assert trainer.generation_config.max_new_tokens == cfg.rollout.max_new_tokens == 256
    processor = trainer.processing_class
    # AutoProcessor's Qwen3-VL processor (its video part too: nothing routed around), at the card's budget
    assert type(processor).__module__.startswith("transformers.") and processor.video_processor is not None
    assert (processor.image_processor.size["shortest_edge"], processor.image_processor.size["longest_edge"]) == (784, 12544)


def test_the_first_prompt_is_the_local_trainers_token_for_token(trained_step, local_policy):
    trainer, recorder, factory, _ = trained_step
    first = recorder.calls[0]
    env = VideoToolEnv(factory.samples, **factory.options)
    obs, info = env.reset(**trainer.environments[0]._reset_args)
    local = local_policy.encode(observation_messages(obs, info))
    vision_start = local_policy.tokenizer.convert_tokens_to_ids("<|vision_start|>")
    for ids, grid in zip(rows(first), row_grids(first, rows(first), vision_start), strict=True):
        assert ids == local.input_ids, "TRL's prompt differs from the local trainer's"
        assert grid == local.image_grid_thw.tolist()
    pads = [int(np.prod(g)) // 4 for g in local.image_grid_thw.tolist()]
    # 112 x 112 frames at the card's 784-12,544 pixels: 96 x 96, 9 pads (the processor's own budget gave 16)
    assert set(pads) == {9} and len(pads) == info["frame_budget"]
    text = local_policy.tokenizer.decode(local.input_ids)
    # the tool as the env's system prompt names it, and no second schema (TRL's Qwen3-VL template's "# Tools")
    assert text.split("<|im_end|>")[0] == "<|im_start|>system\n" + system_prompt(factory.options["prompt_mode"])
    assert "# Tools" not in text
    assert text.endswith("<|im_start|>assistant\n<think>\n")


def test_a_turn_of_crops_continues_as_in_the_local_trainer(trained_step, local_policy):
    """TRL's second generate call (prompt, the first turn as generated, TRL's tool suffix with the crop frames)
    equals the local trainer's trajectory of the same turn, ids and image grids, for every rollout that cropped."""
    trainer, recorder, factory, cfg = trained_step
    tokenizer = local_policy.tokenizer
    im_end, vision_start = tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|vision_start|>")
    reset = trainer.environments[0]._reset_args
    prompt = rows(recorder.calls[0])[0]
    later = [c for c in recorder.calls[1:] if all(r[: len(prompt)] == prompt for r in rows(c))]
    assert later, "no rollout called the tool: the cold start crops 4-5 times an episode under the local trainer"
    compared = 0
    for ids, grid in zip(rows(later[0]), row_grids(later[0], rows(later[0]), vision_start), strict=True):
        turn = ids[len(prompt) : ids.index(im_end, len(prompt)) + 1]
        env = VideoToolEnv(factory.samples, **factory.options)
        obs, info = env.reset(**reset)
        history = observation_messages(obs, info)
        builder = TrajectoryBuilder(local_policy, local_policy.encode(history), history)
        text = cfg_prefix(cfg) + tokenizer.decode(turn[:-1], skip_special_tokens=False)
        builder.add_turn(Generation(text=text, token_ids=turn, logprobs=[0.0] * len(turn), prefix=cfg_prefix(cfg)))
        obs, _, terminated, truncated, info = env.step(text)
        assert not (terminated or truncated) and info["tool_calls"]["executed"] > 0
        builder.add_feedback(observation_messages(obs, info))
        assert ids == builder.encoded.input_ids, "TRL's tool suffix differs from the local trainer's feedback"
        assert grid == builder.encoded.image_grid_thw.tolist()
        compared += 1
    assert compared >= 1


def cfg_prefix(cfg) -> str:
    return "<think>\n" if cfg.think_prefix else ""


def test_the_step_trained_and_logged_the_crops(trained_step):
    trainer, *_ = trained_step
    [logs] = [h for h in trainer.state.log_history if "reward" in h]
    assert logs["paravt/crops_per_episode"] > 0 and logs["paravt/replay_mismatch"] == 0
    assert logs["paravt/rolled_back_tool_responses"] == 0 and np.isfinite(logs["loss"])
