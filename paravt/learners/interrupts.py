"""Commit sections: the few lines that turn a computed step into a completed one run without interruption.

A training step has a long part that can be thrown away (rollouts, forward and backward: the weights do not
change) and a short part that cannot be cut in the middle (the optimiser step, the step counter, the metrics
row, the snapshot of the data position and RNGs that a checkpoint saves). A Ctrl-C or SIGTERM that lands in
the short part would leave weights of step N+1 beside a position of step N, and the resumed run would differ
from an uninterrupted one. Inside ``commit_section()`` SIGINT / SIGTERM are held and delivered as soon as it
ends, so an interrupt always finds the run at a step boundary.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

HELD = (signal.SIGINT, signal.SIGTERM)

_requested: list[int] = []
"""Signals ``request_interrupt`` has turned into a KeyboardInterrupt in this process."""


def request_interrupt(signum: int, frame: object = None) -> None:
    """A handler for SIGINT / SIGTERM: remember the request, then raise KeyboardInterrupt (the trainer saves and
    exits on it). Python drops an exception raised while a finalizer or a weakref callback runs ("Exception
    ignored in ..."): measured, 2 SIGTERMs in 27 landed in ``WeakKeyDictionary``'s callback and the run trained on.
    The remembered request is raised again at the next step boundary (``raise_if_requested``)."""
    _requested.append(signum)
    raise KeyboardInterrupt(f"signal {signum}")


def raise_if_requested() -> None:
    """Raise the KeyboardInterrupt a signal asked for if it has not stopped the loop yet: called at the top of
    every training loop's step, which a delivered interrupt never reaches again."""
    if _requested:
        raise KeyboardInterrupt(f"signal {_requested[-1]} (raised again: its first delivery was lost)")


@contextlib.contextmanager
def commit_section() -> Iterator[None]:
    """Hold SIGINT and SIGTERM for the duration of the block; re-raise them, in order, once it is done (with
    the handlers that were installed before). Off the main thread (where Python cannot install handlers,
    and where signals are never delivered anyway) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in HELD}

    def hold(signum, frame):
        pending.append(signum)

    for sig in HELD:
        signal.signal(sig, hold)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: installed outside Python
        for sig in dict.fromkeys(pending):  # each held signal once, in arrival order
            signal.raise_signal(sig)


def interrupt_on_sigterm() -> None:
    """SIGTERM interrupts like Ctrl-C, and neither is lost if it lands in a finalizer (``request_interrupt``). SIGINT is left ignored where it was (a run started with
    ``&``)."""
    signal.signal(signal.SIGTERM, request_interrupt)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, request_interrupt)
