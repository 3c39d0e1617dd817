"""``paravt serve`` under load: peak RSS and answers by status for 50 concurrent clients, and what the hostile
requests of the adversarial pass cost it (a 1 MB text prompt, a 12000 x 12000 PNG, a 40 MB body).

    python -m benchmarks.perf.serve_load [--model DIR] [--clients 50] [--requests 4]

Starts a real ``paravt serve`` process (a tiny random-weight Qwen3-VL built locally when no ``--model`` is
given), reads its peak RSS (``VmHWM``) from ``/proc``, prints one JSON object."""

from __future__ import annotations

import argparse
import base64
import io
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np


def _png(array: np.ndarray) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _huge_png(side: int) -> str:
    """A ``side`` x ``side`` one-colour PNG, written row by row (never ``side``^2 bytes in this process)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    comp, row = zlib.compressobj(9), b"\x00" + b"\x00" * side
    body = b"".join(comp.compress(row) for _ in range(side)) + comp.flush()
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
    png += chunk(b"IDAT", body) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode()


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) / 1024


def start(model: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "paravt", "serve", "--model", model, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    deadline = time.time() + 300
    while time.time() < deadline:
        m = re.search(r"listening on (http://\S+)", proc.stdout.readline() or "")
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError("paravt serve did not start")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--requests", type=int, default=4, help="requests per client")
    args = p.parse_args(argv)
    model = args.model
    if model is None:
        from paravt.policies.tiny_model import build_tiny_model

        model = str(build_tiny_model(Path(tempfile.mkdtemp()) / "model", arch="qwen3_vl", seed=0))
    proc, url = start(model)
    try:
        rng = np.random.default_rng(0)
        frames = [_png(rng.integers(0, 255, (96, 128, 3), dtype=np.uint8)) for _ in range(4)]
        content = [p for f in frames for p in ({"type": "image_url", "image_url": {"url": f}}, {"type": "text", "text": "<1.0 seconds>"})]
        body = {"messages": [{"role": "user", "content": [*content, {"type": "text", "text": "What happens?"}]}], "max_tokens": 16}
        idle = peak_rss_mb(proc.pid)

        def client(_: int) -> list[str]:
            out = []
            with httpx.Client(timeout=300) as c:
                for _ in range(args.requests):
                    try:
                        out.append(str(c.post(url + "/v1/chat/completions", json=body).status_code))
                    except httpx.HTTPError as exc:
                        out.append(type(exc).__name__)
            return out

        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            answers = Counter(a for result in pool.map(client, range(args.clients)) for a in result)
        wall = time.perf_counter() - t0
        under_load = peak_rss_mb(proc.pid)
        hostile = {}
        for name, payload in (
            ("text_1MB", {"messages": [{"role": "user", "content": "word " * 200_000}], "max_tokens": 16}),
            ("png_12000x12000", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": _huge_png(12000)}}]}]}),
            ("body_40MB", {"messages": [{"role": "user", "content": "x" * 40 * 2**20}]}),
        ):  # fmt: skip
            t1 = time.perf_counter()
            r = httpx.post(url + "/v1/chat/completions", json=payload, timeout=300)
            hostile[name] = {"status": r.status_code, "seconds": round(time.perf_counter() - t1, 2),
                             "message": r.json()["error"]["message"][:120] if r.status_code >= 400 else ""}  # fmt: skip
        report = {
            "clients": args.clients, "requests": args.clients * args.requests, "answers": dict(answers),
            "wall_s": round(wall, 1), "peak_rss_mb": {"idle": round(idle), "after_load": round(under_load),
                                                       "after_hostile": round(peak_rss_mb(proc.pid))},
            "hostile": hostile,
        }  # fmt: skip
        print(json.dumps(report, indent=2))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
