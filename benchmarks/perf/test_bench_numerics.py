"""What the pinned CPU numerics cost (``paravt.learners.cpu_numerics``: AVX2 kernels, MKL's AVX2 path, no oneDNN)
against torch's own choice (``PARAVT_NATIVE_NUMERICS=1``: AVX-512 where the CPU has it), side by side in one run:
RL steps of the tiny recipe at 1 thread, each arm in its own process (the pins are read before torch's first
operation, so one process cannot measure both).

    PARAVT_BENCH_CHECKPOINT=runs/tiny/coldstart/model \\
        python -m pytest benchmarks/perf/test_bench_numerics.py --benchmark-only --benchmark-json=runs/bench_numerics.json
    python -m benchmarks.perf.report runs/bench_numerics.json

A round is one process: its setup, then ``STEPS`` RL steps; each row's ``extra_info`` holds the steps' own seconds
(``steps_s``, the figure to compare: the rounds' totals include loading the model). Without
``PARAVT_BENCH_CHECKPOINT`` a tiny random-weight model writes noise to the token cap every turn.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.perf.model_setup import bench_checkpoint

STEPS = 3
ROUNDS = 3

WORKLOAD = """
import json, sys, time
from paravt.learners.threads import set_torch_threads
set_torch_threads(1)
from paravt.learners.config import load_recipe
from paravt.learners.trainer import Trainer
cfg = load_recipe("tiny_cpu", [f"model.path={sys.argv[1]}", "perception.steps=0", "sft.steps=0", "data.synth_n=8",
                               "data.heldout_n=0", "seed=0"])
trainer = Trainer(cfg, sys.argv[2], progress=False)
steps = []
for _ in range(int(sys.argv[3])):
    t0 = time.perf_counter()
    trainer.rl_step()
    steps.append(time.perf_counter() - t0)
from paravt.learners.cpu_numerics import numerics_record
print(json.dumps({"steps_s": steps, **numerics_record()}))
"""


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    return bench_checkpoint(tmp_path_factory, "PARAVT_BENCH_CHECKPOINT")


ARMS = {
    "reference": {"PARAVT_NATIVE_NUMERICS": "1"},  # torch's own choice: AVX-512 kernels where the CPU has them
    "pinned": {},  # what every entry point does: AVX2 kernels, MKL's AVX2 path, oneDNN off
    # the pins with oneDNN left on at AVX2: what turning oneDNN off costs (its convolution kernels also depend on
    # cache sizes, which is why the pins turn it off)
    "pinned_onednn_avx2": {"PARAVT_NATIVE_NUMERICS": "1", "ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2",
                           "ONEDNN_MAX_CPU_ISA": "AVX2"},
}  # fmt: skip


def _one_process(checkpoint: str, out: Path, arm: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "PARAVT_NATIVE_NUMERICS", "ONEDNN_MAX_CPU_ISA")}  # fmt: skip
    env.update(ARMS[arm])
    run = subprocess.run([sys.executable, "-c", WORKLOAD, checkpoint, str(out), str(STEPS)], env=env,
                         capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.benchmark(group="rl-step-numerics")
@pytest.mark.parametrize("numerics", list(ARMS))
def test_rl_steps(benchmark, checkpoint, tmp_path, numerics):
    results = []

    def one_round():
        out = tmp_path / f"run{len(results)}"
        results.append(_one_process(checkpoint, out, numerics))

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    steps = [s for r in results for s in r["steps_s"]]
    benchmark.extra_info.update(steps_s=steps, step_s_median=statistics.median(steps),
                                cpu_capability=results[0]["cpu_capability"], onednn=results[0]["onednn"])  # fmt: skip
    assert results[0]["cpu_capability"] == "AVX2" or numerics == "reference"
    assert results[0]["onednn"] is (numerics != "pinned")
