"""Independent jobs in worker processes, each with its share of the CPU threads.

A tiny policy's step is mostly Python and small matrix products: a second intra-op thread buys little, a second
process running another seed buys almost a whole step. ``run_jobs`` starts at most ``workers`` spawned processes
at once (one per job, so nothing leaks from one run into the next), gives each ``cpus // workers`` torch
threads, and keeps interrupts as safe as in a single run: each worker sits in its own process group, so a
terminal's Ctrl-C reaches only this process, which forwards exactly one SIGINT to every running worker and
waits while each saves its checkpoint (a second signal to a trainer that is saving could cut the save).

A worker never outlives its parent: the kernel sends it SIGTERM when the parent dies, however it dies (kill -9
included: ``PR_SET_PDEATHSIG``), and it stops as on Ctrl-C, saving its checkpoint first. Where that interrupt is
lost (Python drops an exception raised inside a finalizer; a loop outside training never looks for it again), a
watcher thread that waits on the parent's sentinel ends the worker ``PARAVT_ORPHAN_GRACE_S`` seconds after the parent's death:
checkpoints and results are written aside and swapped in, so an exit at any instant leaves the last complete ones,
never a half-written run that reads as finished. A rerun then finds no orphan writing into its run directories.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from paravt.learners.interrupts import request_interrupt
from paravt.learners.threads import available_cpus

logger = logging.getLogger(__name__)

Job = tuple[Hashable, Callable[..., Any], tuple[Any, ...]]
"""(key, picklable module-level function, its arguments)."""


class JobFailed(ChildProcessError):
    """A worker exited with an error (its traceback is in the log above); finished jobs are kept."""


def run_jobs(jobs: Sequence[Job], workers: int, *, on_done: Callable[[Hashable, float], None] | None = None,
             threads: int | None = None) -> None:  # fmt: skip
    """Run every job, at most ``workers`` at a time, in submission order; ``on_done(key, seconds)`` after each
    one that succeeded. A failed job stops new ones from starting, lets the running ones finish, and raises
    ``JobFailed`` naming it. On KeyboardInterrupt (Ctrl-C, or SIGTERM / SIGHUP, which are turned into one)
    every running worker gets one SIGINT, is waited for, and the interrupt is re-raised."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    threads = threads or max(1, available_cpus() // workers)  # the cores shared out: the jobs are the machine's load
    ctx = multiprocessing.get_context("spawn")  # no inherited torch state, locks or open decoders
    pending = list(jobs)
    running: dict[Any, tuple[Hashable, float]] = {}
    parent = os.getpid()
    failed: list[str] = []
    level = logging.getLogger().getEffectiveLevel()
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    for sig in previous:
        signal.signal(sig, request_interrupt)
    try:
        while pending or running:
            while pending and len(running) < workers and not failed:
                key, fn, args = pending.pop(0)
                proc = ctx.Process(target=_worker, args=(fn, args, threads, level, parent), name=f"paravt-job {key}")
                proc.start()
                running[proc] = (key, time.perf_counter())
                logger.info("job %s started (pid %d, %d thread(s))", key, proc.pid, threads)
            if not running:
                break
            multiprocessing.connection.wait([p.sentinel for p in running])
            for proc in [p for p in running if not p.is_alive()]:
                key, t0 = running.pop(proc)
                proc.join()
                seconds = time.perf_counter() - t0
                if proc.exitcode == 0:
                    logger.info("job %s finished in %.1f min", key, seconds / 60)
                    if on_done:
                        on_done(key, seconds)
                else:
                    failed.append(f"{key} (exit code {proc.exitcode})")
    except KeyboardInterrupt:
        _stop(list(running))
        raise
    finally:
        _restore(previous)
    if failed:
        raise JobFailed(f"job(s) failed: {', '.join(failed)}; their errors are logged above; the finished jobs are "
                        f"kept, rerun to resume")  # fmt: skip


def _stop(procs: list[Any]) -> None:
    """One SIGINT to every running worker, then wait for each to save and exit (further signals are held off:
    the workers are already stopping)."""
    held = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        for proc in procs:
            if proc.is_alive():
                os.kill(proc.pid, signal.SIGINT)
        for proc in procs:
            proc.join()
            logger.info("job %s stopped (exit code %s)", proc.name.removeprefix("paravt-job "), proc.exitcode)
    finally:
        _restore(held)


def _restore(handlers: dict[int, Any]) -> None:
    """Put back handlers saved by ``signal.signal`` / ``getsignal`` (None: one not set from Python)."""
    for sig, handler in handlers.items():
        signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def die_with_parent(parent: int) -> None:
    """Ask the kernel for SIGTERM when the parent process dies (Linux ``prctl(PR_SET_PDEATHSIG)``); a parent that
    died before the request counts too. Elsewhere nothing is asked (the worker then stops at its next save
    point only if signalled)."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1  # noqa: N806 - <linux/prctl.h>
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            logger.warning("prctl(PR_SET_PDEATHSIG) failed (errno %d): this worker may outlive its parent", ctypes.get_errno())
    if os.getppid() != parent:  # the parent died before the request: stop now, as the signal would have
        os.kill(os.getpid(), signal.SIGTERM)


ORPHAN_GRACE = "PARAVT_ORPHAN_GRACE_S"
"""Seconds a worker whose parent died has to save and exit on its own before the watcher ends it (default 120;
``paravt_env.environ``: a finite number > 0, checked by every command before any work)."""


def orphan_grace_s() -> float:
    from paravt_env.environ import ORPHAN_GRACE_DEFAULT_S, positive_seconds

    return positive_seconds(ORPHAN_GRACE, ORPHAN_GRACE_DEFAULT_S)


def watch_parent(grace_s: float | None = None) -> threading.Thread | None:
    """A daemon thread that waits on the parent's sentinel (ready when the parent dies, however) and, if this process
    is still running ``grace_s`` later (default ``orphan_grace_s``), ends it with ``os._exit``. The kernel's SIGTERM
    (``die_with_parent``) is the orderly stop; this is the guarantee, and it cannot fail silently: whatever goes
    wrong in the watcher ends the worker at once rather than leave an orphan unwatched. None outside a
    multiprocessing child."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return None
    grace = orphan_grace_s() if grace_s is None else grace_s

    def watch() -> None:
        try:
            multiprocessing.connection.wait([parent.sentinel])
            time.sleep(grace)
            logger.error("the parent of %s died %.0f s ago and this worker did not stop: ending it", os.getpid(), grace)
        except BaseException as exc:  # noqa: BLE001 - the guarantee must hold whatever the watcher meets
            logger.error("the parent watcher of %s failed (%s): ending this worker now rather than leave it unwatched",
                         os.getpid(), exc)  # fmt: skip
        logging.shutdown()
        os._exit(143)  # as SIGTERM's exit status

    thread = threading.Thread(target=watch, name="paravt-parent-watch", daemon=True)
    thread.start()
    return thread


def _worker(fn: Callable[..., Any], args: tuple[Any, ...], threads: int, level: int, parent: int) -> None:
    os.setpgrp()  # a terminal's Ctrl-C reaches the parent only, which forwards it once
    # a run started in the background (`nohup ... &`) passes SIGINT down ignored: the forwarded one must count
    signal.signal(signal.SIGINT, request_interrupt)
    signal.signal(signal.SIGTERM, request_interrupt)
    watch_parent()  # first: whatever happens below, an orphan does not outlive the grace
    die_with_parent(parent)  # after the handler: the parent's death is an interrupt (save, then exit)
    logging.basicConfig(level=level, format="%(levelname)s %(message)s")
    from paravt.learners.threads import set_torch_threads

    set_torch_threads(threads)  # and the CPU's vector code pinned, as every entry point that runs a model does
    try:
        fn(*args)
    except KeyboardInterrupt:
        sys.exit(130)
