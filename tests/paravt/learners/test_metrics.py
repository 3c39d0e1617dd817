"""paravt.learners.metrics.CurvesFile: RUN/curves.png drawn at the first step, then at most once per interval,
and at once where asked (a checkpoint, an interrupt, the end) unless it already shows every row."""

import gc
import json

import pytest

from paravt.learners import metrics


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _row(step):
    return {"step": step, "reward_mean": 0.1 * step, "format_reward": 0.5, "format_compliance": 1.0,
            "tool_calls_per_rollout": 1.0, "accuracy": 0.5, "kl": 0.01}  # fmt: skip


def test_curves_are_drawn_once_per_interval_and_when_asked(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    drawn = []
    real = metrics.plot_curves
    monkeypatch.setattr(metrics, "plot_curves", lambda rows, path, sft: (drawn.append(len(rows)), real(rows, path, sft)))
    clock = Clock()
    curves = metrics.CurvesFile(tmp_path / "curves.png", lambda: [], every_s=60.0, clock=clock)
    history = []
    for step in range(1, 11):
        history.append(_row(step))
        clock.now += 15.0  # a step takes 15 s
        curves.after_step(history)
    assert drawn == [1, 5, 9]  # the first step, then every 60 s
    curves.draw(history)  # the end of the run: the rows since the last drawing
    curves.draw(history)  # nothing new: not drawn again
    assert drawn == [1, 5, 9, 10] and curves.drawings == 4
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_a_training_run_draws_its_curves_at_its_end_and_thaws_what_it_froze(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from paravt.cli import main
    from paravt.learners import trainer as trainer_module

    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    frozen, drawn = [], []
    real_step, real_plot = trainer_module.Trainer.rl_step, metrics.plot_curves

    def step(self):
        frozen.append(gc.get_freeze_count())  # the set-up's objects are out of the per-step collections
        return real_step(self)

    monkeypatch.setattr(trainer_module.Trainer, "rl_step", step)
    monkeypatch.setattr(metrics, "plot_curves", lambda rows, path, sft: (drawn.append(len(rows)), real_plot(rows, path, sft)))
    run = tmp_path / "run"
    assert main(["train", "--recipe", "tiny_cpu", "--steps", "3", "--out", str(run), "--no-progress", "sft.steps=2",
                 "sft.episodes=2", "perception.steps=1", "perception.videos=1", "rollout.group_size=2",
                 "rollout.prompts_per_step=1", "rollout.max_new_tokens=24", "data.synth_n=2", "data.heldout_n=1"]) == 0  # fmt: skip
    assert len(frozen) == 3 and all(n > 0 for n in frozen)
    assert gc.get_freeze_count() == 0
    assert drawn[0] == 1 and drawn[-1] == 3  # the first step at once; the last at the end
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
