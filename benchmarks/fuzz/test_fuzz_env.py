"""The long fuzz of ``VideoToolEnv``: every protocol and tool-result mode, ``PARAVT_FUZZ_STEPS`` (default 5000)
fuzzed turns each, every transition checked against the env's contract. Not part of the test suite (minutes):

    python -m pytest benchmarks/fuzz/test_fuzz_env.py -s

It prints what each mode reached (crops executed, episodes, truncations) and turns per second."""

from __future__ import annotations

import os
import time

import pytest

from benchmarks.fuzz.env_fuzz import MODES, fuzz_env, run_fuzz


@pytest.fixture(scope="module")
def fuzz_samples(tmp_path_factory):
    from paravt_env.data.synth_plan import SynthConfig
    from paravt_env.data.synthetic import generate_dataset

    out = tmp_path_factory.mktemp("fuzz_synth")
    return generate_dataset(out, SynthConfig(n=6, seed=11, min_duration=30, max_duration=120), progress=False)


@pytest.mark.parametrize("mode", list(MODES))
def test_long_fuzz(fuzz_samples, mode):
    steps = int(os.environ.get("PARAVT_FUZZ_STEPS", "5000"))
    env = fuzz_env(fuzz_samples, mode)
    t0 = time.perf_counter()
    counts = run_fuzz(env, steps, seed=int(os.environ.get("PARAVT_FUZZ_SEED", "7")))
    wall = time.perf_counter() - t0
    env.close()
    print(f"\nfuzz {mode}: {counts}, {steps / wall:.0f} turns/s")
    assert counts["steps"] == steps and counts["crops_executed"] > 0 and counts["episodes"] > 0
