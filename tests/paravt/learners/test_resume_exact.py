"""``--resume`` after an interrupt reproduces the uninterrupted run: interrupted in each cold-start stage and
before, during and after an RL update, the resumed run's losses, rewards and final weights equal an
uninterrupted run's of the same seed, bit for bit (only wall-clock fields differ)."""

import importlib
import json
import signal

import pytest

torch = pytest.importorskip("torch")

import paravt.learners.coldstart.pipeline as coldstart  # noqa: E402
import paravt.learners.trainer as trainer_module  # noqa: E402
from paravt.cli import main  # noqa: E402
from paravt.learners.interrupts import commit_section  # noqa: E402

FAST = ["sft.steps=4", "sft.episodes=6", "sft.batch=2", "rollout.group_size=2", "rollout.prompts_per_step=2",
        "rollout.max_new_tokens=16", "rollout.temperature=1.0", "data.synth_n=5", "perception.steps=3",
        "perception.videos=2", "perception.batch=2", "data.heldout_n=0", "save_every=50"]  # fmt: skip
STEPS = "4"
CLOCK = ("wall_s", "tokens_per_s", "rollout_s", "reference_s", "update_s", "train_tokens_per_s", "peak_memory_mb")


def _rows(path):
    return [{k: v for k, v in json.loads(x).items() if k not in CLOCK} for x in path.read_text().splitlines()]


def _weights(run):
    from safetensors.torch import load_file

    return load_file(next((run / "checkpoint" / "model").glob("model*.safetensors")))


def _train(run, *extra):
    return main(["train", "--out", str(run), "--steps", STEPS, "--no-progress", *extra, *FAST])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("resume")
    mp.setenv("PARAVT_CACHE", str(root / "cache"))
    run = root / "uninterrupted"
    assert _train(run) == 0
    yield root, run
    mp.undo()


def _after_calls(n, original):
    """``original`` that raises KeyboardInterrupt (as Ctrl-C would) during its ``n``-th call, after running."""
    calls = {"n": 0}

    def wrapper(*args, **kwargs):
        calls["n"] += 1
        out = original(*args, **kwargs)
        if calls["n"] == n:
            raise KeyboardInterrupt
        return out

    return wrapper


POINTS = {
    # cold start: mid perception loop, mid teacher episodes, mid SFT loop
    "perception step 2": lambda mp: mp.setattr("paravt.learners.coldstart.perception.example_losses",
                                               _after_calls(2, importlib.import_module("paravt.learners.coldstart.perception").example_losses)),
    "teacher episode 4": lambda mp: mp.setattr(coldstart, "run_scripted_episode",
                                               _after_calls(4, coldstart.run_scripted_episode)),
    "sft step 3": lambda mp: mp.setattr(coldstart, "sft_losses", _after_calls(3, coldstart.sft_losses)),
    "sft done, cold start not saved": lambda mp: mp.setattr(trainer_module, "run_cold_start",
                                                            _after_calls(1, trainer_module.run_cold_start)),
    # RL: rollouts of step 3 played (data position and RNG advanced), gradients of step 3 computed (not
    # applied), step 3 complete (before step 4 began)
    "before RL update 3": lambda mp: mp.setattr(trainer_module, "run_batch", _after_calls(3, trainer_module.run_batch)),
    "during RL update 3": lambda mp: mp.setattr(trainer_module.Trainer, "update",
                                                _after_calls(3, trainer_module.Trainer.update)),
    "after RL update 3": lambda mp: mp.setattr(trainer_module.MetricSinks, "write", _after_calls(3, trainer_module.MetricSinks.write)),
}  # fmt: skip


@pytest.mark.parametrize("point", list(POINTS))
def test_resume_after_an_interrupt_equals_the_uninterrupted_run(reference, point, capsys):
    root, ref = reference
    run = root / point.replace(" ", "_")
    with pytest.MonkeyPatch.context() as mp:
        POINTS[point](mp)
        assert _train(run) == 130  # interrupted
    if point.startswith(("perception", "teacher", "sft")):  # the cold start was interrupted
        assert (run / "coldstart" / "partial").is_dir() and not (run / "coldstart" / "model").exists()
        capsys.readouterr()
        assert _train(run) == 1  # a new run over an interrupted cold start is refused, not silently restarted
        assert "pass --resume" in capsys.readouterr().err
    assert _train(run, "--resume") == 0
    assert _rows(run / "sft_metrics.jsonl") == _rows(ref / "sft_metrics.jsonl")
    assert _rows(run / "metrics.jsonl") == _rows(ref / "metrics.jsonl")
    mine, theirs = _weights(run), _weights(ref)
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert not (run / "coldstart" / "partial").exists()


def test_a_signal_inside_a_commit_section_is_delivered_when_it_ends():
    seen = []
    previous = signal.signal(signal.SIGTERM, lambda s, f: seen.append(("handler", s)))
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)  # a test run started with `&` ignores it
    try:
        with commit_section():
            signal.raise_signal(signal.SIGTERM)
            seen.append("section done")
        assert seen == ["section done", ("handler", signal.SIGTERM)]
        with pytest.raises(KeyboardInterrupt), commit_section():
            signal.raise_signal(signal.SIGINT)
            seen.append("second section done")  # the Ctrl-C waits for this line
        assert seen[-1] == "second section done"
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
