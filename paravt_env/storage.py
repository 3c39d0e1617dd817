"""Writing run directories so that nothing is lost: one writer per directory, files on disk before they count.

A kill, a full disk or a second process on the same ``--out`` must never cost what a run had already written:

- ``exclusive_lock``: an OS advisory lock (``flock``) a process holds while it writes a directory; the kernel
  drops it when the holder dies, so a crash never leaves a stale lock behind;
- ``fsync_tree``: every file of a directory (and the directories themselves) flushed to the disk, so a
  checkpoint that is promoted has its bytes on the device, not in the page cache of a machine that may lose
  power;
- ``is_disk_full``: ENOSPC / EDQUOT, the errors after which every later write fails too;
- ``read_json`` / ``read_jsonl``: reading back what a run wrote, where a damaged file is a ``DamagedFile`` naming
  the file (and the line, the column) instead of a bare ``JSONDecodeError`` or a wrong-typed value used as if sound.
"""

from __future__ import annotations

import contextlib
import errno
import json
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


class DamagedFile(ValueError):
    """A file a run wrote cannot be read back as what it should hold; the message names the file."""


def read_json(path: str | Path, kind: type = dict) -> object:
    """The JSON value of ``path``, which must be a ``kind`` (an object by default)."""
    path = Path(path)
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise DamagedFile(f"{path}: damaged, not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DamagedFile(f"{path}: damaged, not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise DamagedFile(f"{path}: damaged, nested too deeply to read") from None
    if not isinstance(value, kind):
        raise DamagedFile(f"{path}: damaged, holds a JSON {type(value).__name__} where a {kind.__name__} belongs")
    return value


def read_jsonl(path: str | Path) -> list[dict]:
    """Every row of the JSONL file ``path`` (each an object); a row that is not is named by its line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DamagedFile(f"{path}: damaged, not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            cut = number == len(text.splitlines()) and not text.endswith("\n")
            raise DamagedFile(f"{path}: damaged, line {number} is not JSON" + (" (cut short)" if cut else "")) from None
        if not isinstance(row, dict):
            raise DamagedFile(f"{path}: damaged, line {number} holds a JSON {type(row).__name__}, not an object")
        rows.append(row)
    return rows
