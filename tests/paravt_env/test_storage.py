"""One writer per directory: the lock names its holder and dies with it."""

import subprocess
import sys

import pytest

from paravt_env.storage import DirectoryLock, OutputLocked, exclusive_lock


def test_a_second_writer_is_refused_with_the_holder_named_and_admitted_after_release(tmp_path):
    held = DirectoryLock(tmp_path, "x.lock", "trained")
    with pytest.raises(OutputLocked, match=r"being trained by pid \d+ on"):
        DirectoryLock(tmp_path, "x.lock", "trained")  # even in the same process
    held.release()
    with exclusive_lock(tmp_path, "x.lock"):
        pass


def test_the_lock_dies_with_its_holder(tmp_path):
    code = f"from paravt_env.storage import DirectoryLock; DirectoryLock({str(tmp_path)!r}, 'x.lock'); import os; os._exit(0)"
    subprocess.run([sys.executable, "-c", code], check=True)
    DirectoryLock(tmp_path, "x.lock").release()  # no stale lock after the holder exited without releasing

