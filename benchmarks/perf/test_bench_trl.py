"""The local trainer's RL step against TRL's ``GRPOTrainer`` at equal work, side by side in one run, 1 thread:
one prompt, 16 rollouts, one turn (no tool: TRL and the local trainer then do the same thing), at most 256 new
tokens, temperature 0.7, the KL to a frozen reference in the loss (TRL ``beta`` = the recipe's ``kl_coef``), one
optimiser step per batch, on the same checkpoint and the same synthetic videos.

Runs in the TRL environment (``nox -s "engine(name='trl')"`` builds it; it has this project installed):

    PARAVT_BENCH_CHECKPOINT=runs/tiny/coldstart/model OMP_NUM_THREADS=1 \\
        .nox/engine-name-trl/bin/python -m pytest benchmarks/perf/test_bench_trl.py --benchmark-only \\
        --benchmark-json=runs/bench_trl.json
    python -m benchmarks.perf.report runs/bench_trl.json

Each side's time is that of ``STEPS`` steps from a fresh trainer (its first step included on both sides).
``extra_info`` holds generated tokens/s (what each step generated over its wall time): the two sample different
completions, so seconds per step move with their lengths.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from benchmarks.perf.model_setup import bench_checkpoint, one_thread  # noqa: E402
from paravt.learners.config import load_recipe  # noqa: E402
from paravt.learners.trainer import Trainer  # noqa: E402

STEPS = int(os.environ.get("PARAVT_BENCH_STEPS", "4"))
"""Steps timed in one round, on each side: a round is ``STEPS`` steps (TRL's ``train()`` runs them in one call)."""
ROLLOUTS, NEW_TOKENS, TEMPERATURE = 16, 256, 0.7
OVERRIDES = ["perception.steps=0", "sft.steps=0", "data.heldout_n=0", "env.max_turns=1", "para.nframes_gating=false",
             "rollout.prompts_per_step=1", f"rollout.group_size={ROLLOUTS}", f"rollout.max_new_tokens={NEW_TOKENS}",
             f"rollout.temperature={TEMPERATURE}", "optim.micro_batch=16"]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    yield from one_thread()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    return bench_checkpoint(tmp_path_factory, "PARAVT_BENCH_CHECKPOINT")


@pytest.mark.benchmark(group="RL step at equal work: 1 prompt x 16 rollouts, one turn")
def test_step_local(benchmark, tmp_path, checkpoint):
    cfg = load_recipe("tiny_cpu", [f"model.path={checkpoint}", *OVERRIDES])
    out = tmp_path / "local"
    shutil.rmtree(out, ignore_errors=True)
    trainer = Trainer(cfg, out, progress=False)
    trainer._reference()
    rows: list[dict] = []
    torch.manual_seed(0)
    t0 = time.perf_counter()
    benchmark.pedantic(lambda: rows.extend(trainer.rl_step() for _ in range(STEPS)), rounds=1, iterations=1)
    generated = sum(r["tokens_per_s"] * r["rollout_s"] for r in rows)
    benchmark.extra_info["tokens_per_s"] = generated / (time.perf_counter() - t0)
    benchmark.extra_info["completion_tokens"] = generated / len(rows) / ROLLOUTS
    trainer.close()


@pytest.mark.benchmark(group="RL step at equal work: 1 prompt x 16 rollouts, one turn")
def test_step_reference_trl(benchmark, tmp_path, checkpoint, monkeypatch):
    from paravt.learners.adapters.trl import grpo_trainer, recipe_env
    from paravt.learners.run_setup import resolve_data

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    cfg = load_recipe("tiny_cpu", [f"model.path={checkpoint}", *OVERRIDES])
    samples = resolve_data(cfg)
    samples = samples[0] if isinstance(samples, tuple) else samples
    trainer = grpo_trainer(checkpoint, env=recipe_env(cfg, samples), n_samples=len(samples), output_dir=str(tmp_path / "trl"),
                           max_steps=STEPS, per_device_train_batch_size=ROLLOUTS, num_generations=ROLLOUTS,
                           use_cpu=True, report_to=[], logging_steps=1, learning_rate=cfg.optim.lr,
                           temperature=TEMPERATURE, beta=cfg.grpo.kl_coef, save_strategy="no", seed=0,
                           max_completion_length=NEW_TOKENS, max_tool_calling_iterations=0,
                           allow_rolled_back_crops=True)  # one turn: no tool response to roll back  # fmt: skip
    t0 = time.perf_counter()
    benchmark.pedantic(trainer.train, rounds=1, iterations=1)
    logs = [h for h in trainer.state.log_history if "completions/mean_length" in h]
    assert len(logs) == STEPS
    generated = sum(h["completions/mean_length"] * ROLLOUTS for h in logs)
    benchmark.extra_info["tokens_per_s"] = generated / (time.perf_counter() - t0)
    benchmark.extra_info["completion_tokens"] = generated / len(logs) / ROLLOUTS
