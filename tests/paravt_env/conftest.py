"""Fixtures of the env tests: one small synthetic dataset per session (four 40-90 s videos, ~2 s to build)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def env_dataset(tmp_path_factory):
    """``(directory, samples)``: four short needle videos with one question each; ``samples.jsonl`` in the dir."""
    from paravt_env.data.synth_plan import SynthConfig
    from paravt_env.data.synthetic import generate_dataset

    out = tmp_path_factory.mktemp("env_synth")
    samples = generate_dataset(
        out, SynthConfig(n=4, seed=7, min_duration=40, max_duration=90), progress=False
    )
    assert len(samples) == 4 and (out / "samples.jsonl").is_file()
    return out, samples


@pytest.fixture(scope="session")
def env_samples(env_dataset):
    return env_dataset[1]


@pytest.fixture(scope="session")
def mcq_sample(env_samples):
    return next(s for s in env_samples if s.question_type == "mcq")
