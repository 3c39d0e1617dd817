"""Seconds per RL step of the local trainer at torch's default thread count (one per core: the reference) and at
``paravt.learners.threads``' default (half the cores), on an idle machine and beside a competing process (one core
kept busy by a spinning Python process), side by side in one run.

    python -m pytest benchmarks/perf/test_threads.py --benchmark-only --benchmark-json=runs/bench_threads.json
    python -m benchmarks.perf.report runs/bench_threads.json

The step is ``Trainer.rl_step`` of the ``tiny_cpu`` recipe on the tiny random-weight model (batched rollouts in the
env, the update against the frozen reference): the machinery a CPU user runs. Run it on an otherwise idle machine;
the "busy" rows add their own competitor.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

from paravt.learners.config import load_recipe  # noqa: E402
from paravt.learners.trainer import Trainer  # noqa: E402

ROUNDS = 3


@pytest.fixture(scope="module")
def trainer(tmp_path_factory) -> Trainer:
    from paravt.policies.tiny_model import build_tiny_model

    root = tmp_path_factory.mktemp("bench_threads")
    model = build_tiny_model(root / "model", arch="qwen3_vl", seed=0)
    cfg = load_recipe("tiny_cpu", [f"model.path={model}", "perception.steps=0", "sft.steps=0", "data.synth_n=8",
                                   "data.heldout_n=0", "rollout.max_new_tokens=48"])  # fmt: skip
    shutil.rmtree(root / "run", ignore_errors=True)
    t = Trainer(cfg, root / "run", progress=False)
    t._reference()
    t.rl_step()  # warm-up: allocator, decoder caches
    yield t
    t.close()


@pytest.fixture(params=["idle", "busy"])
def load(request):
    """``busy``: one core taken by a spinning process for the whole measurement, as on a shared machine."""
    if request.param == "idle":
        yield "idle"
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.5)
    try:
        yield "busy"
    finally:
        spinner.kill()
        spinner.wait()


@pytest.mark.parametrize("choice", ["reference_torch_default", "paravt_default"])
def test_rl_step_seconds(benchmark, trainer, load, choice):
    """``reference_torch_default``: one thread per usable core (torch's own choice); ``paravt_default``: what
    ``paravt.learners.threads`` picks (half the cores). On 2 cores: 2 against 1 thread."""
    from paravt.learners.threads import available_cpus, default_threads

    threads = available_cpus() if choice == "reference_torch_default" else default_threads()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        benchmark.group = f"tiny_cpu RL step, {load}"
        benchmark.extra_info.update(threads=threads, load=load)
        benchmark.pedantic(trainer.rl_step, rounds=ROUNDS, iterations=1)
    finally:
        torch.set_num_threads(before)
