"""Jobs for ``test_jobs.py``, in a module a spawned worker can import by name (the tests run with pytest's
importlib mode, where test modules are not importable from another process)."""

import json
import os
import time
from pathlib import Path


def record(path: str, name: str) -> None:
    import torch

    Path(path, name).write_text(json.dumps({"pid": os.getpid(), "pgid": os.getpgrp(),
                                            "threads": torch.get_num_threads()}))  # fmt: skip


def fail(path: str, name: str) -> None:
    raise RuntimeError(f"job {name} broke")


def wait_for_interrupt(path: str, name: str) -> None:
    """Runs until interrupted (Python's own SIGINT handling, as the trainer relies on), then 'saves' slowly, as
    a checkpoint does: a second SIGINT would cut the save and leave no ``.saved`` file. ``.started`` is written
    inside the ``try``: the test signals once the file exists, which on a loaded machine can be before the write
    returns (an interrupt there must still be caught and saved, as the trainer's is)."""
    try:
        Path(path, f"{name}.started").write_text("")
        while True:
            time.sleep(0.02)
    except KeyboardInterrupt:
        time.sleep(0.5)
        Path(path, f"{name}.saved").write_text("1")
        raise


def lose_interrupts(path: str, name: str) -> None:
    """Runs on after every interrupt, as a worker does where Python dropped the KeyboardInterrupt inside a finalizer
    or a loop never checks for it again: only something outside Python's signal handling can end it."""
    started = False
    while True:
        try:
            if not started:  # inside the try: an interrupt that lands while the file is written is lost too
                Path(path, f"{name}.started").write_text("")
                started = True
            while True:
                time.sleep(0.02)
        except KeyboardInterrupt:
            Path(path, f"{name}.interrupted").write_text("1")
