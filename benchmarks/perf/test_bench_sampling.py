"""The rollout engine's decode at a published size's vocabulary, where nearly every id is suppressed (a random
model of Qwen3-VL's 151,936 ids on the local 2,048-token tokenizer: the ids past the tokenizer are never sampled),
with the suppressed ids as a mask built once (``HFPolicy.suppress_mask``) against the path before it (the id list
indexed at every sampled token), side by side in one run, at 1 torch thread:

    OMP_NUM_THREADS=1 python -m pytest benchmarks/perf/test_bench_sampling.py --benchmark-only \\
        --benchmark-json=runs/bench_sampling.json
    python -m benchmarks.perf.report runs/bench_sampling.json

The 2B step's rollout on a GPU (docs/gpu.md, the second session) was host-bound, the GPU 0-13 % busy; this list
alone cost 30 ms a token on a 2-core CPU. The model here is the tiny one with its embedding widened to 151,936 ids, so the rows
measure the sampling's own cost beside a cheap forward pass; ``extra_info`` holds generated tokens/s.
"""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from benchmarks.perf.model_setup import one_thread  # noqa: E402
from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt.policies.kv_engine import CachedGenerator  # noqa: E402
from paravt_env.messages import Message  # noqa: E402

PUBLISHED_VOCAB = 151_936  # Qwen3-VL-2B / -8B's embedding rows (paravt.policies.tiny_model.PUBLISHED)
ROLLOUTS, NEW_TOKENS = 8, 64  # a GRPO group of the release's size, a short turn


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    yield from one_thread()


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> HFPolicy:
    """The tiny random model with Qwen3-VL's published vocabulary (its ids past the tokenizer suppressed)."""
    import transformers

    from paravt.policies.tiny_model import build_tiny_model

    base = build_tiny_model(tmp_path_factory.mktemp("bench_model") / "model", arch="qwen3_vl", seed=0)
    model = transformers.AutoModelForImageTextToText.from_pretrained(base)
    model.resize_token_embeddings(PUBLISHED_VOCAB, mean_resizing=False)
    wide = base.parent / "published_vocab"
    model.save_pretrained(wide)
    for f in base.iterdir():
        if f.is_file() and not f.name.startswith(("model", "config.json", "generation_config")):
            (wide / f.name).write_bytes(f.read_bytes())
    return HFPolicy.from_pretrained(wide, max_new_tokens=NEW_TOKENS, temperature=0.7)


class ListIndexed(CachedGenerator):
    """The engine's token choice before the mask: the suppressed ids indexed as a list (the rest of ``_pick`` is the
    engine's own)."""

    def _suppressed(self, logits):  # noqa: ANN001, ANN202
        scores = logits.clone()
        if self.policy.suppress_ids:
            scores[:, list(self.policy.suppress_ids)] = float("-inf")
        return scores


@pytest.mark.parametrize("path", ["reference", "mask"])
def test_decode_at_the_published_vocabulary(benchmark, policy, path):
    assert len(policy.suppress_ids) > 140_000  # the ids past the tokenizer
    policy.cached = ListIndexed(policy) if path == "reference" else CachedGenerator(policy)
    conversations = [[Message("user", f"Question {i}: what colour is the square?")] for i in range(ROLLOUTS)]
    tokens: list[int] = []

    def rollout() -> None:
        torch.manual_seed(0)
        policy.cached.reset()
        t0 = time.perf_counter()
        gens = policy.generate(conversations)
        tokens.append(sum(len(g.token_ids) for g in gens))
        benchmark.extra_info.setdefault("seconds", []).append(time.perf_counter() - t0)

    benchmark.pedantic(rollout, rounds=3, iterations=1, warmup_rounds=1)
    benchmark.extra_info["generated_tokens_per_s"] = sum(tokens[1:]) / sum(benchmark.extra_info["seconds"][1:])
    assert all(t > 0 for t in tokens)
