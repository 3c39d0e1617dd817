"""Lengths a user can pick: a ``max_completion_length`` too short for one turn of the env's crops is refused with
the env settings that would make it fit (each the largest that fits), and the docs' TRL example fits."""

import dataclasses
import re
from pathlib import Path

import pytest

from paravt.learners.adapters.budget import token_budget
from paravt.learners.adapters.trl.recipe import check_completion_length, fitting_settings, one_turn
from paravt_env import EnvConfig

DOCS = Path(__file__).resolve().parents[5] / "docs/engines.md"


def refused(env: EnvConfig, pads: int, length: int) -> str:
    budget = token_budget(env, max_new_tokens=256, cell=32, pads_per_frame=pads)
    with pytest.raises(ValueError) as exc:
        check_completion_length(budget, env, length, allow_rolled_back=False)
    return str(exc.value)


def test_the_refusal_names_the_settings_that_fit():
    # the numbers: the env's defaults (5 crops of 16 frames) at the tiny model's 12 pads and Qwen3-VL's 64
    message = refused(EnvConfig(), 12, 2048)
    assert "max_completion_length=2048 cannot hold one turn of 5 parallel crops of 16 frames (3904 tokens at 12" in message
    assert "max_parallel=2 (1600 tokens)" in message and "crop_max_frames=5 (1924 tokens)" in message
    assert "no pixel budget alone: the text of 5 crops of 16 frames is 2944 tokens" in message
    assert "Raise max_completion_length to 3904" in message and "allow_rolled_back_crops=True" in message
    assert "no single env setting fits it (the least turn, 1 crop of 1 frame at 1 image pad, is 281 tokens)" in refused(EnvConfig(), 12, 160)
    assert "(8064 tokens at 64 image pads" in refused(EnvConfig(), 64, 2048)
    # where fewer pixels fit, their bound is named, in pixels a frame as the env and the processor take them
    message = refused(EnvConfig(max_parallel=2, crop_max_frames=8), 64, 1024)
    fit = fitting_settings(EnvConfig(max_parallel=2, crop_max_frames=8), 64, 1024)
    assert f"max_pixels={fit['pads_per_frame'] * 1024} ({fit['pads_per_frame']} image pads a frame" in message


@pytest.mark.parametrize("env, pads, length", [(EnvConfig(), 12, 2048), (EnvConfig(), 64, 2048), (EnvConfig(), 64, 4096),
                                               (EnvConfig(max_parallel=2, crop_max_frames=8), 64, 1024),
                                               (EnvConfig(max_parallel=3, crop_max_frames=4), 9, 700)])  # fmt: skip
def test_each_named_setting_fits_and_is_the_largest_that_does(env, pads, length):
    fit = fitting_settings(env, pads, length)
    assert fit, "nothing fits"
    for key, value in fit.items():
        changed, q = (env, value) if key == "pads_per_frame" else (dataclasses.replace(env, **{key: value}), pads)
        assert one_turn(changed, q) <= length
        budget = token_budget(changed, max_new_tokens=256, cell=32, pads_per_frame=q)
        check_completion_length(budget, changed, length, allow_rolled_back=False)  # accepted
        bigger, q1 = (env, value + 1) if key == "pads_per_frame" else (dataclasses.replace(env, **{key: value + 1}), pads)
        assert one_turn(bigger, q1) > length or (key != "pads_per_frame" and value == getattr(env, key))


def test_the_docs_trl_example_fits():
    """docs/engines.md's ``grpo_trainer`` example: its env and ``max_completion_length`` hold a whole episode at
    Qwen3-VL's pads (the env's 50,176 pixels a frame, 49 pads; 64 at the processor's own budget)."""
    section = DOCS.read_text().split("## TRL (`GRPOTrainer`)", 1)[1].split("\n## ", 1)[0]
    kwargs = dict(re.findall(r"(\w+)=(\d+)", re.search(r"VideoToolEnv\(samples, ([^)]*)\)", section).group(1)))
    env = EnvConfig(**{k: int(v) for k, v in kwargs.items()})
    length = int(re.search(r"max_completion_length=(\d+)", section).group(1))
    for pads in (49, 64):
        budget = token_budget(env, max_new_tokens=256, cell=32, pads_per_frame=pads)
        assert one_turn(env, pads) <= length and budget.response <= length, (pads, budget)
