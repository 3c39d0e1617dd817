"""A checkpoint's policy card fills the eval options the command line leaves out."""

import pytest

from paravt.evaluation.harness import eval_options
from paravt.policies.card import read_card, write_card


def test_card_round_trip_and_eval_precedence(tmp_path):
    assert read_card(tmp_path) == {}
    env = {"frame_budget": 8, "crop_fps": 0.5, "crop_max_frames": 8, "max_pixels": 12544, "min_pixels": 784, "other": 1}
    write_card(tmp_path, think_prefix=True, env=env)
    card = read_card(tmp_path)
    assert card["think_prefix"] is True and "other" not in card["env"]
    opts = eval_options(f"hf:{tmp_path}")
    assert (opts.frame_budget, opts.crop_fps, opts.crop_max_frames, opts.max_pixels) == (8, 0.5, 8, 12544)
    assert opts.response_prefix == "<think>\n" and opts.max_turns == 3  # not on the card: the paper's default
    opts = eval_options(f"hf:{tmp_path}", frame_budget=64)
    assert opts.frame_budget == 64  # the command line wins
    # scripted policies and released checkpoints: the paper's defaults
    assert eval_options("detector").frame_budget == 64


def test_missing_checkpoint_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        eval_options(f"hf:{tmp_path / 'nope'}")


def test_hf_policy_runs_its_image_processor_at_the_trained_pixel_budget(tiny_qwen3):
    """A 112 px frame is 3x3 merged tokens at the tiny recipe's budget (12544) but 4x4 at the processor's default:
    the evaluated policy must see frames as it saw them in training."""
    import numpy as np

    from paravt.policies import agent_for_spec

    frame = np.zeros((112, 112, 3), np.uint8)
    make, _ = agent_for_spec(f"hf:{tiny_qwen3}")
    assert make().policy._encode_text("<|image_pad|>", [frame]).image_grid_thw.tolist() == [[1, 8, 8]]
    write_card(tiny_qwen3, think_prefix=False, env={"min_pixels": 784, "max_pixels": 12544})
    try:
        make, _ = agent_for_spec(f"hf:{tiny_qwen3}")
        assert make().policy._encode_text("<|image_pad|>", [frame]).image_grid_thw.tolist() == [[1, 6, 6]]
    finally:
        (tiny_qwen3 / "paravt.json").unlink()


def test_the_release_processor_budget_upscales_small_frames_and_the_card_keeps_it(tiny_qwen3, tmp_path):
    """Qwen3-VL's processor at its own budget (shortest_edge 65,536, as the release loads it) turns a 224x224
    frame sampled at 784-50,176 pixels into 256x256: a 16x16 patch grid (64 tokens after the 2x2 merge),
    where the env's budget keeps it 14x14 (49 tokens). Hand-computed: 50,176 < 65,536, so smart_resize scales
    by sqrt(65,536 / 50,176) and rounds up to the factor 32: 224 / 0.875 = 256."""
    import numpy as np
    import pytest

    pytest.importorskip("torch")
    from paravt.learners.config import load_recipe
    from paravt.policies.card import trained_pixels, write_card
    from paravt.policies.hf import HFPolicy

    frame = np.zeros((224, 224, 3), dtype=np.uint8)
    cfg = load_recipe("paragrpo_qwen3vl_8b_release")
    low, high = cfg.model.processor_pixels(cfg.env.min_pixels, cfg.env.max_pixels)
    assert (low, high) == (65536, 16777216)
    release = HFPolicy.from_pretrained(tiny_qwen3, min_pixels=low, max_pixels=high)
    ours = HFPolicy.from_pretrained(tiny_qwen3, min_pixels=cfg.env.min_pixels, max_pixels=cfg.env.max_pixels)
    assert release.process_images([frame])[1].tolist() == [[1, 16, 16]]
    assert ours.process_images([frame])[1].tolist() == [[1, 14, 14]]
    assert load_recipe("tiny_cpu").model.processor_pixels(784, 50176) == (784, 50176)  # default: the env's
    write_card(tmp_path, think_prefix=True, env={"min_pixels": 784, "max_pixels": 50176},
               processor_pixels={"min_pixels": low, "max_pixels": high})  # fmt: skip
    assert trained_pixels(tmp_path) == {"min_pixels": 65536, "max_pixels": 16777216}
