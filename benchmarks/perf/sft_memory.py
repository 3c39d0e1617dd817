"""Peak memory of SFT on the released schema as the shard grows: streamed (``paravt.learners.coldstart.sft_stream``) against
reading every row first (``paravt.learners.coldstart.release_sft.release_sft_trajectories``, the path before streaming).

    python -m benchmarks.perf.sft_memory --rows 1000 4000 [--out runs/sft_memory.json]

For each size, a parquet shard of that many rows is generated (lmms-engine chat schema: a question with one
224x224 frame, an answer of 2-40 words; 64 distinct frame files), and each path trains one pass over it on the
tiny Qwen3-VL (CPU) in a fresh process, whose peak RSS (``ru_maxrss``) is reported. Streamed memory should not
depend on the shard's size; the in-memory path's grows with it.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_shard(folder: Path, rows: int, seed: int = 0) -> Path:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    frames = folder / "frames"
    frames.mkdir(parents=True, exist_ok=True)
    gen = np.random.default_rng(seed)
    for k in range(64):  # smooth random images: they compress as video frames do, not as noise
        small = gen.integers(0, 255, (8, 8, 3), dtype=np.uint8)
        Image.fromarray(small).resize((224, 224), Image.BILINEAR).save(frames / f"f{k}.png")
    rng = random.Random(seed)
    out = []
    for i in range(rows):
        answer = " ".join(rng.choice(["red", "blue", "a star", "the crop", "shows"]) for _ in range(rng.randint(2, 40)))
        messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": f"frames/f{i % 64}.png"}},
                                                 {"type": "text", "text": f"Question {i}: what is shown?"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": f"<answer>{answer}</answer>"}]}]  # fmt: skip
        out.append({"id": f"r{i}", "messages": json.dumps(messages)})
    path = folder / "shard.parquet"
    pq.write_table(pa.Table.from_pylist(out), path, row_group_size=256)
    return path


def train_one_pass(shard: Path, rows: int, mode: str, model: Path) -> dict:
    """In this process: one pass over ``shard`` (one row per step), streamed or all rows read first."""
    import torch

    from paravt.policies.hf import HFPolicy

    torch.manual_seed(0)
    policy = HFPolicy.from_pretrained(model)
    t0 = time.perf_counter()
    if mode == "streamed":
        from paravt.learners.coldstart.sft_stream import train_streaming_sft

        losses, counts = train_streaming_sft(policy, shard, steps=rows - 1, batch=1, pack_tokens=0, lr=1e-4,
                                             grad_clip=1.0, seed=0)  # fmt: skip
        trained = counts.trained
    else:
        from paravt.learners.coldstart.release_sft import release_sft_trajectories
        from paravt.learners.coldstart.sft import sft_losses, train_cross_entropy

        data, _ = release_sft_trajectories(policy, shard)
        for t in data:
            t.encoded = t.encoded.compact()  # as the cold start keeps its episodes
        losses = train_cross_entropy(policy, data, sft_losses, steps=rows - 1, batch=1, lr=1e-4, grad_clip=1.0,
                                     seed=0, stage="sft")  # fmt: skip
        trained = len(losses)
    return {"mode": mode, "rows": rows, "trained": trained, "wall_s": time.perf_counter() - t0,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, nargs="+", default=[1000, 4000])
    p.add_argument("--modes", nargs="+", default=["streamed", "in_memory"], choices=["streamed", "in_memory"])
    p.add_argument("--out", default=None, help="also write the results as JSON here")
    p.add_argument("--child", nargs=3, metavar=("SHARD", "ROWS", "MODE"), help=argparse.SUPPRESS)
    p.add_argument("--model", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        shard, rows, mode = args.child
        print(json.dumps(train_one_pass(Path(shard), int(rows), mode, Path(args.model))))
        return 0
    from paravt.policies.tiny_model import build_tiny_model

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_model(Path(tmp) / "model", arch="qwen3_vl", seed=0)
        for rows in args.rows:
            shard = write_shard(Path(tmp) / f"n{rows}", rows)
            for mode in args.modes:
                done = subprocess.run([sys.executable, "-m", "benchmarks.perf.sft_memory", "--child", str(shard), str(rows),
                                       mode, "--model", str(model)], capture_output=True, text=True, check=True)  # fmt: skip
                results.append(json.loads(done.stdout.strip().splitlines()[-1]))
                r = results[-1]
                print(f"{r['rows']:>6} rows  {r['mode']:<9}  peak RSS {r['peak_rss_mb']:7.0f} MB  "
                      f"({r['trained']} rows trained, {r['wall_s']:.0f} s)", flush=True)  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
