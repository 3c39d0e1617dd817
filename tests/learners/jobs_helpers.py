"""Jobs for ``test_jobs.py``, in a module a spawned worker can import by name (the tests run with pytest's
importlib mode, where test modules are not importable from another process)."""

import json
import os
import signal
import time
from pathlib import Path


def record(path: str, name: str) -> None:
    import torch

    Path(path, name).write_text(json.dumps({"pid": os.getpid(), "pgid": os.getpgrp(),
                                            "threads": torch.get_num_threads()}))  # fmt: skip


def fail(path: str, name: str) -> None:
    raise RuntimeError(f"job {name} broke")


def wait_for_interrupt(path: str, name: str) -> None:
    """Runs until interrupted, then 'saves' (slowly, as a checkpoint does) and counts the SIGINTs it got."""
    got = []
    signal.signal(signal.SIGINT, lambda s, f: got.append(s))
    Path(path, f"{name}.started").write_text("")
    while not got:
        time.sleep(0.02)
    time.sleep(0.5)  # a second forwarded SIGINT would land here
    Path(path, f"{name}.saved").write_text(str(len(got)))
    raise KeyboardInterrupt
