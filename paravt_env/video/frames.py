"""What the video layer hands back: pixels with the times they were really shown."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Frames:
    """A batch of RGB frames.

    Attributes:
        images: uint8 array N x H x W x 3.
        timestamps: float64 array N, the true presentation time (seconds from the first frame) of each image,
            never the time that was asked for.
        indices: int64 array N, each frame's number in presentation order.
    """

    images: np.ndarray
    timestamps: np.ndarray
    indices: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @classmethod
    def empty(cls, height: int = 0, width: int = 0) -> Frames:
        return cls(
            images=np.zeros((0, height, width, 3), dtype=np.uint8),
            timestamps=np.zeros(0, dtype=np.float64),
            indices=np.zeros(0, dtype=np.int64),
        )

    @classmethod
    def concatenate(cls, parts: list[Frames]) -> Frames:
        """Join batches of the same frame size (e.g. the crops of one turn)."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        return cls(
            images=np.concatenate([p.images for p in parts]),
            timestamps=np.concatenate([p.timestamps for p in parts]),
            indices=np.concatenate([p.indices for p in parts]),
        )
