"""``paravt eval`` with a model in process: episodes in flight have their turns generated as one batch, and the
greedy results are those of one episode at a time."""

import pytest

pytest.importorskip("torch")

from paravt.evaluation.harness import BATCHED_EPISODES, evaluate  # noqa: E402
from paravt.evaluation.policy_specs import make_agent_factory  # noqa: E402
from paravt.evaluation.store import read_results  # noqa: E402
from paravt_env import EnvConfig  # noqa: E402

KEYS = ("prediction", "score", "correct", "tool_calls", "turns", "frame_budget", "error")


def test_a_greedy_model_evaluation_is_batched_and_equals_one_episode_at_a_time(synth_small, tiny_qwen3, tmp_path):
    _, samples = synth_small
    config = EnvConfig(frame_budget=4, max_turns=2, min_pixels=784, max_pixels=12544)
    factory, _ = make_agent_factory(f"hf:{tiny_qwen3}", max_new_tokens=24)
    batched = evaluate(samples, factory, tmp_path / "batched", config, progress=False)
    policy = factory().policy
    assert max(policy.gather.batches) > 1  # turns of several episodes went through one generation
    one, _ = make_agent_factory(f"hf:{tiny_qwen3}", max_new_tokens=24)
    alone = evaluate(samples, one, tmp_path / "alone", config, concurrency=1, progress=False)
    assert max(one().policy.gather.batches) == 1
    rows = {r["id"]: r for r in read_results(tmp_path / "batched" / "results.jsonl")}
    for r in read_results(tmp_path / "alone" / "results.jsonl"):
        assert {k: r[k] for k in KEYS} == {k: rows[r["id"]][k] for k in KEYS}
        turns = [(t["text"], t["tokens"], t["crops"]) for t in r["episode"]["turns"]]
        assert turns == [(t["text"], t["tokens"], t["crops"]) for t in rows[r["id"]]["episode"]["turns"]]
    assert batched["n"] == alone["n"] == len(samples) and len(samples) <= BATCHED_EPISODES
    for r in rows.values():  # a model policy's cost: its tokens, the contexts it read, one call a turn
        cost, turns = r["episode"]["cost"], r["episode"]["turns"]
        assert cost["generated_tokens"] == sum(t["tokens"] for t in turns) > 0
        assert cost["prompt_tokens"] == sum(t["prompt_tokens"] for t in turns) > cost["generated_tokens"]
        assert cost["model_calls"] == len(turns)
    assert batched["cost"]["generated_tokens"] == alone["cost"]["generated_tokens"]
