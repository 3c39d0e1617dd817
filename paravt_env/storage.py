"""Writing run directories so that nothing is lost: one writer per directory, files on disk before they count.

A kill, a full disk or a second process on the same ``--out`` must never cost what a run had already written:

- ``exclusive_lock``: an OS advisory lock (``flock``) a process holds while it writes a directory; the kernel
  drops it when the holder dies, so a crash never leaves a stale lock behind;
- ``fsync_tree``: every file of a directory (and the directories themselves) flushed to the disk, so a
  checkpoint that is promoted has its bytes on the device, not in the page cache of a machine that may lose
  power;
- ``is_disk_full``: ENOSPC / EDQUOT, the errors after which every later write fails too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import time
import uuid
from pathlib import Path


class OutputLocked(OSError):
    """Another process is writing the same directory."""


class DirectoryLock(contextlib.AbstractContextManager):
    """``directory/name`` locked (``flock``, exclusive, non-blocking) from construction to ``release()`` (or
    the end of a ``with`` block); ``OutputLocked`` naming the holder (pid, host, since when) if another
    process holds it. Two locks on one file conflict even within one process (flock locks belong to the open
    file), so a second trainer in the same process is refused too."""

    def __init__(self, directory: str | Path, name: str, what: str = "written") -> None:
        import fcntl

        self.path = Path(directory) / name
        self._f = open(self.path, "a+")  # noqa: SIM115 - closed by release()
        try:
            fcntl.flock(self._f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._f.seek(0)
            holder = self._f.read().strip() or "another process"
            self._f.close()
            raise OutputLocked(
                f"{directory} is being {what} by {holder}: wait for it, or use another --out"
            ) from None
        self._f.seek(0)
        self._f.truncate()
        self._f.write(
            f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
        )
        self._f.flush()

    def release(self) -> None:
        if not self._f.closed:
            self._f.close()  # closing the file drops the flock

    def __exit__(self, *exc) -> None:
        self.release()


def exclusive_lock(directory: str | Path, name: str, what: str = "written") -> DirectoryLock:
    """``with exclusive_lock(out, "eval.lock"):`` -- see ``DirectoryLock``."""
    return DirectoryLock(directory, name, what)


def fsync_tree(root: str | Path) -> None:
    """Flush every file under ``root`` and every directory entry to the disk (raises ``OSError`` as the
    disk reports it, e.g. ENOSPC for delayed allocation)."""
    root = Path(root)
    dirs = [root]
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        dirs += [Path(dirpath) / d for d in dirnames]
    for d in [*dirs, root.parent]:
        fsync_dir(d)


def fsync_dir(path: str | Path) -> None:
    """Make a rename or a new file inside ``path`` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory; the data files were synced
    finally:
        os.close(fd)


def part_path(path: Path) -> Path:
    """Where ``path`` is written before its rename: a name of this writer's own (process and a random
    suffix), so two processes writing the same file at once (two ``paravt train`` runs filling one synth
    cache) never rename each other's half-written file."""
    return path.with_name(f"{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.part")


def write_text_atomic(path: str | Path, text: str) -> None:
    """``text`` into ``path`` through a ``part_path`` and a rename: a reader (or a kill) never sees half a
    file."""
    path = Path(path)
    tmp = part_path(path)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def is_disk_full(exc: BaseException) -> bool:
    """The disk or the quota is full: every later write would fail as well."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
