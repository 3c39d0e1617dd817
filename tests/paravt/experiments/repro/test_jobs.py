"""``paravt.experiments.repro.jobs``: jobs in spawned workers, each with its thread share; a failure is named; an interrupt reaches
every running worker exactly once and is waited for."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from paravt.experiments.repro.jobs import JobFailed, run_jobs


@pytest.fixture
def helpers(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # spawned workers get this sys.path
    import jobs_helpers

    return jobs_helpers


def test_jobs_run_in_separate_workers_with_their_thread_share(tmp_path, helpers):
    done = []
    run_jobs([(k, helpers.record, (str(tmp_path), k)) for k in "abc"], 2, threads=1,
             on_done=lambda key, s: done.append(key))  # fmt: skip
    assert sorted(done) == ["a", "b", "c"]
    seen = [json.loads((tmp_path / k).read_text()) for k in "abc"]
    assert len({s["pid"] for s in seen}) == 3 and os.getpid() not in {s["pid"] for s in seen}
    assert all(s["threads"] == 1 for s in seen)
    assert all(s["pgid"] == s["pid"] for s in seen)  # own process group: a terminal's Ctrl-C skips them


def test_a_failed_job_is_named_and_no_later_job_starts(tmp_path, helpers):
    done = []
    with pytest.raises(JobFailed, match=r"failed: bad \(exit code 1\)"):
        run_jobs([("ok", helpers.record, (str(tmp_path), "ok")), ("bad", helpers.fail, (str(tmp_path), "bad")),
                  ("later", helpers.record, (str(tmp_path), "later"))], 1, on_done=lambda key, s: done.append(key))  # fmt: skip
    assert done == ["ok"] and not (tmp_path / "later").exists()
    with pytest.raises(ValueError, match="at least 1"):
        run_jobs([], 0)


@pytest.mark.parametrize("how", ["SIGTERM to a parent started in the background (SIGINT ignored)",
                                 "Ctrl-C to the terminal's process group"])
def test_an_interrupt_reaches_every_running_worker_once_and_is_waited_for(tmp_path, how, helpers):
    parent = textwrap.dedent(f"""
        import signal, sys
        sys.path[:0] = {sys.path!r}
        if {how.startswith("SIGTERM")!r}:  # as `cmd &` in a shell script, or nohup: SIGINT ignored from the start
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        else:  # a foreground terminal's, whatever the test run itself inherited
            signal.signal(signal.SIGINT, signal.default_int_handler)
        from jobs_helpers import wait_for_interrupt
        from paravt.experiments.repro.jobs import run_jobs
        try:
            run_jobs([(k, wait_for_interrupt, ({str(tmp_path)!r}, k)) for k in ("a", "b", "c")], 2, threads=1)
        except KeyboardInterrupt:
            print("parent interrupted", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    deadline = time.time() + 60
    while not all((tmp_path / f"{k}.started").exists() for k in "ab"):
        assert time.time() < deadline and proc.poll() is None, "workers did not start"
        time.sleep(0.05)
    if how.startswith("SIGTERM"):
        proc.send_signal(signal.SIGTERM)
    else:
        os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert "parent interrupted" in out
    assert [(tmp_path / f"{k}.saved").read_text() for k in "ab"] == ["1", "1"]  # saved, one SIGINT each
    assert not (tmp_path / "c.started").exists()  # the queued job never started


def _children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (from /proc: no procps needed)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _kill_parent_once_started(tmp_path, job: str, keys: str, wanted: str, env=None) -> None:
    """Run ``run_jobs`` over ``job`` (a ``jobs_helpers`` function) for ``keys`` in a parent process, kill -9 it once
    the workers named in ``wanted`` have started, and wait (30 s at most) for every worker to be gone."""
    parent = textwrap.dedent(f"""
        import sys
        sys.path[:0] = {sys.path!r}
        from jobs_helpers import {job}
        from paravt.experiments.repro.jobs import run_jobs
        run_jobs([(k, {job}, ({str(tmp_path)!r}, k)) for k in {keys!r}], {len(keys)}, threads=1)
    """)
    proc = subprocess.Popen([sys.executable, "-c", parent], start_new_session=True, env=env)
    deadline = time.time() + 60
    while not all((tmp_path / f"{k}.started").exists() for k in wanted):
        assert time.time() < deadline and proc.poll() is None, "workers did not start"
        time.sleep(0.01 if wanted == "a" else 0.05)
    pids = _children(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 30
    while any(_pid_alive(p) for p in pids):
        assert time.time() < deadline, f"workers {pids} outlived their killed parent"
        time.sleep(0.05)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("when", ["while the workers run", "right after they start"])
def test_workers_stop_and_save_when_their_parent_is_killed(tmp_path, helpers, when):
    """kill -9 of the parent: no orphan trains on unseen; each worker saves (as on Ctrl-C) and exits."""
    _kill_parent_once_started(tmp_path, "wait_for_interrupt", "ab", "ab" if when.startswith("while") else "a")
    started = [k for k in "ab" if (tmp_path / f"{k}.started").exists()]
    assert started and all((tmp_path / f"{k}.saved").read_text() == "1" for k in started)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_worker_that_loses_its_interrupt_still_ends_after_its_parent_dies(tmp_path, helpers):
    """The kernel's SIGTERM reaches the worker, which drops it (a lost KeyboardInterrupt): the parent watcher ends
    it ``PARAVT_ORPHAN_GRACE_S`` after the parent's death instead of leaving an orphan."""
    _kill_parent_once_started(tmp_path, "lose_interrupts", "a", "a", env={**os.environ, "PARAVT_ORPHAN_GRACE_S": "2"})
    assert (tmp_path / "a.interrupted").read_text() == "1"  # it was asked first, and dropped it
