"""``paravt train`` as a newcomer runs it: the job's progress line stage by stage, a readable cold-start summary and
no third-party bar under ``--no-progress``; the result picture named with ``paravt view`` at the end; a resumed run
says what it trained now (not the run's total) or that there was nothing to train, and that its evaluations had
nothing to evaluate; ``--dry-run`` prints the plan and trains, builds and writes nothing."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from paravt.cli import main  # noqa: E402

# tiny sizes (tests/paravt/learners/test_resume_exact.py's), with a held-out split of two videos
FAST = ["sft.steps=4", "sft.episodes=6", "sft.batch=2", "rollout.group_size=2", "rollout.prompts_per_step=2",
        "rollout.max_new_tokens=16", "rollout.temperature=1.0", "data.synth_n=5", "perception.steps=3",
        "perception.videos=2", "perception.batch=2", "data.heldout_n=2", "save_every=50"]  # fmt: skip
REPO = Path(__file__).resolve().parents[3]
EVALS = ("eval_coldstart", "eval_coldstart_counterfactual", "eval", "eval_counterfactual")


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time: what a command that writes nothing keeps."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


def _steps(run: Path) -> list[int]:
    return [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished two-step run, trained as a user runs it (a fresh interpreter, ``--no-progress``), and what it
    printed."""
    root = tmp_path_factory.mktemp("job")
    env = {**os.environ, "PARAVT_CACHE": str(root / "cache"), "OMP_NUM_THREADS": "1"}
    run = root / "run"
    done = subprocess.run([sys.executable, "-m", "paravt", "train", "--out", str(run), "--steps", "2", "--no-progress", *FAST],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return root, run, done


def test_the_job_shows_its_stages_and_ends_with_its_result(finished):
    _, run, done = finished
    err, out = done.stderr, done.stdout
    stages = ["[1/7] videos", "[2/7] perception examples", "[3/7] perception stage", "[4/7] teacher episodes",
              "[5/7] SFT cold start", "[6/7] RL (para_grpo)", "[7/7] held-out evaluation"]  # fmt: skip
    at = [err.index(s) for s in stages]
    assert at == sorted(at) and all(" elapsed | " in line for line in err.splitlines() if line.startswith("["))
    assert "job done in " in err
    # the cold start in words, not a dict; no bar of transformers' (loading weights, writing shards) or tqdm's
    assert "cold start done: perception stage: 3 steps on " in err and "{'perception'" not in err
    assert "Loading weights" not in err and "Writing model shards" not in err and "it/s" not in err
    assert f"{run}: trained 2 steps now (steps 1-2; the run is at step 2)" in out
    assert f"result: {run / 'result.png'}" in out and f"paravt view {run}" in out
    assert (run / "result.png").read_bytes()[:4] == b"\x89PNG"
    assert out.count("samples scored now") == 4


def test_a_smaller_then_a_larger_steps_say_what_they_trained(finished, capsys, monkeypatch):
    root, run, _ = finished
    monkeypatch.setenv("PARAVT_CACHE", str(root / "cache"))
    state = (run / "checkpoint" / "state.json").stat().st_mtime_ns
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--steps", "1", "--resume", "--no-progress", *FAST]) == 0
    out = capsys.readouterr().out
    assert f"{run}: nothing to train: the run is at step 2, the target is 1 (raise it with --steps N)" in out
    assert "trained" not in out and "2 steps" not in out  # not the run's total as if trained now
    assert all(f"{run / name}: nothing to evaluate, 2 rows already scored" in out for name in EVALS)
    assert _steps(run) == [1, 2] and (run / "checkpoint" / "state.json").stat().st_mtime_ns == state

    assert main(["train", "--out", str(run), "--steps", "3", "--resume", "--no-progress", *FAST]) == 0
    out = capsys.readouterr().out
    assert f"{run}: trained 1 step now (step 3; the run is at step 3)" in out and _steps(run) == [1, 2, 3]
    # the cold start did not change: its evaluations had nothing to do; the RL checkpoint's were redone
    assert all(f"{run / name}: nothing to evaluate, 2 rows already scored" in out for name in EVALS[:2])
    assert all(f"{run / name}: 2 samples scored now" in out for name in EVALS[2:])


def test_resume_continues_under_the_runs_own_settings_without_retyping_them(finished, capsys, monkeypatch):
    root, run, _ = finished
    monkeypatch.setenv("PARAVT_CACHE", str(root / "cache"))
    at = _steps(run)[-1]
    assert main(["train", "--out", str(run), "--steps", str(at), "--resume", "--dry-run"]) == 0
    assert f"recipe: {run / 'config.json'} (the run's own settings)" in capsys.readouterr().out
    assert main(["train", "--out", str(run), "--steps", str(at + 1), "--resume", "--no-progress"]) == 0  # no FAST
    assert _steps(run)[-1] == at + 1 and json.loads((run / "config.json").read_text())["sft"]["steps"] == 4
    # an override on top of the run's settings is still a change, refused without --allow-config-change
    assert main(["train", "--out", str(run), "--steps", str(at + 2), "--resume", "--no-progress", "grpo.kl_coef=0"]) == 1
    assert "grpo.kl_coef: 0.01 -> 0" in capsys.readouterr().err and _steps(run)[-1] == at + 1
    # a recipe named on the command line is taken as before: tiny_cpu's own sizes differ from the run's
    assert main(["train", "--out", str(run), "--recipe", "tiny_cpu", "--steps", str(at + 2), "--resume"]) == 1
    assert "--allow-config-change" in capsys.readouterr().err


def test_dry_run_prints_the_plan_and_writes_nothing(finished, tmp_path, capsys, monkeypatch):
    root, run, _ = finished
    monkeypatch.setenv("PARAVT_CACHE", str(root / "cache"))
    before = _tree(root)
    assert main(["train", "--out", str(run), "--steps", "9", "--resume", "--dry-run", *FAST]) == 0
    out = capsys.readouterr().out
    at = json.loads((run / "checkpoint" / "state.json").read_text())["step"]
    assert f"output directory: {run} (a run at step {at}; trains steps {at + 1}-9)" in out
    assert f"6. RL (para_grpo): {9 - at} steps (steps 1-{at} done)" in out and "5. SFT cold start: done" in out
    assert _tree(root) == before  # not a byte written, not a file touched

    # a new run on a machine with nothing built: the plan counts what is to build, and builds none of it
    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    assert main(["train", "--out", str(tmp_path / "new"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "recipe: tiny_cpu (para_grpo, seed 0, 60 RL steps)" in out and f"{tmp_path / 'new'} (new)" in out
    assert "1. videos (616 in all, 0 already built): 616 videos" in out and "5. SFT cold start: 1400 steps" in out
    assert "data, training: 96 synthetic videos of 30-150 s, seed 0" in out and "(built on first use)" in out
    # the estimate adds the stages' units at the main job's measured costs: 616 videos to build are 1.5 min of it
    minutes = int(out.split("time: about ")[1].split(" min")[0])
    assert 10 <= minutes <= 16, out
    assert list(tmp_path.iterdir()) == []
    assert main(["train", "--recipe", "gpu_smoke", "--out", str(tmp_path / "gpu"), "--dry-run"]) == 0
    assert "time: not estimated (the costs per unit are measured for the tiny model on a CPU only)" in capsys.readouterr().out
