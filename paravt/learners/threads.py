"""How many CPU threads torch computes with, chosen on purpose.

torch's default is one intra-op thread per core. On a machine where anything else runs (a laptop, a shared
2-core CI box, two ``paravt repro`` jobs), those threads wait on each other and a tiny-model step gets several
times slower, not faster (``benchmarks/perf/test_threads.py`` measures 1 against 2 threads idle and beside a
competing process). So every entry point that runs a model (``paravt train``, ``eval``, ``probe``, ``serve``,
``repro``'s workers) sets the count itself: ``--threads N``, else ``PARAVT_THREADS``, else ``default_threads``
(half the usable cores, at least 1: a machine's other half stays free for whatever shares it).
"""

from __future__ import annotations

import logging
import os

ENV = "PARAVT_THREADS"
"""Environment variable that sets the thread count where no ``--threads`` is given."""

logger = logging.getLogger(__name__)


def available_cpus() -> int:
    """The cores this process may run on (its affinity mask: a container's or ``taskset``'s share)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def default_threads(workers: int = 1) -> int:
    """Half the usable cores, shared among ``workers`` processes, at least 1."""
    return max(1, available_cpus() // (2 * max(1, workers)))


def resolve_threads(requested: int | None = None, workers: int = 1) -> tuple[int, str]:
    """The thread count and where it came from: ``requested`` (``--threads``), ``PARAVT_THREADS``, or the
    default. A count below 1 or a non-integer variable is a ``ValueError`` naming it."""
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
            raise ValueError(f"--threads must be an integer >= 1, got {requested!r}")
        return requested, "--threads"
    from paravt_env.environ import positive_int

    value = positive_int(ENV)
    if value is not None:
        return value, ENV
    return default_threads(workers), f"default: half of {available_cpus()} usable core(s)" + (
        f" over {workers} jobs" if workers > 1 else "")


def set_torch_threads(requested: int | None = None, workers: int = 1) -> int:
    """Set torch's intra-op thread count (``resolve_threads``) and return it; logged with its source. The CPU's
    vector code is pinned too (``cpu_numerics.pin_cpu_numerics``): with the thread count, what makes two
    machines compute the same floats."""
    import torch

    from paravt.learners.cpu_numerics import pin_cpu_numerics

    numerics = pin_cpu_numerics()
    threads, source = resolve_threads(requested, workers)
    torch.set_num_threads(threads)
    logger.info("torch threads: %d (%s); CPU kernels %s, MKL_CBWR %s, oneDNN %s", threads, source,
                numerics["cpu_capability"], numerics["mkl_cbwr"], "on" if numerics["onednn"] else "off")  # fmt: skip
    return threads
