"""A checkpoint's policy card fills the eval options the command line leaves out."""

import pytest

from learners.policies.card import read_card, write_card
from benchmarks.evaluation import eval_options


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
