"""A checkpoint that crops under the local trainer crops under TRL at the same rate: the repro's cold start, the
same videos and K, crops per episode under ``run_group`` and under ``GRPOTrainer`` (``crop_rate.measure``, at
test size: K in {8, 16}, 4-frame crops, 4 videos x 4 rollouts, ~2 min; the full measurement is in its docstring).
Before the adapter rendered the local trainer's prompt, TRL's rollouts of this checkpoint never called the tool."""

import importlib.util
from pathlib import Path

import pytest
from engine_env import engine_import  # tests/engine_env.py

engine_import("trl", "trl")
pytest.importorskip("torch")


def measure(**kwargs):
    """``crop_rate.measure`` (the script beside this file; the tests run with --import-mode=importlib)."""
    spec = importlib.util.spec_from_file_location("paravt_trl_crop_rate", Path(__file__).with_name("crop_rate.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.measure(**kwargs)


def test_the_cold_start_crops_under_trl_as_under_the_local_trainer(tmp_path):
    result = measure(videos=4, group=4, workdir=tmp_path, max_completion_length=2048,
                     overrides=("para.gating_choices=[8,16]", "env.crop_max_frames=4"))  # fmt: skip
    local, trl, diff = result["local"], result["trl"], result["trl_minus_local"]
    print({k: round(v["mean"], 3) for k, v in (("local", local), ("trl", trl), ("trl - local", diff))})
    assert local["mean"] >= 2, f"the cold start should crop under the local trainer: {local}"
    # within noise: TRL crops, and the paired difference over the same videos is within 3 standard errors of it
    # (and of a crop)
    assert trl["mean"] >= 1, f"the cold start does not crop under TRL: {trl}"
    assert abs(diff["mean"]) <= 3 * diff["se"] + 1.0, result
