"""``paravt serve-env`` under load: many concurrent sessions playing episodes, what they get per second, the
server's peak memory, and what happens past the session limit.

    python -m benchmarks.perf.serve_env_load [--data DIR] [--sessions 32] [--seconds 30] [--max-sessions 64]

Starts a real ``paravt serve-env`` process (on 8 synthetic videos generated for it when no ``--data`` is
given); each client thread opens its own session and plays episodes (reset K = 8, one turn of 2 parallel
crops, an answer) until the time is up. Then it opens sessions until refused. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import numpy as np

from benchmarks.perf.remote_env import peak_rss_mb, start_serve_env

TURN = "".join("<tool_call>" + json.dumps({"name": "crop_video", "arguments": {"start_time": a, "end_time": a + 8}})
               + "</tool_call>" for a in (5, 25))  # fmt: skip


def _client(url: str, k: int, n_samples: int, until: float, out: dict) -> None:
    latencies, statuses, calls = [], Counter(), 0
    with httpx.Client(base_url=url, timeout=120) as c:
        r = c.post("/v1/sessions", json={"options": {"frame_budget": 8}})
        statuses[r.status_code] += 1
        if r.status_code != 201:
            out[k] = {"latencies": [], "statuses": statuses, "calls": 0}
            return
        sid = r.json()["session_id"]
        i = k
        while time.time() < until:
            for path, body in ((f"/v1/sessions/{sid}/reset", {"options": {"index": i % n_samples}}),
                               (f"/v1/sessions/{sid}/step", {"action": TURN}),
                               (f"/v1/sessions/{sid}/step", {"action": "<answer>A</answer>"})):  # fmt: skip
                t0 = time.perf_counter()
                r = c.post(path, json=body)
                latencies.append(time.perf_counter() - t0)
                statuses[r.status_code] += 1
                calls += 1
            i += 1
        c.delete(f"/v1/sessions/{sid}")
    out[k] = {"latencies": latencies, "statuses": statuses, "calls": calls}


def run(data: str, sessions: int, seconds: float, max_sessions: int) -> dict:
    n_samples = sum(1 for line in (Path(data) / "samples.jsonl").read_text().splitlines() if line.strip())
    proc, url = start_serve_env(data, "--max-sessions", str(max_sessions))
    try:
        idle_mb = peak_rss_mb(proc.pid)
        out: dict[int, dict] = {}
        t0 = time.time()
        threads = [threading.Thread(target=_client, args=(url, k, n_samples, t0 + seconds, out)) for k in range(sessions)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - t0
        lat = np.array([x for v in out.values() for x in v["latencies"]])
        statuses = sum((v["statuses"] for v in out.values()), Counter())
        calls = sum(v["calls"] for v in out.values())
        # past the limit: open sessions until refused, then close them
        opened, refused = [], Counter()
        with httpx.Client(base_url=url, timeout=30) as c:
            for _ in range(max_sessions + 5):
                r = c.post("/v1/sessions", json={})
                (opened.append(r.json()["session_id"]) if r.status_code == 201 else refused.update([r.status_code]))
            for sid in opened:
                c.delete(f"/v1/sessions/{sid}")
            health = c.get("/health").json()
        return {
            "sessions": sessions, "seconds": round(wall, 1), "calls": calls,
            "calls_per_s": round(calls / wall, 1), "episodes_per_s": round(calls / 3 / wall, 2),
            "latency_s": {"p50": round(float(np.percentile(lat, 50)), 4), "p95": round(float(np.percentile(lat, 95)), 4),
                          "max": round(float(lat.max()), 4)} if lat.size else None,
            "statuses": dict(statuses), "server_rss_mb": {"idle": round(idle_mb), "peak": round(peak_rss_mb(proc.pid))},
            "limit": {"max_sessions": max_sessions, "opened": len(opened), "refused": dict(refused)},
            "sessions_after": health["sessions"],
        }  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help="a paravt synth directory (default: 8 videos made for the run)")
    p.add_argument("--sessions", type=int, default=32)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--max-sessions", type=int, default=64)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data
        if data is None:
            from paravt_env.data.synth_plan import SynthConfig
            from paravt_env.data.synthetic import generate_dataset

            generate_dataset(tmp, SynthConfig(n=8, seed=3, min_duration=60, max_duration=120), progress=False)
            data = tmp
        print(json.dumps(run(data, args.sessions, args.seconds, args.max_sessions), indent=2))


if __name__ == "__main__":
    main()
