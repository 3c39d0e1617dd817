"""The pixel budget TRL's processor runs at is the local trainer's: from ``pixels=``, else the recipe's, else the
checkpoint's card, else the env's; applied to the image processor's own ``size``, which is all TRL's calls read
(it passes no pixel arguments), it pads a frame as ``HFPolicy`` does with its per-call ``size``."""

import copy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from paravt.learners.adapters.trl.recipe import apply_pixels, processor_pixels, recipe_env
from paravt.learners.config import load_recipe
from paravt_env import EnvConfig

pytest.importorskip("torch")
COLDSTART = Path(__file__).resolve().parents[5] / "results/repro/repro_cpu/coldstart/coldstart/model"


def test_the_budget_comes_from_the_argument_the_recipe_the_card_then_the_env(synth_small, tmp_path, caplog):
    _, samples = synth_small
    plain = lambda: None  # noqa: E731  (a plain env factory carries no budget)
    env = EnvConfig(min_pixels=1000, max_pixels=50176)
    # the card of the repro's cold start: 784-12,544 pixels (what it was trained at), over the env's
    assert processor_pixels(str(COLDSTART), plain, env) == ((784, 12544), f"the checkpoint's card ({COLDSTART}/paravt.json)")
    # no card (a hub id, a loaded model, a directory without one): the env's, the local trainer's default
    for model in (str(tmp_path), "Qwen/Qwen3-VL-2B-Instruct", object()):
        assert processor_pixels(model, plain, env) == ((1000, 50176), "the env's min_pixels / max_pixels")
    # a recipe's env: its model.processor_*_pixels (the release's processor budget here), over the card, warned
    released = recipe_env(load_recipe("repro_cpu", ["model.processor_min_pixels=65536", "model.processor_max_pixels=16777216"]), samples)
    assert processor_pixels(str(COLDSTART), released, env)[0] == (65536, 16777216)
    assert "differs from the one" in caplog.text
    assert processor_pixels(str(COLDSTART), recipe_env(load_recipe("repro_cpu"), samples), env)[0] == (784, 12544)
    assert processor_pixels(str(COLDSTART), released, env, (3136, 9000)) == ((3136, 9000), "pixels=")
    with pytest.raises(ValueError, match="min_pixels <= max_pixels"):
        processor_pixels(str(COLDSTART), plain, env, (9000, 3136))


def test_the_applied_budget_pads_a_frame_as_the_local_policy_does():
    from paravt.policies.hf import HFPolicy

    local = HFPolicy.from_pretrained(COLDSTART, min_pixels=784, max_pixels=12544)
    frame = np.random.default_rng(0).integers(0, 255, (112, 112, 3), np.uint8)
    ip = copy.deepcopy(local.image_processor)
    before = ip(images=[frame], return_tensors="pt")["image_grid_thw"].tolist()
    apply_pixels(SimpleNamespace(image_processor=ip), (784, 12544))
    after = ip(images=[frame], return_tensors="pt")
    pixel_values, grid = local.process_images([frame])
    assert before == [[1, 8, 8]] and after["image_grid_thw"].tolist() == grid.tolist() == [[1, 6, 6]]  # 16 pads -> 9
    assert np.array_equal(after["pixel_values"].numpy(), pixel_values.numpy())


def test_use_vllm_is_refused_unless_vllm_would_process_frames_at_the_trained_budget(synth_small, tmp_path):
    """TRL builds its vLLM with no processor arguments: vLLM reads the checkpoint's preprocessor_config.json. Unless
    that budget is the local trainer's, the policy would generate from other frames than it trains on: refused, by
    name, before the model loads; a checkpoint carrying the budget passes, in either vLLM mode."""
    import json
    import shutil

    from transformers import AutoImageProcessor

    from paravt.learners.adapters.budget import processor_budget
    from paravt.learners.adapters.trl.recipe import check_vllm_pixels

    own = processor_budget(AutoImageProcessor.from_pretrained(COLDSTART))[:2]
    assert own != (784, 12544)  # the tiny processor's own budget is not the cold start's trained one
    with pytest.raises(ValueError, match=rf"vllm_mode=colocate.*{own[0]}-{own[1]} pixels.*784-12544"):
        check_vllm_pixels(str(COLDSTART), (784, 12544), "colocate")
    check_vllm_pixels(str(COLDSTART), own, "server")  # trained at the checkpoint's budget: nothing to refuse
    written = tmp_path / "model"
    shutil.copytree(COLDSTART, written)
    config = json.loads((written / "preprocessor_config.json").read_text())
    config.setdefault("size", {}).update({"shortest_edge": 784, "longest_edge": 12544})
    (written / "preprocessor_config.json").write_text(json.dumps(config))
    check_vllm_pixels(str(written), (784, 12544), "colocate")


def test_grpo_trainer_refuses_use_vllm_before_trl_builds_anything(synth_small, tmp_path):
    trl = pytest.importorskip("trl")
    from paravt.learners.adapters.trl import grpo_trainer
    from paravt_env import VideoToolEnv

    _, samples = synth_small
    with pytest.raises(ValueError, match="use_vllm"):
        grpo_trainer(str(COLDSTART), env=lambda: VideoToolEnv(samples), n_samples=len(samples), pixels=(784, 12544),
                     output_dir=str(tmp_path / "trl"), use_vllm=True, use_cpu=True)  # fmt: skip
    assert trl.__version__ and not (tmp_path / "trl").exists()
