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
