"""paravt.experiments.repro.wall: stage times that add up over invocations and survive a kill mid-stage."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from paravt.experiments.repro.wall import WallClock


def test_stage_times_add_up_over_invocations_and_count_when_the_stage_raises(tmp_path):
    path = tmp_path / "run" / "wall_s.json"
    WallClock(path).timed("cold start", time.sleep, 0.05)
    def interrupted():
        time.sleep(0.05)
        raise KeyboardInterrupt

    clock = WallClock(path)  # a later invocation resuming the run
    with pytest.raises(KeyboardInterrupt):
        clock.timed("cold start", interrupted)
    clock.timed("arms", lambda: None)
    saved = json.loads(path.read_text())
    assert saved["cold start"] >= 0.1 and set(saved) == {"cold start", "arms"}
    clock.flush()  # nothing running: nothing added
    assert json.loads(path.read_text()) == saved


def test_a_flush_mid_stage_keeps_its_time_through_a_sigkill(tmp_path):
    """``paravt repro`` flushes after every finished arm run: a SIGKILL later in the stage (no handler runs)
    loses only what came after the last flush."""
    path = tmp_path / "wall_s.json"
    child = textwrap.dedent(f"""
        import time, pathlib
        from paravt.experiments.repro.wall import WallClock
        clock = WallClock({str(path)!r})
        def stage():
            time.sleep(0.3)
            clock.flush()
            pathlib.Path({str(tmp_path / "flushed")!r}).touch()
            time.sleep(60)
        clock.timed("arms, trained and evaluated", stage)
    """)
    proc = subprocess.Popen([sys.executable, "-c", child])
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "flushed").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -9 if os.name == "posix" else proc.returncode != 0
    assert json.loads(path.read_text())["arms, trained and evaluated"] >= 0.3
