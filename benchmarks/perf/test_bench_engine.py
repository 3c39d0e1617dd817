"""The rollout engine  against the path before it, side by side in one run, at 1 torch thread:

- ``rollout``: one RL step's rollouts (``prompts_per_step`` x ``group_size`` episodes, the same prompts and seed
  each round) with ``model.generate`` re-reading each conversation (``reference``) and with the engine;
- ``RL step``: the trainer's whole step, ``reference`` being ``model.generate`` plus the update as it was (every
  position's logits, the reference's images encoded per sequence);
- ``evaluation``: the main job's held-out episodes through ``paravt eval``'s harness, one episode at a time with
  ``model.generate`` (``reference``) and batched through the engine; greedy, so both give the same rows (checked
  here, row by row).

    PARAVT_BENCH_CHECKPOINT=runs/tiny/coldstart/model \\
    PARAVT_BENCH_REPRO_CHECKPOINT=runs/repro/coldstart/coldstart/model \\
        OMP_NUM_THREADS=1 python -m pytest benchmarks/perf/test_bench_engine.py --benchmark-only \\
        --benchmark-json=runs/bench_engine.json
    python -m benchmarks.perf.report runs/bench_engine.json

Without the checkpoints the tiny random-weight model is used (it writes ``max_new_tokens`` of noise every turn:
pure machinery throughput). Each row's ``extra_info`` holds generated tokens/s (all, and per turn), prefill
tokens/s and training tokens/s. The RL steps of the two paths sample different episodes (sampling is the same
distribution, not the same draws, once rows leave a batch), so tokens/s is the fairer comparison there.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import defaultdict
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from benchmarks.perf.model_setup import bench_checkpoint, one_thread  # noqa: E402
from paravt.learners.config import load_recipe  # noqa: E402
from paravt.learners.rollout import run_batch  # noqa: E402
from paravt.learners.trainer import Trainer  # noqa: E402

ROUNDS = int(os.environ.get("PARAVT_BENCH_ROUNDS", "3"))
HELDOUT = int(os.environ.get("PARAVT_BENCH_HELDOUT", "40"))


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    yield from one_thread()


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> str:
    return bench_checkpoint(tmp_path_factory, "PARAVT_BENCH_CHECKPOINT")


@pytest.fixture(scope="module")
def repro_checkpoint(tmp_path_factory) -> str:
    return bench_checkpoint(tmp_path_factory, "PARAVT_BENCH_REPRO_CHECKPOINT", "PARAVT_BENCH_CHECKPOINT")


def policy_as_before(policy) -> None:  # noqa: ANN001
    """``model.generate`` on left-padded batches re-reading every conversation, every frame processed anew."""
    from paravt.policies.vision_inputs import process_images

    policy.engine = "generate"
    policy._processed = lambda images, pixel_kwargs=None: process_images(policy.image_processor, images, pixel_kwargs)


def as_before(trainer: Trainer, monkeypatch) -> Trainer:  # noqa: ANN001
    """The trainer as it ran before the engine (``policy_as_before``), with an update in right-padded length
    buckets that computes every position's logits, each sequence whole, and encodes every image it is given."""
    from paravt.learners import trainer as trainer_module
    from paravt.policies.encoded import length_buckets

    def length_bucketed(policy, encodeds, masks, *, max_rows, max_tokens=None):  # noqa: ANN001, ANN202, ARG001
        return [(b, 0) for b in length_buckets([len(e.input_ids) for e in encodeds], max_rows=max_rows, max_tokens=max_tokens)]

    monkeypatch.setattr(trainer_module, "prompt_groups", length_bucketed)
    policy = trainer.policy
    policy_as_before(policy)
    scored_pass = policy.batch_logprobs

    def batch_logprobs(*args, scored=None, vision=None, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202, ARG001
        return scored_pass(*args, **kwargs)

    policy.batch_logprobs = batch_logprobs
    return trainer


def _trainer(tmp_path: Path, recipe: str, checkpoint: str, engine: str, monkeypatch) -> Trainer:  # noqa: ANN001
    cfg = load_recipe(recipe, [f"model.path={checkpoint}", "perception.steps=0", "sft.steps=0", "data.heldout_n=0"])
    out = tmp_path / f"{recipe}_{engine}"
    shutil.rmtree(out, ignore_errors=True)
    trainer = Trainer(cfg, out, progress=False)
    trainer._reference()
    return as_before(trainer, monkeypatch) if engine == "reference" else trainer


class TurnTimer:
    """Wraps a policy's ``generate_encoded``: seconds and generated tokens per turn of an episode (the n-th call of
    a ``run_batch`` is every live episode's n-th turn)."""

    def __init__(self, policy) -> None:  # noqa: ANN001
        self.policy, self.inner = policy, policy.generate_encoded
        self.turn = 0
        self.seconds: dict[int, float] = defaultdict(float)
        self.tokens: dict[int, int] = defaultdict(int)
        policy.generate_encoded = self

    def __call__(self, prompts, **kwargs):  # noqa: ANN001, ANN003, ANN204
        t0 = time.perf_counter()
        gens = self.inner(prompts, **kwargs)
        if kwargs.get("sessions") is not None or len(prompts) > 1 or self.turn == 0:
            self.seconds[self.turn] += time.perf_counter() - t0
            self.tokens[self.turn] += sum(len(g.token_ids) for g in gens)
            self.turn += 1
        return gens

    def per_turn(self) -> dict[str, float]:
        return {f"turn_{t + 1}_tokens_per_s": self.tokens[t] / self.seconds[t] for t in sorted(self.seconds) if self.seconds[t]}


def _rollout_round(trainer: Trainer, timer: TurnTimer) -> dict[str, float]:
    cfg = trainer.cfg
    size = cfg.rollout.group_size
    options = [{"sample": trainer.samples[i], "epoch": 0} for i in range(cfg.rollout.prompts_per_step) for _ in range(size)]
    torch.manual_seed(0)
    timer.turn = 0
    t0 = time.perf_counter()
    trajs = run_batch(trainer.envs, trainer.policy, options)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "tokens": sum(t.n_generated for t in trajs), "calls": sum(t.tool_calls for t in trajs)}


def _bench_rollout(benchmark, tmp_path, recipe: str, checkpoint: str, engine: str, monkeypatch) -> None:  # noqa: ANN001
    trainer = _trainer(tmp_path, recipe, checkpoint, engine, monkeypatch)
    timer = TurnTimer(trainer.policy)
    before = dict(trainer.policy.cached.stats)
    rows: list[dict] = []
    benchmark.pedantic(lambda: rows.append(_rollout_round(trainer, timer)), rounds=ROUNDS, iterations=1)
    seconds = sum(r["seconds"] for r in rows)
    info = {"tokens_per_s": sum(r["tokens"] for r in rows) / seconds,
            "tool_calls_per_rollout": sum(r["calls"] for r in rows) / (len(rows) * len(trainer.envs)), **timer.per_turn()}  # fmt: skip
    stats = trainer.policy.cached.stats
    if engine != "reference" and stats["prefill_s"] > before["prefill_s"]:
        info["prefill_tokens_per_s"] = (stats["prefill_tokens"] - before["prefill_tokens"]) / (stats["prefill_s"] - before["prefill_s"])
        info["reused_fraction"] = (stats["reused_tokens"] - before["reused_tokens"]) / max(
            1, stats["reused_tokens"] - before["reused_tokens"] + stats["prefill_tokens"] - before["prefill_tokens"])
    benchmark.extra_info.update(info)
    trainer.close()


def _bench_step(benchmark, tmp_path, recipe: str, checkpoint: str, engine: str, monkeypatch) -> None:  # noqa: ANN001
    trainer = _trainer(tmp_path, recipe, checkpoint, engine, monkeypatch)
    rows: list[dict] = []
    torch.manual_seed(0)
    benchmark.pedantic(lambda: rows.append(trainer.rl_step()), rounds=ROUNDS, iterations=1)
    for key in ("tokens_per_s", "train_tokens_per_s", "rollout_s", "reference_s", "update_s", "tool_calls_per_rollout"):
        benchmark.extra_info[key] = sum(r[key] for r in rows) / len(rows)
    trainer.close()


@pytest.mark.parametrize("engine", ["reference", "engine"])
@pytest.mark.benchmark(group="rollout, tiny_cpu (4 prompts x 4 rollouts)")
def test_rollout_tiny(benchmark, monkeypatch, tmp_path, tiny_checkpoint, engine):
    _bench_rollout(benchmark, tmp_path, "tiny_cpu", tiny_checkpoint, engine, monkeypatch)


@pytest.mark.parametrize("engine", ["reference", "engine"])
@pytest.mark.benchmark(group="rollout, repro_cpu (2 prompts x 4 rollouts, K up to 64)")
def test_rollout_repro(benchmark, monkeypatch, tmp_path, repro_checkpoint, engine):
    _bench_rollout(benchmark, tmp_path, "repro_cpu", repro_checkpoint, engine, monkeypatch)


@pytest.mark.parametrize("engine", ["reference", "engine"])
@pytest.mark.benchmark(group="RL step, tiny_cpu")
def test_rl_step_tiny(benchmark, monkeypatch, tmp_path, tiny_checkpoint, engine):
    _bench_step(benchmark, tmp_path, "tiny_cpu", tiny_checkpoint, engine, monkeypatch)


@pytest.mark.parametrize("engine", ["reference", "engine"])
@pytest.mark.benchmark(group="RL step, repro_cpu")
def test_rl_step_repro(benchmark, monkeypatch, tmp_path, repro_checkpoint, engine):
    _bench_step(benchmark, tmp_path, "repro_cpu", repro_checkpoint, engine, monkeypatch)


@pytest.fixture(scope="module")
def heldout(tmp_path_factory):
    """The main job's held-out videos (``PARAVT_BENCH_HELDOUT_DATA``: a run's ``RUN/heldout``; else built from
    ``tiny_cpu``'s data.heldout_* settings), the first ``PARAVT_BENCH_HELDOUT``."""
    from paravt_env import load_samples
    from paravt_env.data.synthetic import generate_dataset

    given = os.environ.get("PARAVT_BENCH_HELDOUT_DATA")
    if given:
        return load_samples(given)[:HELDOUT]
    cfg = load_recipe("tiny_cpu", ["perception.steps=0", "sft.steps=0"])
    synth = cfg.data.synth_config(n=HELDOUT, seed=cfg.data.heldout_seed)
    return generate_dataset(tmp_path_factory.mktemp("heldout"), synth, progress=False)


EVAL_ROWS: dict[str, dict] = {}


@pytest.mark.parametrize("engine", ["reference", "engine"])
@pytest.mark.benchmark(group="evaluation, the main job's held-out set")
def test_eval_heldout(benchmark, tmp_path, tiny_checkpoint, heldout, engine):
    from paravt.evaluation.harness import eval_options, evaluate
    from paravt.evaluation.policy_specs import make_agent_factory
    from paravt.evaluation.store import read_results

    spec = f"hf:{tiny_checkpoint}"
    factory, _ = make_agent_factory(spec, max_new_tokens=256)
    policy = factory().policy
    if engine == "reference":
        policy_as_before(policy)
    options = eval_options(spec, "parallel")
    rounds = []

    def run() -> None:
        out = tmp_path / f"eval_{engine}_{len(rounds)}"
        evaluate(heldout, factory, out, options, progress=False, concurrency=1 if engine == "reference" else None)
        rounds.append(out)

    benchmark.pedantic(run, rounds=max(1, ROUNDS - 1), iterations=1)
    rows = {r["id"]: {k: r[k] for k in ("prediction", "correct", "tool_calls", "turns")} for r in read_results(rounds[-1] / "results.jsonl")}
    EVAL_ROWS[engine] = rows
    benchmark.extra_info["correct"] = sum(r["correct"] for r in rows.values())
    benchmark.extra_info["tool_calls"] = sum(r["tool_calls"] for r in rows.values())
    benchmark.extra_info["turns"] = sum(r["turns"] for r in rows.values())
    if len(EVAL_ROWS) == 2:
        same = sum(EVAL_ROWS["reference"][k] == EVAL_ROWS["engine"].get(k) for k in EVAL_ROWS["reference"])
        benchmark.extra_info["rows_identical"] = f"{same}/{len(EVAL_ROWS['reference'])}"
