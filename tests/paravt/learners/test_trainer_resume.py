"""``paravt train`` survives kills at any instant: SIGTERM saves, a run killed before its first checkpoint
resumes from its cold start, a half-swapped checkpoint is completed, changed settings are refused."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from paravt.cli import main  # noqa: E402

FAST = ["sft.steps=4", "sft.episodes=4", "rollout.group_size=2", "rollout.prompts_per_step=1",
        "rollout.max_new_tokens=24", "data.synth_n=3", "perception.steps=2", "perception.videos=2",
        "data.heldout_n=0", "save_every=50"]  # fmt: skip
REPO = Path(__file__).resolve().parents[3]


def _steps(run):
    return [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]


def _state(run):
    return json.loads((run / "checkpoint" / "state.json").read_text())["step"]


def test_sigterm_saves_and_kills_at_any_point_resume(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "paravt", "train", "--out", str(run), "--steps", "500", "--no-progress", *FAST]
    proc = subprocess.Popen(cmd, cwd=REPO, env={**os.environ}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while not ((run / "metrics.jsonl").is_file() and (run / "metrics.jsonl").read_text().strip()):
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read().decode()[-2000:]
        time.sleep(0.5)
    # a second trainer on the same --out while the first runs: refused at once, naming the holder
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--steps", "3", "--resume", "--no-progress", *FAST]) == 1
    assert f"pid {proc.pid} on" in capsys.readouterr().err
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 130
    saved = _state(run)  # SIGTERM saved a checkpoint, as Ctrl-C does (save_every=50 never would have)
    assert saved >= 1 and _steps(run) == list(range(1, saved + 1))

    # killed between removing the old checkpoint and renaming the new one (and halfway through a metrics
    # line): the complete tmp is used, the cut line dropped
    os.replace(run / "checkpoint", run / "checkpoint.tmp")
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 99, "rew')
    assert main(["train", "--out", str(run), "--steps", str(saved + 1), "--resume", "--no-progress", *FAST]) == 0
    assert _steps(run) == list(range(1, saved + 2)) and _state(run) == saved + 1
    assert not (run / "checkpoint.tmp").exists()

    # a disk that filled while the next checkpoint was written (an empty state.json in checkpoint.tmp): the
    # partial copy is discarded, never promoted over the intact checkpoint
    shutil.copytree(run / "checkpoint", run / "checkpoint.tmp")
    (run / "checkpoint.tmp" / "state.json").write_text("")
    assert main(["train", "--out", str(run), "--steps", str(saved + 2), "--resume", "--no-progress", *FAST]) == 0
    assert _steps(run) == list(range(1, saved + 3)) and _state(run) == saved + 2
    assert not (run / "checkpoint.tmp").exists()

    # killed before the first RL checkpoint: RL restarts from the saved cold start, which is not redone
    cold = (run / "sft_metrics.jsonl").stat().st_mtime
    shutil.rmtree(run / "checkpoint")
    assert main(["train", "--out", str(run), "--steps", "1", "--resume", "--no-progress", *FAST]) == 0
    assert _steps(run) == [1] and _state(run) == 1 and (run / "sft_metrics.jsonl").stat().st_mtime == cold

    # a run older than a setting (its config.json lacks it) resumes when the setting is at its default
    config = json.loads((run / "config.json").read_text())
    del config["env"]["protocol"], config["env"]["release_overview_fps"]
    (run / "config.json").write_text(json.dumps(config))
    assert main(["train", "--out", str(run), "--steps", "1", "--resume", "--no-progress", *FAST]) == 0

    # other settings on --resume: refused, unless asked for
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--steps", "2", "--resume", "--no-progress", *FAST, "grpo.kl_coef=0.5"]) == 1
    err = capsys.readouterr().err
    assert "grpo.kl_coef: 0.01 -> 0.5" in err and "--allow-config-change" in err
    assert main(["train", "--out", str(run), "--steps", "2", "--resume", "--allow-config-change", "--no-progress",
                 *FAST, "grpo.kl_coef=0.5"]) == 0  # fmt: skip
    assert json.loads((run / "config.json").read_text())["grpo"]["kl_coef"] == 0.5

    # damaged run files on --resume: named, one line, and left as they are (round 6)
    for name, damage, words in (("config.json", "[1, 2]", "config.json: damaged, holds a JSON list"),
                                ("numerics.json", "null", "numerics.json: damaged, holds a JSON NoneType")):  # fmt: skip
        good = (run / name).read_text()
        (run / name).write_text(damage)
        capsys.readouterr()
        assert main(["train", "--out", str(run), "--steps", "2", "--resume", "--allow-config-change", "--no-progress",
                     *FAST, "grpo.kl_coef=0.5"]) == 1  # fmt: skip
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, err
        assert (run / name).read_text() == damage
        (run / name).write_text(good)


def test_cli_refuses_impossible_settings_before_any_work(tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "a"), "--steps", "-3"]) == 1
    assert "--steps must be at least 0" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "b"), "grpo.kl_coef=abc"]) == 1
    assert "grpo.kl_coef must be float" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "c"), f"model.path={tmp_path / 'no' / 'such'}"]) == 1
    assert "is not a checkpoint directory" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
