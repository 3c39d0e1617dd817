"""The SFT stage on the released SFT schema (lmms-engine chat ``messages``), on fixture rows written in it."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paravt.learners.coldstart.pipeline import run_cold_start  # noqa: E402
from paravt.learners.coldstart.release_sft import conversation_trajectory, read_release_sft  # noqa: E402
from paravt.learners.config import load_recipe  # noqa: E402
from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt_env.data.formats import DataFormatError  # noqa: E402
from paravt_env.data.index_video import decode_index, index_image, make_index_video  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "data" / "release_sft" / "sft_rows.json"


@pytest.fixture
def sft_dir(tmp_path):
    from PIL import Image

    shutil.copy(FIXTURE, tmp_path / "sft_rows.json")
    (tmp_path / "videos").mkdir()
    make_index_video(tmp_path / "videos" / "v1.mp4", 100, fps=10, size=(96, 128))
    (tmp_path / "frames").mkdir()
    for i in (6, 8, 9):
        Image.fromarray(index_image(i * 10, 96, 128)).save(tmp_path / "frames" / f"v1_{i}.jpg", quality=95)
    return tmp_path


def test_rows_become_conversations_with_frames_and_skips_are_counted(sft_dir):
    with pytest.warns(UserWarning, match="skipped 1 SFT rows"):
        conversations, skipped = read_release_sft(sft_dir / "sft_rows.json")
    assert len(conversations) == 2 and "missing.mp4" in skipped[0]
    msgs = conversations[0].messages
    assert [m.role for m in msgs] == ["system", "user", "assistant", "user", "user", "assistant"]
    # the video as the SFT recipe samples it: 1 fps (10 s -> 10 frames: 0, 11, ..., 99), each after its time tag
    video = msgs[1]
    assert video.text.startswith("<0.0 seconds><image><1.1 seconds><image>") and len(video.images) == 10
    assert [decode_index(f) for f in video.images] == list(np.round(np.linspace(0, 99, 10)).astype(int))
    assert msgs[3].text == "<image><image><tool_response>\n2 frames from 8.0s to 10.0s.\n</tool_response>"
    assert [decode_index(f) for f in msgs[3].images] == [80, 90]
    assert conversations[1].messages[0].text == "A question with a plain-string content and no media."


def test_media_resolve_under_the_video_root_first(sft_dir, tmp_path):
    elsewhere = tmp_path / "data_only"
    elsewhere.mkdir()
    shutil.copy(sft_dir / "sft_rows.json", elsewhere / "rows.json")  # the rows without their media beside them
    with pytest.warns(UserWarning, match=r"skipped 2 SFT rows .*data_only/videos/v1.mp4"):
        conversations, _ = read_release_sft(elsewhere / "rows.json")
    assert len(conversations) == 1  # only the row without media
    with pytest.warns(UserWarning, match="skipped 1 SFT rows"):
        conversations, skipped = read_release_sft(elsewhere / "rows.json", video_root=sft_dir)
    assert len(conversations) == 2 and "missing.mp4" in skipped[0] and len(conversations[0].messages[1].images) == 10


def test_messages_as_json_text_in_parquet_and_schema_errors(sft_dir, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = json.loads(FIXTURE.read_text())[:2]
    table = pa.Table.from_pylist([{"id": r["id"], "messages": json.dumps(r["messages"])} for r in rows])
    pq.write_table(table, sft_dir / "shard.parquet")
    conversations, skipped = read_release_sft(sft_dir / "shard.parquet")
    assert len(conversations) == 2 and not skipped
    (tmp_path / "bad.json").write_text(json.dumps([{"conversations": []}]))
    with pytest.raises(DataFormatError, match=r"bad.json: row 0: an SFT row needs field 'messages'"):
        read_release_sft(tmp_path / "bad.json")
    (tmp_path / "bad2.json").write_text(json.dumps([{"messages": [{"role": "user", "content": [{"type": "audio"}]}]}]))
    with pytest.raises(DataFormatError, match="message 0: unknown content part type 'audio'"):
        read_release_sft(tmp_path / "bad2.json")


def test_loss_falls_on_assistant_turns_only_and_the_stage_trains(sft_dir, tiny_qwen3, tmp_path):
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=8)
    with pytest.warns(UserWarning):
        conversations, _ = read_release_sft(sft_dir / "sft_rows.json")
    tr = conversation_trajectory(policy, conversations[0])
    learned = policy.tokenizer.decode([t for t, m in zip(tr.input_ids, tr.loss_mask, strict=True) if m])
    assistant = [m.text for m in conversations[0].messages if m.role == "assistant"]
    assert learned == "<|im_end|>".join(assistant) + "<|im_end|>"
    prompt = policy.tokenizer.decode([t for t, m in zip(tr.input_ids, tr.loss_mask, strict=True) if not m])
    assert prompt.count("<tool_response>") == 2 and tr.encoded.n_images == 13 and tr.tool_calls == 2

    cfg = load_recipe("tiny_cpu", ["sft.steps=3", "sft.batch=1", f"sft.data={sft_dir / 'sft_rows.json'}", "perception.steps=0"])
    with pytest.warns(UserWarning, match="skipping SFT rows whose media cannot be read.*missing.mp4"):
        summary = run_cold_start(policy, [], cfg, tmp_path)
    # streamed, one conversation per step: rows 0 and 1, then row 0 of the second pass; the row with the missing
    # video (row 2, last) was skipped once before the stream reached that row
    assert summary["sft"]["rows_trained"] == 3 and summary["sft"]["skipped_unreadable"] == 1
    rows = [json.loads(line) for line in (tmp_path / "sft_metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(np.isfinite(r["loss"]) for r in rows)


def test_train_from_the_released_data_end_to_end(sft_dir, tmp_path_factory):
    """``paravt train`` on the release's RL parquet rows and SFT shards under the release protocol."""
    from paravt.cli import main

    tmp_path = tmp_path_factory.mktemp("rl")
    rows = json.loads((FIXTURE.parents[1] / "paravt" / "paravt_rl_rows.json").read_text())[:2]
    (tmp_path / "rl.json").write_text(json.dumps(rows))
    for row in rows:
        target = tmp_path / "videos" / row["videos"][0]["video"]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(sft_dir / "videos" / "v1.mp4", target)
    run = tmp_path / "run"
    with pytest.warns(UserWarning, match="skipping SFT rows"):
        rc = main(["train", "--recipe", "tiny_cpu", "--out", str(run), "--no-progress", f"data.path={tmp_path / 'rl.json'}",
                   f"data.video_root={tmp_path / 'videos'}", f"sft.data={sft_dir}", "sft.steps=2", "perception.steps=0",
                   "env.protocol=release", "env.tool_result=subagent", "steps=1", "data.heldout_n=0",
                   "rollout.group_size=2", "rollout.prompts_per_step=1"])  # fmt: skip
    assert rc == 0
    [metrics] = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics["step"] == 1 and np.isfinite(metrics["loss"])
    config = json.loads((run / "config.json").read_text())
    assert config["env"]["protocol"] == "release" and config["sft"]["data"] == str(sft_dir)


@pytest.mark.parametrize("recipe", ["paragrpo_qwen3vl_8b_release", "vanilla_grpo_qwen3vl_8b_release"])
def test_the_release_recipes_train_under_the_release_protocol(recipe, sft_dir, tiny_qwen3, tmp_path, capsys):
    """The release recipes as they are (protocol, sub-agent, KL in the reward, token-weighted normalisation,
    clip), on a tiny model and CPU: one step trains; the OpenRLHF dry run carries the same KL form."""
    from paravt.cli import main
    from paravt.learners.config import load_recipe

    cfg = load_recipe(recipe)
    assert (cfg.env.protocol, cfg.env.tool_result, cfg.rollout.prompts_per_step, cfg.rollout.group_size) == ("release", "subagent", 7, 8)
    assert cfg.grpo.kl_in_reward and cfg.grpo.batch_norm_weighting == "token" and cfg.grpo.reward_clip == 20.0
    rows = json.loads((FIXTURE.parents[1] / "paravt" / "paravt_rl_rows.json").read_text())[:1]
    (tmp_path / "rl.json").write_text(json.dumps(rows))
    target = tmp_path / "videos" / rows[0]["videos"][0]["video"]
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(sft_dir / "videos" / "v1.mp4", target)
    run = tmp_path / "run"
    rc = main(["train", "--recipe", recipe, "--out", str(run), "--no-progress", f"model.path={tiny_qwen3}",
               "model.dtype=fp32", "model.device=cpu", "model.gradient_checkpointing=false",
               f"data.path={tmp_path / 'rl.json'}", f"data.video_root={tmp_path / 'videos'}", "data.heldout_n=0",
               "steps=1", "rollout.prompts_per_step=1", "rollout.group_size=2", "rollout.max_new_tokens=24"])  # fmt: skip
    assert rc == 0
    [metrics] = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics["step"] == 1 and np.isfinite(metrics["loss"]) and np.isfinite(metrics["kl"])
    capsys.readouterr()
    assert main(["train", "--backend", "openrlhf", "--recipe", recipe, "--out", str(tmp_path / "o"), "--dry-run",
                 f"data.path={tmp_path / 'rl.json'}", f"data.video_root={tmp_path / 'videos'}"]) == 0  # fmt: skip
    command = capsys.readouterr().out
    assert "--algo.kl.estimator k1" in command and "--algo.kl.use_loss" not in command
