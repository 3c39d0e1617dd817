"""Seconds per RL step and generated tokens/s of the local trainer on the tiny recipe, side by side in one run:

- ``reference``: the step as the trainer ran it before (one batched generation per prompt's group, one
  forward/backward pass per trajectory, the long ``agentic`` system prompt);
- ``batched``: the trainer's step (every prompt and rollout of the step in one batched generation per turn,
  micro-batched update), same ``agentic`` prompt;
- ``batched_compact``: the same with the recipe's ``agentic_compact`` prompt (what ``tiny_cpu`` runs);
- ``repro_cpu`` from the committed cold start on one core (``one_core``: the update's chunks one after another,
  each turn's envs before its generation) or with the second core (``second_core``: the update pipelined,
  ``paravt.learners.pipelined_update``, and the envs beside the generation, ``paravt.learners.rollout``: what
  the trainer does where a core is free); the same rollouts and the same floats.

    PARAVT_BENCH_CHECKPOINT=runs/tiny/coldstart/model \\
        python -m pytest benchmarks/perf/test_bench_rl_step.py --benchmark-only --benchmark-json=runs/bench_rl.json
    python -m benchmarks.perf.report runs/bench_rl.json

``PARAVT_BENCH_CHECKPOINT`` (a cold start of the main job) gives the recipe's real episodes: answers, parallel
crops. Without it the tiny random-weight model is used: it writes ``max_new_tokens`` of noise every turn, so the
numbers are pure machinery throughput. Tokens/s is in each row's ``extra_info``.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from paravt.learners import trainer as trainer_module  # noqa: E402
from paravt.learners.config import load_recipe  # noqa: E402
from paravt.learners.grpo import (  # noqa: E402
    clipped_policy_loss,
    kl_penalty,
    masked_mean,
    sequence_advantages,  # noqa: E402
)
from paravt.learners.metrics import rollout_metrics  # noqa: E402
from paravt.learners.rollout import run_group  # noqa: E402
from paravt.learners.trainer import Trainer  # noqa: E402

ROUNDS = 4
REPRO_COLDSTART = Path(__file__).resolve().parents[2] / "results" / "repro" / "repro_cpu" / "coldstart" / "coldstart" / "model"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    given = os.environ.get("PARAVT_BENCH_CHECKPOINT")
    if given:
        return given
    from paravt.policies.tiny_model import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("bench_rl") / "model", arch="qwen3_vl", seed=0))


def _trainer(tmp_path: Path, checkpoint: str, prompt_mode: str) -> Trainer:
    cfg = load_recipe("tiny_cpu", [f"model.path={checkpoint}", "perception.steps=0", "sft.steps=0", "data.synth_n=8",
                                   "data.heldout_n=0", f"env.prompt_mode={prompt_mode}"])  # fmt: skip
    out = tmp_path / prompt_mode
    shutil.rmtree(out, ignore_errors=True)
    trainer = Trainer(cfg, out, progress=False)
    trainer._reference()
    return trainer


def reference_step(trainer: Trainer) -> dict[str, float]:
    """The step before batching: a generation batch per group, a forward/backward pass per trajectory."""
    cfg, policy = trainer.cfg, trainer.policy
    t0 = time.perf_counter()
    policy.model.eval()
    size = cfg.rollout.group_size
    groups = [run_group(trainer.envs[:size], policy, options={"sample": trainer.samples[i], "epoch": e})
              for i, e in trainer.next_prompts(cfg.rollout.prompts_per_step)]  # fmt: skip
    rollout_s = time.perf_counter() - t0
    advantages = sequence_advantages([[t.reward for t in g] for g in groups], cfg.grpo)
    policy.model.train()
    trainer.optimizer.zero_grad()
    for g, adv in zip(groups, advantages, strict=True):
        for tr, a in zip(g, adv, strict=True):
            mask = torch.tensor(tr.loss_mask[1:], dtype=torch.float32)
            if mask.sum() == 0:
                continue
            logp = policy.sequence_logprobs(tr.encoded)
            old = torch.tensor(tr.logprobs[1:], dtype=torch.float32)
            loss, _ = clipped_policy_loss(logp, old, torch.full_like(logp, a), mask, cfg.grpo.eps_clip, None, cfg.grpo.is_cap)
            with torch.no_grad():
                ref = policy.sequence_logprobs(tr.encoded, model=trainer._reference())
            loss = loss + cfg.grpo.kl_coef * masked_mean(kl_penalty(logp, ref, cfg.grpo.kl_estimator), mask)
            (loss / len(g) / len(groups)).backward()
    torch.nn.utils.clip_grad_norm_(policy.model.parameters(), cfg.optim.grad_clip)
    trainer.optimizer.step()
    policy.model.eval()
    trajs = [t for g in groups for t in g]
    return {**rollout_metrics(trajs), "tokens_per_s": sum(t.n_generated for t in trajs) / rollout_s}


def _run(benchmark, trainer: Trainer, step) -> None:
    rows: list[dict] = []
    torch.manual_seed(0)
    benchmark.pedantic(lambda: rows.append(step()), rounds=ROUNDS, iterations=1)
    for key in ("tokens_per_s", "tool_calls_per_rollout", "reference_s", "update_s", "train_tokens_per_s"):
        if key in rows[0]:
            benchmark.extra_info[key] = sum(r[key] for r in rows) / len(rows)
    trainer.close()


@pytest.mark.benchmark(group="RL step, tiny_cpu (4 prompts x 4 rollouts)")
def test_rl_step_reference(benchmark, tmp_path, checkpoint):
    trainer = _trainer(tmp_path, checkpoint, "agentic")
    _run(benchmark, trainer, lambda: reference_step(trainer))


@pytest.mark.benchmark(group="RL step, tiny_cpu (4 prompts x 4 rollouts)")
def test_rl_step_batched(benchmark, tmp_path, checkpoint):
    trainer = _trainer(tmp_path, checkpoint, "agentic")
    _run(benchmark, trainer, trainer.rl_step)


@pytest.mark.benchmark(group="RL step, tiny_cpu (4 prompts x 4 rollouts)")
def test_rl_step_batched_compact(benchmark, tmp_path, checkpoint):
    trainer = _trainer(tmp_path, checkpoint, "agentic_compact")
    _run(benchmark, trainer, trainer.rl_step)


@pytest.mark.benchmark(group="RL step, repro_cpu cold start (2 prompts x 4 rollouts): one core or two")
@pytest.mark.parametrize("second_core", [False, True], ids=["one_core", "second_core"])
def test_rl_step_on_the_second_core(benchmark, tmp_path, monkeypatch, second_core):
    if not (REPRO_COLDSTART / "config.json").is_file():
        pytest.skip(f"the committed repro cold start is not at {REPRO_COLDSTART}")
    import paravt.learners.rollout as rollout

    if not second_core:

        def before(work, order):  # every env's work first, in the caller's thread
            yield from [i for i in order if work(i)]

        monkeypatch.setattr(trainer_module, "pipelines", lambda device: False)
        monkeypatch.setattr(rollout, "continuing", before)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the trainer's --threads 1: the second core is free for the pipelined update
    try:
        cfg = load_recipe("repro_cpu", [f"model.path={REPRO_COLDSTART}", "perception.steps=0", "sft.steps=0",
                                        "data.synth_n=8", "data.heldout_n=0"])  # fmt: skip
        trainer = Trainer(cfg, tmp_path / "repro", progress=False)
        trainer._reference()
        if second_core and not trainer_module.pipelines(trainer.policy.device):
            pytest.skip("no second core here: the update would not pipeline")
        _run(benchmark, trainer, trainer.rl_step)
    finally:
        torch.set_num_threads(threads)
