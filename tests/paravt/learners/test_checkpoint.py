"""A checkpoint is promoted only once every file is on disk and verified: a full disk or a kill while saving
never costs the last good one."""

import errno
import json
from pathlib import Path

import pytest

from paravt.learners import checkpoint


def _weights() -> bytes:
    """A small, whole safetensors file."""
    import numpy as np
    from safetensors.numpy import save

    return save({"w": np.arange(16, dtype=np.float32)})


def _write(tmp: Path, weights: bytes | None = None) -> None:
    weights = _weights() if weights is None else weights
    (tmp / "model").mkdir(parents=True)
    (tmp / "model" / "config.json").write_text("{}")
    (tmp / "model" / "paravt.json").write_text("{}")
    (tmp / "model" / "model.safetensors").write_bytes(weights)
    (tmp / "trainer.pt").write_bytes(b"t" * 16)


def _state(step):
    return {"step": step, "epoch": 0, "cursor": 0, "order": [0, 1]}


def test_save_swaps_in_a_verified_checkpoint(tmp_path):
    checkpoint.save(tmp_path, _state(5), _write)
    assert checkpoint.problem(tmp_path / "checkpoint") is None and checkpoint.saved_step(tmp_path / "checkpoint") == 5
    assert not (tmp_path / "checkpoint.tmp").exists()


def test_a_full_disk_while_saving_keeps_the_previous_checkpoint_and_says_so(tmp_path):
    checkpoint.save(tmp_path, _state(5), _write)

    def fills_up(tmp: Path) -> None:
        _write(tmp)
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match=r"checkpoint of step 6 \(the disk is full\); the checkpoint of step 5 .* intact"):
        checkpoint.save(tmp_path, _state(6), fills_up)
    assert checkpoint.saved_step(tmp_path / "checkpoint") == 5 and not (tmp_path / "checkpoint.tmp").exists()


def test_a_checkpoint_that_does_not_verify_is_never_promoted(tmp_path):
    checkpoint.save(tmp_path, _state(5), _write)
    with pytest.raises(OSError, match="model.safetensors|no weights"):
        checkpoint.save(tmp_path, _state(6), lambda tmp: _write(tmp, weights=b""))
    assert checkpoint.saved_step(tmp_path / "checkpoint") == 5


@pytest.mark.parametrize("damage", ["empty state", "bad json", "no weights", "missing trainer"])
def test_recover_discards_an_incomplete_tmp_and_keeps_the_checkpoint(tmp_path, damage):
    checkpoint.save(tmp_path, _state(5), _write)
    tmp = tmp_path / "checkpoint.tmp"
    _write(tmp)
    (tmp / "state.json").write_text(json.dumps(_state(6)))
    if damage == "empty state":
        (tmp / "state.json").write_text("")
    elif damage == "bad json":
        (tmp / "state.json").write_text('{"step": 6, "ord')
    elif damage == "no weights":
        (tmp / "model" / "model.safetensors").unlink()
    else:
        (tmp / "trainer.pt").unlink()
    checkpoint.recover(tmp_path)
    assert not tmp.exists() and checkpoint.saved_step(tmp_path / "checkpoint") == 5


def test_recover_completes_a_swap_a_kill_interrupted(tmp_path):
    tmp = tmp_path / "checkpoint.tmp"
    _write(tmp)
    (tmp / "state.json").write_text(json.dumps(_state(7)))
    checkpoint.recover(tmp_path)  # the old checkpoint was already removed: the verified tmp is the newest
    assert checkpoint.saved_step(tmp_path / "checkpoint") == 7 and not tmp.exists()


def test_a_damaged_checkpoint_is_refused_by_name(tmp_path):
    checkpoint.save(tmp_path, _state(5), _write)
    (tmp_path / "checkpoint" / "state.json").write_text("")
    with pytest.raises(ValueError, match=r"checkpoint is damaged \(state.json is empty\)"):
        checkpoint.recover(tmp_path)


def test_a_checkpoint_whose_weights_were_cut_short_is_refused_by_name(tmp_path):
    checkpoint.save(tmp_path, _state(5), _write)
    weights = tmp_path / "checkpoint" / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-20])  # a kill or a full disk mid-copy: the header survives, data does not
    with pytest.raises(ValueError, match=r"checkpoint is damaged \(model/model.safetensors is cut short: \d+ bytes where its tensors need \d+\)"):
        checkpoint.recover(tmp_path)


def test_a_truncated_checkpoint_is_one_named_line_from_the_cli(tiny_qwen3, synth_small, tmp_path, capsys):
    """``HFPolicy.from_pretrained`` names the file before transformers fails on it (``paravt eval --policy hf:``,
    the cold start a run resumes from)."""
    import shutil

    from paravt.cli import main

    model = tmp_path / "model"
    shutil.copytree(tiny_qwen3, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    data = synth_small[0] / "samples.jsonl"
    assert main(["eval", "--policy", f"hf:{model}", "--data", str(data), "--out", str(tmp_path / "e"), "--limit", "1"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"{model}: cannot load the checkpoint: model.safetensors is cut short" in err, err


def test_the_rng_states_hold_the_gpus_generators_where_there_are_gpus(monkeypatch, caplog):
    """On a GPU, rollouts sample from the GPU's generator: a resume that restored the CPU's alone drew other rollouts
    (the resume tests on a GPU). The GPU calls are stood in here (this machine has none): the states must be
    read where GPUs exist, given back to them, and refused with a warning where the machine has fewer."""
    torch = pytest.importorskip("torch")
    saved, restored = [torch.tensor([1, 2], dtype=torch.uint8)], []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: saved)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", restored.append)
    states = checkpoint.rng_states()
    assert states["cuda_rng"] is saved
    checkpoint.set_rng_states(states)
    assert restored == [saved]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "cuda_rng" not in checkpoint.rng_states()
    with caplog.at_level("WARNING"):
        checkpoint.set_rng_states(states)
    assert restored == [saved] and "RNG states of 1 GPU(s)" in caplog.text
