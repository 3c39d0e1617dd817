"""SFT at scale: the released SFT mix streamed, packed to a token budget and trained with gradient accumulation,
resumable at any step, never all rows in memory.

    files ──► rows ──► conversations ──► trajectories ──► packs ──► optimiser steps
    (parquet by record batch,  (media read;  (tokenised, frames   (<= sft.pack_tokens tokens;   (sft.batch packs,
     JSONL by line; file order  unreadable   compressed)           a longer row is dropped        token-mean cross-
     reshuffled every pass)     ones skipped)                       and counted)                   entropy)

The release (``paravt/sft/configs/qwen3vl_8b.yaml``) cold-starts ParaVT-8B with lmms-engine's iterable dataset:
``packing: true``, ``packing_length: 8192``, ``filter_overlong: true``, 1,500 steps of lr 2e-5 (cosine, 5 %
warm-up, weight decay 0.01), 4 packed sequences per device per step. Here a pack is a run of consecutive
conversations whose tokens (text and image tokens) fit ``sft.pack_tokens``, filled greedily in stream order;
each conversation is its own forward pass (what varlen attention over a packed sequence computes) and the loss
is the mean over every assistant token of the step's packs, as a packed batch's cross-entropy is.

What a read error does, by class:

- a row whose media cannot be read (missing, undecodable, an image over PIL's decompression-bomb limit) is
  skipped and counted (``StreamCounts.unreadable``; the first is named in a warning): the rest of the data is
  sound;
- a file that cannot be read (a truncated or corrupt parquet shard, bytes that are not UTF-8, a line that is not
  JSON) or a row that breaks the schema (a text part that is not a string, ...) stops the run with a
  ``DataFormatError`` naming the file and the row: training on around it would train on another mix than the one
  asked for. Fix or remove the file, then start the stage again.

The files are indexed at the start (path, size, rows) and the index is part of the checkpoint: resuming over a
changed set of files (added, removed or rewritten) is refused with what changed, since the saved position names
a row of the indexed order.

Memory holds one step's packs and one parquet record batch, whatever the size of the data (measured in
docs/training.md, "SFT at scale"). A checkpoint (``paravt.learners.coldstart.store``, every ``sft.save_every_s`` seconds, at the end and on
Ctrl-C / SIGTERM) holds the weights, the optimiser and schedule, the stream position of the first row not yet
trained on and the counters: ``--resume`` rereads from that row (skipping earlier rows without reading their
media) and continues as the uninterrupted run would. Rows within a file are read in stored order: a shuffle
buffer would have to be checkpointed with its contents.
"""

from __future__ import annotations

import logging
import random
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from paravt.learners.coldstart.release_sft import conversation_trajectory, parse_row, release_sft_files
from paravt.learners.coldstart.sft import (
    accumulate,
    lr_scheduler,
    optimizer_step,
    progress_bar,
    run_steps,
    sft_losses,
)
from paravt.learners.interrupts import commit_section
from paravt.learners.optim import adamw
from paravt.learners.trajectory import Trajectory
from paravt.policies.hf import HFPolicy
from paravt_env.data.formats import DataFormatError
from paravt_env.data.loaders import iter_rows
from paravt_env.video import VideoDecodeError
from paravt_env.video.qwen_frames import QwenSamplingError

logger = logging.getLogger(__name__)


@dataclass
class StreamPosition:
    """Where the stream stands: the pass over the data, the file (in that pass's order) and its row."""

    pass_: int = 0
    file: int = 0
    row: int = 0


@dataclass
class StreamCounts:
    """What the stream did with the rows it read (up to a position)."""

    trained: int = 0
    """Rows packed and trained on."""
    overlong: int = 0
    """Rows longer than ``pack_tokens`` alone: dropped (the release's ``filter_overlong``)."""
    unreadable: int = 0
    """Rows whose media is missing or cannot be decoded: skipped."""


def file_order(files: list[Path], pass_: int, seed: int) -> list[Path]:
    """The files of one pass, in an order drawn from (seed, pass): each pass visits the shards differently."""
    order = list(files)
    random.Random(f"sft-stream:{seed}:{pass_}").shuffle(order)
    return order


def stream_rows(policy: HFPolicy, files: list[Path], start: StreamPosition, *, seed: int,
                roots: Callable[[Path], list[Path]], limit: int | None = None) -> Iterator[tuple[StreamPosition, Trajectory | None]]:  # fmt: skip
    """From ``start`` on, forever (pass after pass): (position of the row, its trajectory or None where its
    media could not be read). Rows before ``start.row`` in its file are skipped unparsed. With ``limit``, a
    pass ends after that many rows (counted over the files in the pass's order)."""
    pass_, file, row = start.pass_, start.file, start.row
    warned = False
    while True:
        order = file_order(files, pass_, seed)
        seen = 0
        for f, path in enumerate(order):
            for i, (where, raw) in enumerate(iter_rows(path)):
                if limit is not None and seen >= limit:
                    break
                seen += 1
                if f < file or (f == file and i < row):
                    continue
                try:
                    traj = conversation_trajectory(policy, parse_row(raw, f"{path}: {where}", roots(path)))
                    traj.encoded = traj.encoded.compact()
                except (FileNotFoundError, VideoDecodeError, QwenSamplingError, OSError, *_media_errors()) as exc:
                    if not warned:  # the first one by name; the count is in the summary
                        warnings.warn(f"skipping SFT rows whose media cannot be read (first: {path}: {where}: "
                                      f"{type(exc).__name__}: {exc}); the cold start's summary counts them", stacklevel=2)  # fmt: skip
                        warned = True
                    traj = None
                yield StreamPosition(pass_, f, i), traj
        if seen == 0:
            raise ValueError(f"the SFT data {files[0].parent if len(files) > 1 else files[0]} holds no row")
        pass_, file, row = pass_ + 1, 0, 0


def _media_errors() -> tuple[type[BaseException], ...]:
    """PIL's refusals of an image (over its decompression-bomb limit, unidentifiable bytes)."""
    from PIL import Image, UnidentifiedImageError

    return (Image.DecompressionBombError, UnidentifiedImageError)


def index_files(files: list[Path]) -> list[dict[str, Any]]:
    """What the stream reads: each file's path, size and row count (parquet: from its metadata; JSON Lines: its
    non-empty lines), in sorted order. Saved with the position, so a resume can tell whether the data changed."""
    out = []
    for path in files:
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise DataFormatError(f"{path}: cannot be read ({exc})") from None
        out.append({"path": str(path), "size": size, "rows": _count_rows(path)})
    return out


def _count_rows(path: Path) -> int | None:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return int(pq.ParquetFile(path).metadata.num_rows)
        except (pa.ArrowException, OSError) as exc:
            raise DataFormatError(f"{path}: the parquet file cannot be read ({exc})") from None
    if suffix == ".jsonl":
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    return None


def check_index(saved: list[dict[str, Any]] | None, now: list[dict[str, Any]]) -> None:
    """Refuse to resume over other files than the saved position indexed, saying what changed."""
    if saved is None:  # a state saved before files were indexed: nothing to compare
        return
    before, after = {f["path"]: f for f in saved}, {f["path"]: f for f in now}
    added, removed = sorted(after.keys() - before.keys()), sorted(before.keys() - after.keys())
    changed = sorted(p for p in before.keys() & after.keys() if before[p] != after[p])
    if added or removed or changed:
        what = "; ".join(f"{label}: {', '.join(paths[:5])}{' ...' if len(paths) > 5 else ''}"
                         for label, paths in (("added", added), ("removed", removed), ("rewritten", changed)) if paths)  # fmt: skip
        raise ValueError(f"the SFT data changed since its saved position ({what}): the position names a row of "
                         "the files as they were. Restore them, or start the SFT stage again (remove "
                         "RUN/coldstart/partial, or run without --resume)")


@dataclass
class Pack:
    """Consecutive trajectories of the stream within the token budget, and where its first row was read."""

    start: StreamPosition
    counts: StreamCounts
    """The stream's counters before the pack's first row (so a resume from ``start`` recounts nothing)."""
    items: list[Trajectory]


def packs(rows: Iterator[tuple[StreamPosition, Trajectory | None]], pack_tokens: int,
          counts: StreamCounts) -> Iterator[Pack]:  # fmt: skip
    """Greedy packing in stream order: a row joins the current pack while the pack's tokens stay within
    ``pack_tokens`` (0: one row per pack); a row longer than the budget alone is dropped, an unreadable row
    skipped, both counted in ``counts`` (updated in place as rows are read)."""
    current: Pack | None = None
    size = 0
    pass_, whole, trained_in_pass = None, False, 0  # is the pass read from its first row, and did it train any?
    for position, traj in rows:
        if position.pass_ != pass_:
            if whole and not trained_in_pass:  # every pass reads the same rows: none will ever train
                raise ValueError(f"no row of the SFT data can be trained on ({counts.unreadable} unreadable, "
                                 f"{counts.overlong} longer than pack_tokens={pack_tokens})")  # fmt: skip
            pass_, whole, trained_in_pass = position.pass_, (position.file, position.row) == (0, 0), 0
        if current is None:
            current, size = Pack(position, StreamCounts(**asdict(counts)), []), 0
        if traj is None:
            counts.unreadable += 1
            continue
        n = len(traj.input_ids)
        if pack_tokens and n > pack_tokens:
            counts.overlong += 1
            continue
        if current.items and (not pack_tokens or size + n > pack_tokens):
            yield current
            current, size = Pack(position, StreamCounts(**asdict(counts)), []), 0
        current.items.append(traj)
        size += n
        counts.trained += 1
        trained_in_pass += 1


def train_streaming_sft(policy: HFPolicy, spec: str | Path, *, steps: int, batch: int, pack_tokens: int, lr: float,
                        grad_clip: float, seed: int, schedule: str = "cosine", warmup_ratio: float = 0.05,
                        weight_decay: float = 0.0, video_root: str | Path | None = None, limit: int | None = None,
                        resume: dict[str, Any] | None = None, save_state: Callable[[dict[str, Any]], None] | None = None,
                        save_every_s: float = 60.0, progress: bool = False) -> tuple[list[dict], StreamCounts]:  # fmt: skip
    """``steps`` AdamW steps on the SFT data ``spec`` (a file, folder or glob in lmms-engine's chat schema),
    each over ``batch`` packs, scored a forward pass of similar-length conversations at a time
    (``sft.token_means``); returns the loss rows (``stage`` "sft",
    ``step``, ``loss``, ``lr``, ``tokens``, ``rows``) and the stream's counters. ``resume`` / ``save_state``
    as in ``sft.train_cross_entropy``."""
    files = release_sft_files(spec)
    index = index_files(files)

    def roots(path: Path) -> list[Path]:
        return [Path(video_root).expanduser(), path.parent] if video_root else [path.parent]

    opt = adamw(policy.model.parameters(), lr=lr, weight_decay=weight_decay)  # fp32 masters for a bf16 model
    sched = lr_scheduler(opt, schedule, steps, warmup_ratio)
    rows: list[dict] = []
    start, position, counts = 0, StreamPosition(), StreamCounts()
    if resume is not None:
        if resume["steps"] != steps or resume["stage"] != "sft_stream":
            raise ValueError(f"the saved SFT state is of a {resume['steps']}-step {resume['stage']} loop, not of "
                             f"this {steps}-step streaming SFT")  # fmt: skip
        policy.model.load_state_dict(resume["model"])
        torch.set_rng_state(resume["torch_rng"])
        rows, start = list(resume["rows"]), resume["step"]
        check_index(resume.get("files"), index)
        position, counts = StreamPosition(**resume["position"]), StreamCounts(**resume["counts"])
        if start >= steps:
            policy.model.eval()
            return rows, counts
        opt.load_state_dict(resume["optimizer"])
        sched.load_state_dict(resume["scheduler"])
    stream = packs(stream_rows(policy, files, position, seed=seed, roots=roots, limit=limit), pack_tokens, counts)
    # the first row not yet trained on, and the counters up to it: what a checkpoint saves
    boundary = (position, StreamCounts(**asdict(counts)), torch.get_rng_state())

    def loop_state(step: int) -> dict[str, Any]:
        return {"stage": "sft_stream", "step": step, "steps": steps, "model": policy.model.state_dict(),
                "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "position": asdict(boundary[0]),
                "counts": asdict(boundary[1]), "torch_rng": boundary[2], "rows": list(rows), "files": index}  # fmt: skip

    pending: Pack | None = None  # read ahead of the step that ends where it starts

    def one_step(step: int) -> float:
        nonlocal pending, boundary
        chosen = [pending] if pending is not None else []
        while len(chosen) < batch:
            chosen.append(next(stream))
        pending = next(stream)  # its start is where the next step (and a resume) begins
        items = [t for p in chosen for t in p.items]
        tokens = max(1, sum(sum(t.loss_mask[1:]) for t in items))
        opt.zero_grad()
        weights = [sum(t.loss_mask[1:]) / tokens for t in items]  # every assistant token of the step weighs the same
        total = sum(w * v for w, v in zip(weights, accumulate(policy, items, weights, sft_losses), strict=True))
        with commit_section():
            rows.append({"stage": "sft", "step": step, "loss": total,
                         "lr": optimizer_step(policy.model, opt, grad_clip, sched), "tokens": tokens, "rows": len(items)})  # fmt: skip
            boundary = (pending.start, pending.counts, torch.get_rng_state())
        return total

    run_steps(policy.model, start + 1, steps, one_step, bar=progress_bar(steps, "sft (streamed)", progress, initial=start),
              save_state=save_state, loop_state=loop_state, completed=lambda: len(rows), save_every_s=save_every_s)  # fmt: skip
    return rows, boundary[1]
