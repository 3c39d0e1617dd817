"""Token sequences with their images (``Encoded``, frames kept compressed in ``PackedFrames``), and how several of
them are batched into forward passes (``length_buckets``): what the policy encodes, generates from and scores,
and what the learners keep between rollout and update."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch


def frame_digest(frame: np.ndarray) -> bytes:
    """A frame's identity: a 128-bit digest of its shape and uint8 pixels (what the caches of processed pixels and
    of image features are keyed by; equal frames give equal pixels under one image processor)."""
    a = np.ascontiguousarray(np.asarray(frame, dtype=np.uint8))
    return hashlib.blake2b(a.tobytes(), digest_size=16, person=repr(a.shape).encode()[:16]).digest()


class PackedFrames:
    """Frames (uint8 H x W x 3) kept zlib-compressed: a stored training example holds these instead of its
    processed pixels, which are ~10x larger (float32, each frame tiled over the temporal patch) and were what
    held gigabytes through a cold start. Synthetic and real frames compress well at level 1, and unpacking a
    112 px frame costs microseconds."""

    __slots__ = ("_blobs", "_digests", "_shapes")

    def __init__(self, frames: Sequence[np.ndarray]) -> None:
        arrays = [np.ascontiguousarray(np.asarray(f, dtype=np.uint8)) for f in frames]
        self._shapes = tuple(a.shape for a in arrays)
        self._blobs = tuple(zlib.compress(a.tobytes(), 1) for a in arrays)
        self._digests = tuple(frame_digest(a) for a in arrays)

    @property
    def digests(self) -> tuple[bytes, ...]:
        """Each frame's identity (``frame_digest``), computed once (stores saved before it existed: on first use)."""
        if getattr(self, "_digests", None) is None:
            self._digests = tuple(frame_digest(a) for a in self.unpack())
        return self._digests

    def __len__(self) -> int:
        return len(self._blobs)

    def __add__(self, other: PackedFrames) -> PackedFrames:
        out = PackedFrames(())
        out._shapes, out._blobs = self._shapes + other._shapes, self._blobs + other._blobs
        out._digests = self.digests + other.digests
        return out

    def unpack(self) -> list[np.ndarray]:
        return [np.frombuffer(zlib.decompress(b), dtype=np.uint8).reshape(s) for b, s in zip(self._blobs, self._shapes, strict=True)]


class Encoded:
    """Token ids of a (partial) conversation and the processed pixels of its images, in order.

    The pixels are either held (``pixel_values``) or, after ``compact()``, recomputed on each access from the
    frames kept compressed (``frames`` with ``process``, the policy's image processing): the form for
    examples that wait in memory (cold-start data, a step's rollouts before the update)."""

    __slots__ = ("input_ids", "image_grid_thw", "_pixels", "_frames", "_process")

    def __init__(self, input_ids: list[int], pixel_values: torch.Tensor | None = None,
                 image_grid_thw: torch.Tensor | None = None, *, frames: PackedFrames | None = None,
                 process: Any = None) -> None:  # fmt: skip
        self.input_ids = input_ids
        self.image_grid_thw = image_grid_thw
        self._pixels = pixel_values
        self._frames = frames if frames is not None and len(frames) else None
        self._process = process
        if pixel_values is None and image_grid_thw is not None and (self._frames is None or process is None):
            raise ValueError("Encoded with images needs their pixel_values, or their frames and a process function")

    @property
    def pixel_values(self) -> torch.Tensor | None:
        if self._pixels is not None or self.image_grid_thw is None:
            return self._pixels
        return self._process(self._frames.unpack())[0]

    @property
    def frame_digests(self) -> tuple[bytes, ...] | None:
        """Each image's ``frame_digest`` where the frames are kept (else None)."""
        if self._frames is None or len(self._frames) != self.n_images:
            return None
        return self._frames.digests

    @property
    def n_images(self) -> int:
        return 0 if self.image_grid_thw is None else int(self.image_grid_thw.shape[0])

    def __getstate__(self) -> dict[str, Any]:
        # The process function is the policy's (a bound method holding its processor and locks): saved
        # without it, and given back by ``bind`` after loading (``paravt.learners.coldstart.store``).
        return {"input_ids": self.input_ids, "image_grid_thw": self.image_grid_thw, "_pixels": self._pixels,
                "_frames": self._frames, "_process": None}  # fmt: skip

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def bind(self, process: Any) -> Encoded:
        """After loading from disk: the policy's image processing, to turn the kept frames into pixels."""
        self._process = process
        return self

    def compact(self) -> Encoded:
        """The same sequence holding compressed frames instead of pixels (when it knows its frames)."""
        if self._pixels is None or self._frames is None or self._process is None:
            return self
        return Encoded(self.input_ids, None, self.image_grid_thw, frames=self._frames, process=self._process)

    def __add__(self, other: Encoded) -> Encoded:
        def cat(a, b):
            if a is None:
                return b
            return a if b is None else torch.cat([a, b], dim=0)

        both = (self, other)
        frames = None  # frames survive only if every image of both sides has them
        if all(e._frames is not None or not e.n_images for e in both):
            frames = (self._frames or PackedFrames(())) + (other._frames or PackedFrames(()))
        lazy = frames is not None and any(e.n_images and e._pixels is None for e in both)
        pixels = None if lazy else cat(self.pixel_values, other.pixel_values)
        return Encoded(self.input_ids + other.input_ids, pixels, cat(self.image_grid_thw, other.image_grid_thw),
                       frames=frames, process=self._process or other._process)  # fmt: skip

    def with_ids(self, ids: Sequence[int]) -> Encoded:
        return Encoded(self.input_ids + list(ids), self._pixels, self.image_grid_thw, frames=self._frames,
                       process=self._process)  # fmt: skip


def length_buckets(lengths: Sequence[int], *, max_rows: int | None = None, max_tokens: int | None = None,
                   min_fill: float = 0.0) -> list[list[int]]:  # fmt: skip
    """Indices of ``lengths`` in forward-pass batches: longest first, each batch at most ``max_rows`` rows and
    ``max_tokens`` padded tokens (rows x its longest sequence; a longer sequence goes alone). Similar lengths
    share a batch, so little is padding; the token cap bounds memory, since attention grows with rows x
    length^2 (measured: 8 crop episodes of ~2,500 tokens in one pass took the main job to 6 GB). ``min_fill``: a
    sequence joins a batch only if it is at least that fraction of the batch's longest (padding costs more than a
    pass saves on a CPU: ``paravt.learners.coldstart.sft.MIN_FILL``)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    buckets: list[list[int]] = []
    for i in order:
        b = buckets[-1] if buckets else None
        if (b is None or (max_rows is not None and len(b) >= max_rows)
                or (max_tokens is not None and (len(b) + 1) * lengths[b[0]] > max_tokens)
                or lengths[i] < min_fill * lengths[b[0]]):  # fmt: skip
            buckets.append([i])
        else:
            b.append(i)
    return buckets
