"""Cold-start steps per second, side by side in one run: the step as it was (one forward/backward pass per item,
every position projected to the vocabulary) against ``token_means`` (items of similar length in one padded pass,
only the loss positions projected), on the same drawn items of the main job's cold start.

    python -m pytest benchmarks/perf/test_bench_sft.py --benchmark-only --benchmark-json=runs/bench_sft.json
    python -m benchmarks.perf.report runs/bench_sft.json

Items: the main job's recipe (``tiny_cpu``) on 24 training videos: 48 teacher episodes (the SFT stage's items) and
the perception examples of 12 videos (its rehearsal and the perception stage's items), encoded by a tiny
random-weight Qwen3-VL (``PARAVT_BENCH_CHECKPOINT``: a cold start's model instead). A round is 20 steps of the SFT
stage's shape (2 episodes and 2 rehearsed examples) or of the perception stage's (4 examples); items/s is in each
row's ``extra_info``. Weights are restored before each round, so both paths do the same work.
"""

from __future__ import annotations

import os
import random
import shutil

import pytest

torch = pytest.importorskip("torch")

from paravt.learners.coldstart.perception import build_examples  # noqa: E402
from paravt.learners.coldstart.pipeline import teacher_episodes  # noqa: E402
from paravt.learners.coldstart.sft import accumulate, optimizer_step, token_means  # noqa: E402
from paravt.learners.config import load_recipe  # noqa: E402
from paravt.learners.grpo import masked_mean  # noqa: E402
from paravt.learners.optim import adamw  # noqa: E402
from paravt.learners.trainer import Trainer  # noqa: E402

ROUNDS, STEPS = 5, 20


@pytest.fixture(scope="module")
def cold_start_items(tmp_path_factory):
    torch.set_num_threads(1)
    overrides = ["perception.steps=0", "sft.steps=0", "data.heldout_n=0", "data.validation_n=0", "select.every=0", "sft.episodes=48",
                 "data.synth_n=24", "steps=0"]  # fmt: skip
    if os.environ.get("PARAVT_BENCH_CHECKPOINT"):
        overrides.append(f"model.path={os.environ['PARAVT_BENCH_CHECKPOINT']}")
    cfg = load_recipe("tiny_cpu", overrides)
    out = tmp_path_factory.mktemp("bench_sft")
    shutil.rmtree(out, ignore_errors=True)
    trainer = Trainer(cfg, out, progress=False)
    episodes, _ = teacher_episodes(trainer.policy, trainer.samples, cfg)
    e = cfg.env
    examples = build_examples(trainer.policy, trainer.samples[:12], cfg.perception, crop_fps=e.crop_fps,
                              crop_max_frames=e.crop_max_frames, min_pixels=e.min_pixels, max_pixels=e.max_pixels)  # fmt: skip
    for item in [*episodes, *examples]:
        item.encoded = item.encoded.compact()  # as the cold start keeps them
    yield trainer.policy, episodes, examples
    trainer.close()


def per_item_all_positions(policy, items):
    """The loss as the loop computed it before: one item a pass, every position projected."""
    for i, item in enumerate(items):
        logp = policy.sequence_logprobs(item.encoded, temperature=1.0)
        yield [i], [-masked_mean(logp, torch.tensor(item.loss_mask[1:], dtype=torch.float32))]


def _bench(benchmark, cold_start_items, losses, shape: str) -> None:
    policy, episodes, examples = cold_start_items
    rng = random.Random(0)
    if shape == "sft":
        steps = [(rng.sample(episodes, 2), rng.sample(examples, 2)) for _ in range(STEPS)]
    else:
        steps = [([], rng.sample(examples, 4)) for _ in range(STEPS)]
    initial = {k: v.clone() for k, v in policy.model.state_dict().items()}

    def round_() -> None:
        policy.model.load_state_dict(initial)
        opt = adamw(policy.model.parameters(), lr=1e-4, weight_decay=0.0)
        policy.model.train()
        for main, rehearsed in steps:
            opt.zero_grad()
            if main:
                accumulate(policy, main, [0.5] * len(main), losses)
            accumulate(policy, rehearsed, [0.5] * len(rehearsed), losses)
            optimizer_step(policy.model, opt, 1.0)
        policy.model.eval()

    benchmark.pedantic(round_, rounds=ROUNDS, iterations=1, warmup_rounds=1)
    items = sum(len(a) + len(b) for a, b in steps)
    benchmark.extra_info["items_per_s"] = items / benchmark.stats.stats.mean
    benchmark.extra_info["steps_per_s"] = len(steps) / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="cold start: SFT step (2 episodes + 2 rehearsed examples)")
def test_sft_step_reference(benchmark, cold_start_items):
    _bench(benchmark, cold_start_items, per_item_all_positions, "sft")


@pytest.mark.benchmark(group="cold start: SFT step (2 episodes + 2 rehearsed examples)")
def test_sft_step_token_means(benchmark, cold_start_items):
    _bench(benchmark, cold_start_items, token_means, "sft")


@pytest.mark.benchmark(group="cold start: perception step (4 examples)")
def test_perception_step_reference(benchmark, cold_start_items):
    _bench(benchmark, cold_start_items, per_item_all_positions, "perception")


@pytest.mark.benchmark(group="cold start: perception step (4 examples)")
def test_perception_step_token_means(benchmark, cold_start_items):
    _bench(benchmark, cold_start_items, token_means, "perception")


def test_the_paths_agree_on_the_loss(cold_start_items):
    """Not a timing: the compared paths compute the same losses (so the ratio compares equal work)."""
    policy, episodes, examples = cold_start_items
    items = [*episodes[:3], *examples[:3]]
    a = accumulate(policy, items, [1.0] * len(items), per_item_all_positions)
    b = accumulate(policy, items, [1.0] * len(items), token_means)
    policy.model.zero_grad()
    assert b == pytest.approx(a, rel=1e-5)
