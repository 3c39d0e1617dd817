"""SFT at scale: the released schema streamed from parquet shards, packed to a token budget (overlong rows
dropped and counted), token-mean loss over a step's packs, resumable at any step to the same weights."""

import json
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pa = pytest.importorskip("pyarrow")

import pyarrow.parquet as pq  # noqa: E402

from paravt.learners.coldstart.sft_stream import StreamCounts, StreamPosition, packs, train_streaming_sft  # noqa: E402
from paravt.policies.hf import HFPolicy  # noqa: E402


def _rows(lengths):
    return iter([(StreamPosition(0, 0, i), None if n is None else SimpleNamespace(input_ids=[0] * n))
                 for i, n in enumerate(lengths)])  # fmt: skip


def test_greedy_packing_drops_overlong_rows_and_counts_them():
    counts = StreamCounts()
    out = list(packs(_rows([3, 4, 10, 2, None, 5, 1, 8]), 8, counts))
    # [3, 4] (7; the 10 alone is over the budget: dropped), [2, 5, 1] (8; the unreadable row skipped); the last
    # pack, [8], is still open when the rows end
    assert [[len(t.input_ids) for t in p.items] for p in out] == [[3, 4], [2, 5, 1]]
    assert [p.start.row for p in out] == [0, 3]
    assert [(p.counts.trained, p.counts.overlong, p.counts.unreadable) for p in out] == [(0, 0, 0), (2, 1, 0)]
    assert (counts.trained, counts.overlong, counts.unreadable) == (6, 1, 1)
    assert [len(p.items) for p in packs(_rows([3, 4, 10]), 0, StreamCounts())] == [1, 1]  # 0: a row per pack


def test_a_pass_with_nothing_to_train_on_is_an_error_not_a_hang():
    def forever():
        for pass_ in range(3):
            for i in range(2):
                yield StreamPosition(pass_, 0, i), SimpleNamespace(input_ids=[0] * 50)

    with pytest.raises(ValueError, match="no row of the SFT data can be trained on .*2 longer than pack_tokens=8"):
        list(packs(forever(), 8, StreamCounts()))


def write_shard(path, n, seed=0):
    """``n`` rows of the released chat schema (a system turn, a question, an answer of varied length)."""
    import random

    rng = random.Random(seed)
    rows = []
    for i in range(n):
        answer = " ".join(rng.choice(["red", "blue", "a star", "the crop", "shows"]) for _ in range(rng.randint(2, 40)))
        messages = [{"role": "system", "content": "You look at videos."},
                    {"role": "user", "content": [{"type": "text", "text": f"Question {i}: what is shown?"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": f"<answer>{answer}</answer>"}]}]  # fmt: skip
        rows.append({"id": f"r{i}", "messages": json.dumps(messages)})
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=16)
    return path


def _train(policy, shard, steps, **kw):
    return train_streaming_sft(policy, shard, steps=steps, batch=2, pack_tokens=96, lr=1e-3, grad_clip=1.0, seed=0,
                               schedule="cosine", warmup_ratio=0.1, weight_decay=0.01, **kw)  # fmt: skip


def test_streamed_sft_trains_and_resumes_from_any_step_to_the_same_weights(tiny_qwen3, tmp_path, monkeypatch):
    shard = write_shard(tmp_path / "shard.parquet", 40)
    policy = HFPolicy.from_pretrained(tiny_qwen3)
    initial = {k: v.clone() for k, v in policy.model.state_dict().items()}
    rows, counts = _train(policy, shard, 6)
    assert [r["step"] for r in rows] == list(range(1, 7)) and all(r["tokens"] > 0 for r in rows)
    assert rows[-1]["loss"] < rows[0]["loss"]  # it learns the answers' words
    assert counts.overlong > 0 and counts.trained == sum(r["rows"] for r in rows)
    expected = {k: v.clone() for k, v in policy.model.state_dict().items()}

    import paravt.learners.coldstart.sft_stream as stream

    saved = {}
    calls = {"n": 0}
    original = stream.sft_losses

    def interrupted(*args, **kwargs):  # Ctrl-C in the middle of step 4 (one call a step)
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    policy.model.load_state_dict(initial)
    monkeypatch.setattr(stream, "sft_losses", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _train(policy, shard, 6, save_state=lambda s: saved.update(state=s))
    monkeypatch.setattr(stream, "sft_losses", original)
    assert saved["state"]["step"] == 3

    fresh = HFPolicy.from_pretrained(tiny_qwen3)  # a new process: the weights come from the saved state
    resumed, resumed_counts = _train(fresh, shard, 6, resume=saved["state"])
    assert resumed == rows and resumed_counts == counts
    state = fresh.model.state_dict()
    assert all(torch.equal(state[k], expected[k]) for k in expected)


def test_the_release_sft_recipe_runs_as_an_sft_only_train(tiny_qwen3, tmp_path):
    from paravt.cli import main
    from paravt.learners.config import load_recipe

    cfg = load_recipe("sft_qwen3vl_8b_release")
    s = cfg.sft
    assert (s.steps, s.lr, s.lr_schedule, s.warmup_ratio, s.weight_decay, s.pack_tokens, s.batch, cfg.steps) == (
        1500, 2e-5, "cosine", 0.05, 0.01, 8192, 4, 0)
    shard = write_shard(tmp_path / "shard.parquet", 12)
    run = tmp_path / "run"
    assert main(["train", "--recipe", "sft_qwen3vl_8b_release", "--out", str(run), "--no-progress",
                 f"model.path={tiny_qwen3}", "model.dtype=fp32", "model.device=cpu", "model.gradient_checkpointing=false",
                 f"sft.data={shard}", "sft.steps=3", "sft.pack_tokens=256"]) == 0  # fmt: skip
    summary = json.loads((run / "coldstart" / "summary.json").read_text())["sft"]
    assert summary["steps"] == 3 and summary["rows_trained"] > 0 and summary["pack_tokens"] == 256
    assert (run / "coldstart" / "model" / "paravt.json").is_file() and not (run / "metrics.jsonl").exists()


def test_a_corrupt_shard_or_bad_bytes_stop_the_stream_naming_file_and_row(tiny_qwen3, tmp_path):
    """A file that cannot be read stops the run (training around it would train another mix), naming where."""
    from paravt_env.data.formats import DataFormatError

    policy = HFPolicy.from_pretrained(tiny_qwen3)
    shard = write_shard(tmp_path / "a.parquet", 40)
    data = shard.read_bytes()
    cut = tmp_path / "cut" / "a.parquet"
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) // 2])  # a truncated shard
    with pytest.raises(DataFormatError, match=rf"{cut}: (row 0: )?the parquet file cannot be read"):
        _train(policy, cut, 2)
    jsonl = tmp_path / "bytes" / "a.jsonl"
    jsonl.parent.mkdir()
    good = json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})
    jsonl.write_bytes((good + "\n").encode() + b'{"messages": "\xff\xfe"}\n')
    with pytest.raises(DataFormatError, match=rf"{jsonl}: line 2: not UTF-8 text"):
        _train(policy, jsonl, 2)


@pytest.mark.parametrize("text", [None, 5, ["a"], {"t": 1}])
def test_a_text_part_that_is_not_text_is_refused_naming_the_row(tiny_qwen3, tmp_path, text):
    from paravt_env.data.formats import DataFormatError

    path = tmp_path / "a.jsonl"
    rows = [{"messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]},
                          {"role": "assistant", "content": [{"type": "text", "text": t}]}]} for t in ("fine", text)]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataFormatError, match=rf"{path}: line 2, message 1: a text part's 'text' must be a string"):
        _train(HFPolicy.from_pretrained(tiny_qwen3), path, 2)


def test_an_image_over_the_decompression_limit_is_skipped_and_counted(tiny_qwen3, tmp_path):
    from PIL import Image

    big = tmp_path / "big.png"
    Image.new("RGB", (20000, 20000)).save(big)  # 400 M pixels: over PIL's bomb limit (2 x 89 M)
    rows = [{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "big.png"}},
                                                       {"type": "text", "text": "what?"}]},
                          {"role": "assistant", "content": "a bomb"}]}]  # fmt: skip
    rows += [{"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"answer {i}"}]} for i in range(6)]
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.warns(UserWarning, match=rf"{path}: line 1: DecompressionBombError"):
        _, counts = _train(HFPolicy.from_pretrained(tiny_qwen3), path, 2)
    assert counts.unreadable >= 1 and counts.trained > 0


def test_a_resume_over_changed_files_is_refused_saying_what_changed(tiny_qwen3, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_shard(data / "a.parquet", 30)
    saved = {}
    policy = HFPolicy.from_pretrained(tiny_qwen3)
    _train(policy, data, 4, save_state=lambda s: saved.update(state=s))
    assert [f["rows"] for f in saved["state"]["files"]] == [30]
    write_shard(data / "b.parquet", 10, seed=1)  # a shard added before --resume
    with pytest.raises(ValueError, match=rf"the SFT data changed since its saved position \(added: {data / 'b.parquet'}\)"):
        _train(policy, data, 4, resume=saved["state"])
    (data / "b.parquet").unlink()
    write_shard(data / "a.parquet", 31)  # rewritten
    with pytest.raises(ValueError, match=r"rewritten: .*a\.parquet"):
        _train(policy, data, 4, resume=saved["state"])
