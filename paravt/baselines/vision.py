"""Reading the synthetic videos' needles from pixels: which coloured shape (if any) a frame shows.

Nothing but a needle is ever saturated in a synthetic video (the background and its distractor blobs are
grey), so a needle is the set of strongly saturated pixels; its colour is the palette entry nearest in hue,
its shape the template that best matches the pixels' silhouette. This is what the scripted baselines "see":
they find a needle only in the frames the env actually gave them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from paravt_env.data.synth_drawing import shape_mask
from paravt_env.data.synth_plan import PALETTE, SHAPES

SATURATION_MIN = 70
"""max(R,G,B) - min(R,G,B) above which a pixel belongs to a needle (grey background: < 15 after h264)."""
MIN_PIXELS = 40
"""Fewer saturated pixels than this is noise (ringing at an edge), not a needle."""
_GRID = 24  # silhouettes are compared on a 24 x 24 grid


@dataclass(frozen=True)
class Detection:
    """A needle seen in one frame at time ``t`` (seconds)."""

    t: float
    colour: str
    shape: str
    pixels: int

    @property
    def label(self) -> str:
        return f"{self.colour} {self.shape}"


def _hue(rgb: np.ndarray) -> np.ndarray:
    """Hue in degrees of RGB rows (float)."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    mx, mn = rgb.max(axis=-1), rgb.min(axis=-1)
    d = np.maximum(mx - mn, 1e-6)
    h = np.where(mx == r, ((g - b) / d) % 6, np.where(mx == g, (b - r) / d + 2, (r - g) / d + 4))
    return h * 60.0


_PALETTE_NAMES = tuple(PALETTE)
_PALETTE_HUES = _hue(np.array([PALETTE[c] for c in _PALETTE_NAMES], dtype=np.float64))


def _to_grid(mask: np.ndarray) -> np.ndarray:
    """Crop a boolean mask to its bounding box and resample it (nearest) to the comparison grid."""
    ys, xs = np.nonzero(mask)
    box = mask[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]
    ri = np.minimum((np.arange(_GRID) + 0.5) * box.shape[0] / _GRID, box.shape[0] - 1).astype(int)
    ci = np.minimum((np.arange(_GRID) + 0.5) * box.shape[1] / _GRID, box.shape[1] - 1).astype(int)
    return box[np.ix_(ri, ci)]


@lru_cache(maxsize=1)
def _templates() -> dict[str, np.ndarray]:
    return {s: _to_grid(shape_mask(s, 96)) for s in SHAPES}


def classify_shape(mask: np.ndarray) -> str:
    """The shape whose silhouette overlaps ``mask`` best (intersection over union on a common grid)."""
    grid = _to_grid(mask)
    scores = {s: (grid & t).sum() / max((grid | t).sum(), 1) for s, t in _templates().items()}
    return max(scores, key=scores.get)


def classify_colour(pixels: np.ndarray) -> str:
    """The palette colour nearest in hue to the median of ``pixels`` (N x 3)."""
    hue = _hue(np.median(pixels.astype(np.float64), axis=0))
    dist = np.abs((_PALETTE_HUES - hue + 180.0) % 360.0 - 180.0)
    return _PALETTE_NAMES[int(np.argmin(dist))]


def detect(frame: np.ndarray, t: float) -> Detection | None:
    """The needle in an RGB uint8 frame, or ``None`` if it shows none."""
    f = frame.astype(np.int16)
    sat = f.max(axis=-1) - f.min(axis=-1)
    mask = sat >= SATURATION_MIN
    n = int(mask.sum())
    if n < MIN_PIXELS:
        return None
    return Detection(t=float(t), colour=classify_colour(frame[mask]), shape=classify_shape(mask), pixels=n)


def detect_all(frames: np.ndarray, timestamps: np.ndarray) -> list[Detection]:
    """Detections in a batch of frames (N x H x W x 3) with their times."""
    out = []
    for img, t in zip(frames, timestamps, strict=True):
        d = detect(img, float(t))
        if d is not None:
            out.append(d)
    return out
