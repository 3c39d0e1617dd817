"""Synthetic task families (``paravt synth --task``, ``data.task``): the multi-event families ask about every
needle of a video, their answers need every needle's window (the overview is too coarse), and the default
family's datasets stay as they were."""

import json

import numpy as np
import pytest

from paravt.cli import main
from paravt.cli.synth import TASK_NAMES
from paravt_env.data.synth_plan import QUESTION_KINDS, TASKS, SynthConfig, plan_video, task_settings
from paravt_env.data.synth_questions import make_samples
from paravt_env.rewards import answer_accuracy
from paravt_env.video.sampling import overview_times

MAIN_JOB = dict(min_duration=30, max_duration=150, size=112, min_event_seconds=2, max_event_seconds=4,
                event_scale_min=0.6, event_scale_max=0.85, distractors=1)  # fmt: skip


def test_the_cli_names_the_tasks_of_the_table():
    assert set(TASK_NAMES) == set(TASKS) and TASK_NAMES[0] == "needle"


def test_the_default_family_is_the_generator_as_it_was():
    # the needle task sets nothing beyond the defaults: the videos (their key) and questions of every earlier
    # dataset stay the same
    assert task_settings("needle") == {"question_kinds": QUESTION_KINDS}
    assert SynthConfig(n=3, seed=4, **task_settings("needle")).video_key() == SynthConfig(n=3, seed=4).video_key()
    with pytest.raises(ValueError, match="unknown task 'pairs'.*two_colours"):
        task_settings("pairs")


@pytest.mark.parametrize("seed", [0, 7])
def test_two_colours_asks_every_needle_in_time_order(seed):
    cfg = SynthConfig(n=24, seed=seed, **MAIN_JOB, **task_settings("two_colours"))
    for i in range(cfg.n):
        plan = plan_video(i, cfg)
        (sample,) = make_samples(plan, cfg)
        assert len(plan.needles) == 2 and plan.needles[0].end <= plan.needles[1].start
        assert sample.question_type == "oe" and sample.question.startswith("Two coloured shapes")
        assert sample.answer == f"{plan.needles[0].colour} {plan.needles[1].colour}"
        assert sample.extra["relevant_events"] == [n.label for n in plan.needles]
        # one needle's colour is half an answer (token F1), both a whole one
        assert answer_accuracy(plan.needles[0].colour, sample.answer, "oe") == pytest.approx(2 / 3)
        assert answer_accuracy(sample.answer, sample.answer, "oe") == 1.0


def test_count_asks_how_many_of_one_to_four_needles():
    cfg = SynthConfig(n=40, seed=2, **MAIN_JOB, **task_settings("count"))
    counts = []
    for i in range(cfg.n):
        plan = plan_video(i, cfg)
        (sample,) = make_samples(plan, cfg)
        assert sample.extra["kind"] == "mcq_count" and len(sample.extra["relevant_events"]) == len(plan.needles)
        assert sample.options[ord(sample.answer) - ord("A")] == str(len(plan.needles))
        counts.append(len(plan.needles))
    assert set(counts) == {1, 2, 3, 4}


@pytest.mark.parametrize("k", [4, 8, 16])
def test_an_overview_rarely_shows_both_needles_of_two_colours(k):
    """The questions are answerable only from crops: at the main job's budgets an overview of K frames shows both
    needles of a video in a small share of the videos (computed from the plans, by the overview's own times)."""
    cfg = SynthConfig(n=200, seed=3, **MAIN_JOB, **task_settings("two_colours"))
    both = 0
    for i in range(cfg.n):
        plan = plan_video(i, cfg)
        times = np.asarray(overview_times(plan.duration, k))
        both += all(bool(np.any((times >= n.start) & (times < n.end))) for n in plan.needles)
    # measured on these 200 plans: 0.070, 0.125 and 0.420 (at K = 16 a 30 s video's frames are 2 s apart)
    assert both / cfg.n < {4: 0.1, 8: 0.2, 16: 0.5}[k]


def test_paravt_synth_task_writes_the_family(tmp_path, capsys):
    out = tmp_path / "two"
    assert main(["synth", "--out", str(out), "--task", "two_colours", "--n", "3", "--min-duration", "30",
                 "--max-duration", "60", "--size", "64", "--no-progress"]) == 0  # fmt: skip
    assert "(two_colours)" in capsys.readouterr().out
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert [r["extra"]["kind"] for r in rows] == ["oe_colours"] * 3 and all(len(r["events"]) == 2 for r in rows)
    assert json.loads((out / "synth_config.json").read_text())["question_kinds"] == ["oe_colours"]
    with pytest.raises(SystemExit) as exit_:
        main(["synth", "--out", str(tmp_path / "x"), "--task", "nope"])
    assert exit_.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err


def test_a_recipe_task_replaces_the_needles_and_kinds_and_says_so(caplog):
    from paravt.learners.config import load_recipe

    with caplog.at_level("WARNING"):
        cfg = load_recipe("tiny_cpu", ["data.task=two_colours"])
    assert "data.events=1" in caplog.text and "not used" in caplog.text
    synth = cfg.data.synth_config()
    assert (synth.min_events, synth.max_events, synth.question_kinds) == (2, 2, ("oe_colours",))
    assert (synth.size, synth.min_duration, synth.max_duration) == (112, 30, 150)  # the recipe's other settings kept
    assert load_recipe("tiny_cpu").data.synth_config().question_kinds == ("oe_colour",)  # the default: as before
    with pytest.raises(ValueError, match="unknown task 'pair'"):
        load_recipe("tiny_cpu", ["data.task=pair"])
