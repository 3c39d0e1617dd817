"""Helpers of the serve-env benchmarks: a real ``paravt serve-env`` process and its peak memory."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path


def start_serve_env(data: str | Path, *extra: str, timeout: float = 120.0) -> tuple[subprocess.Popen, str]:
    """Start ``paravt serve-env --data DATA --port 0``; returns the process and its URL once it listens."""
    proc = subprocess.Popen([sys.executable, "-m", "paravt", "serve-env", "--data", str(data), "--port", "0", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        m = re.search(r"at (http://\S+)", line or "")
        if m:
            return proc, m.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError(f"paravt serve-env did not start: {proc.stderr.read()[-2000:]}")


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory of a live process (``VmHWM``), in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) / 1024
