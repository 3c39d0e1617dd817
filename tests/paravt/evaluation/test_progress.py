"""The main job's overall progress line (``paravt.evaluation.progress``): stage k of n, elapsed, and an estimate of
the time left that follows this machine's measured speed, with stages found done (a resumed run) costing nothing."""

import io

import pytest

from paravt.evaluation.progress import JobProgress, Stage, clock_text, job_progress, left_text, stage_bar


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _job(clock, stream=None, bars=False):
    stages = [Stage("videos", "videos", 10, "video", 1.0, calibrates=False), Stage("perception", "perception", 100, "step", 1.0),
              Stage("train", "RL", 10, "step", 10.0), Stage("eval", "held-out evaluation", 40, "episode", 1.0, parts=True)]  # fmt: skip
    return JobProgress(stages, bars=bars, stream=stream or io.StringIO(), clock=clock)


def test_the_estimate_follows_the_measured_speed():
    clock = Clock()
    job = _job(clock)
    assert job.remaining() == pytest.approx(10 + 100 + 100 + 40)  # reference costs before anything ran
    job.enter("videos")
    clock.now = 30.0
    job.advance("videos", 10)  # videos say nothing of the machine's speed
    assert job.speed() == 1.0
    bar = stage_bar("perception", 100, enabled=False)
    assert bar is None  # no job active: a plain (here: no) bar, as before
    with job_progress(job):
        bar = stage_bar("perception", 100, enabled=False)
        for _ in range(10):
            clock.now += 2.0  # this machine: twice the reference time per step
            bar.update(1)
    assert job.speed() == pytest.approx(2.0)
    # 90 perception steps at the stage's own 2 s, RL and evaluation at twice their reference cost
    assert job.remaining() == pytest.approx(90 * 2 + 10 * 10 * 2 + 40 * 2)
    assert job.line() == "[2/4] perception: 100 steps | 0:50 elapsed | ~8 min left"  # 460 s
    assert job.status() == "0:50 in, ~8 min left"


def test_a_resumed_run_skips_what_is_done_and_stage_lines_are_printed_without_bars():
    clock, out = Clock(), io.StringIO()
    job = _job(clock, out)
    job.stages[2].done = 6  # the plan read the checkpoint: RL at step 6 of 10
    with job_progress(job):
        bar = stage_bar("train", 10, enabled=True, initial=6)  # the RL loop's bar starts at its step
        assert bar.bar is None  # bars off: counted, not drawn
        videos, perception, rl, evaluation = job.stages
        assert videos.done == 10 and perception.done == 100  # entering a later stage finishes the earlier ones
        assert rl.done == 6 and job.remaining() == pytest.approx(4 * 10 + 40 * 1)  # no unit ran: reference costs
        for part in (20, 0):  # two evaluations of one split: the first was complete, the second runs
            clock.now += 5.0
            stage_bar("eval", 20, enabled=False, initial=part)
    assert rl.done == 10 and evaluation.done == 20 and job.remaining() == pytest.approx(20 * 1)
    lines = out.getvalue().splitlines()
    assert lines == ["[3/4] RL: 4 steps (6 done before) | 0:00 elapsed | ~1 min left",  # 80 s
                     "[4/4] held-out evaluation: 20 episodes (20 done before) | 0:05 elapsed | under a minute left"]  # fmt: skip
    assert job.finish() == "job done in 0:10 (RL 0:05, held-out evaluation 0:05)"


def test_the_words():
    assert clock_text(59) == "0:59" and clock_text(3725) == "1:02:05"
    assert left_text(20) == "under a minute left" and left_text(31 * 60) == "~31 min left"
    assert left_text(125 * 60) == "~2 h 05 min left" and left_text(None) == "time left unknown"


def test_work_outside_the_job_enters_no_stage_of_it():
    """A validation during RL evaluates through the harness, whose bar is the job's "eval" stage: outside_job keeps
    the job in RL (before it, the line said "[4/4] held-out evaluation" mid-RL, then "RL: 30 steps (30 done before)")."""
    from paravt.evaluation.progress import active_job, outside_job

    clock = Clock()
    job = _job(clock)
    with job_progress(job):
        job.enter("train")
        with outside_job():
            assert active_job() is None
            assert stage_bar("eval", 40, enabled=False) is None
        assert active_job() is job
        assert job.index("eval") is not None and job.stages[job.index("eval")].done == 0
        assert job.current == job.index("train")
