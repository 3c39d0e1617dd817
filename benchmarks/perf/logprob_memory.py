"""Peak memory and time of the training log-probs at Qwen-VL's vocabulary: chunked and recomputed
(``paravt.policies.logprobs.target_logprobs``) against one fp32 log-softmax over every position (the path
before it), forward and backward, side by side.

    python -m benchmarks.perf.logprob_memory [--positions 4096] [--vocab 151936] [--device cpu|cuda] [--out X.json]

Each path runs in a fresh process on bf16 logits of ``positions`` x ``vocab`` (one rollout row of that many
tokens) that need a gradient, as the update's do; reported: peak resident memory above the logits themselves
(CPU: ``ru_maxrss`` minus the RSS after they were made; CUDA: ``max_memory_allocated`` minus the allocation
after they were made) and wall time of forward + backward.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

PATHS = ("plain", "chunked")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(path: str, positions: int, vocab: int, device: str) -> dict:
    """In this process: forward and backward of one path; its extra peak memory and time."""
    import torch

    from paravt.policies.logprobs import target_logprobs

    torch.manual_seed(0)
    cuda = device == "cuda"
    logits = torch.randn(positions, vocab, device=device, dtype=torch.bfloat16).requires_grad_(True)
    targets = torch.randint(0, vocab, (positions,), device=device)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated() / 2**20
    else:
        base = _rss_mb()
    t0 = time.perf_counter()
    if path == "plain":
        lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    else:
        lp = target_logprobs(logits, targets, temperature=1.0)
    lp.sum().backward()
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else _rss_mb()
    return {"path": path, "positions": positions, "vocab": vocab, "device": device, "wall_s": wall,
            "extra_peak_mb": peak - base, "logits_mb": positions * vocab * 2 / 2**20}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--positions", type=int, default=4096)
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--out", default=None, help="also write the results as JSON here")
    p.add_argument("--child", default=None, choices=PATHS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.positions < 1 or args.vocab < 2:
        p.error("--positions must be >= 1 and --vocab >= 2")
    if args.child:
        print(json.dumps(run_one(args.child, args.positions, args.vocab, args.device)))
        return 0
    results = []
    for path in PATHS:
        cmd = [sys.executable, "-m", "benchmarks.perf.logprob_memory", "--child", path, "--positions", str(args.positions),
               "--vocab", str(args.vocab), "--device", args.device]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{path}: failed\n{done.stderr.strip()[-2000:]}", file=sys.stderr)
            return 1
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        r = results[-1]
        print(f"{path:<8} {r['positions']} x {r['vocab']} bf16 logits ({r['logits_mb']:.0f} MB) on {r['device']}: "
              f"extra peak {r['extra_peak_mb']:7.0f} MB, forward + backward {r['wall_s']:.2f} s", flush=True)  # fmt: skip
    plain, chunked = results
    print(f"chunked / plain: memory {chunked['extra_peak_mb'] / max(plain['extra_peak_mb'], 1e-9):.2f}x, "
          f"time {chunked['wall_s'] / max(plain['wall_s'], 1e-9):.2f}x")  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
