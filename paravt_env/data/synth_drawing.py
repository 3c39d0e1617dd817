"""Drawing the synthetic videos: each shape's mask, frames rendered straight into YUV 4:2:0 planes with numpy,
and their deterministic h264 encoding (``synth_plan`` says what to draw)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import av
import numpy as np

from ..storage import part_path
from .synth_plan import PALETTE, SHAPES

if TYPE_CHECKING:
    from .synth_plan import SynthConfig, VideoPlan

def shape_mask(shape: str, side: int) -> np.ndarray:
    """A boolean ``side`` x ``side`` mask of one shape, filling most of its box."""
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float64)
    u, v = (xx + 0.5) / side * 2 - 1, (yy + 0.5) / side * 2 - 1  # [-1, 1], v downwards
    if shape == "circle":
        return u**2 + v**2 <= 0.95**2
    if shape == "square":
        return (np.abs(u) <= 0.85) & (np.abs(v) <= 0.85)
    if shape == "triangle":  # apex up
        return (v <= 0.85) & (v >= -0.9 + 2.0 * np.abs(u))
    if shape == "cross":
        return ((np.abs(u) <= 0.3) & (np.abs(v) <= 0.95)) | ((np.abs(v) <= 0.3) & (np.abs(u) <= 0.95))
    if shape == "star":  # five points
        angle = np.arctan2(u, -v)
        radius = np.hypot(u, v)
        k = (np.cos(5 * angle) + 1) / 2
        return radius <= 0.42 + 0.53 * k**3
    raise ValueError(f"unknown shape {shape!r}; known: {SHAPES}")


def rgb_to_ycbcr(rgb: Sequence[float]) -> tuple[float, float, float]:
    """BT.601 limited-range Y'CbCr of an 8-bit RGB colour: what decoders assume for untagged SD video."""
    r, g, b = (float(c) for c in rgb)
    y = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255
    cb = 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255
    cr = 128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255
    return y, cb, cr


def render_yuv(plan: VideoPlan, cfg: SynthConfig, start: int, stop: int) -> np.ndarray:
    """Frames ``start`` to ``stop`` of a plan as yuv420p buffers: uint8 (T, 3*size/2, size), Y then U then V.

    Vectorised over the chunk: the background and every blob are separable (a row profile times a column
    profile), so a frame costs a few broadcasts, and a 600 s video renders in a fraction of a second.
    """
    size, fps = cfg.size, cfg.fps
    f32 = np.float32
    # Transcendentals run in float64 on the small (T, W) profiles and are cast once: numpy's SIMD sin/exp
    # differ between CPUs in the last float32 bits, which could flip a rounded pixel from one machine to the
    # next. The large (T, H, W) arithmetic after that is exactly rounded IEEE float32, the same everywhere.
    t = np.arange(start, stop, dtype=np.float64) / fps
    x = np.arange(size, dtype=np.float64)
    # A dim grey gradient that drifts slowly sideways (x264 codes it almost for free).
    across = (14 * np.sin(x[None, :] / size * 3.0 + 0.04 * t[:, None] + plan.phase[0])).astype(f32)  # (T, W)
    down = (55 + 10 * np.cos(x / size * 2.0 + plan.phase[1])).astype(f32)  # (H,)
    grey = across[:, None, :] + down[None, :, None]  # (T, H, W)
    for b in plan.blobs:
        # Blobs drift across and wrap around off-screen (a margin of 3 sigma), so they never jump.
        span = size + 6 * b.sigma
        cx = (b.x0 + b.vx * t) % span - 3 * b.sigma
        cy = (b.y0 + b.vy * t) % span - 3 * b.sigma
        gx = np.exp(-((x[None, :] - cx[:, None]) ** 2) / (2 * b.sigma**2)).astype(f32)
        gy = (b.amp * np.exp(-((x[None, :] - cy[:, None]) ** 2) / (2 * b.sigma**2))).astype(f32)
        grey += gy[:, :, None] * gx[:, None, :]
    luma = 16 + 219 / 255 * np.clip(grey, 0, 255)
    half = size // 2
    cb = np.full((len(t), half, half), 129.0, dtype=np.float32)  # a faint blue cast, far from saturated
    cr = np.full((len(t), half, half), 127.0, dtype=np.float32)
    for nd in plan.needles if cfg.needles_visible else ():
        f0, f1 = int(round(nd.start * fps)), int(round(nd.end * fps))
        lo, hi = max(f0, start), min(f1, stop)
        if lo >= hi:
            continue
        mask = shape_mask(nd.shape, nd.size)
        y_c, cb_c, cr_c = rgb_to_ycbcr(PALETTE[nd.colour])
        frames = slice(lo - start, hi - start)
        box = luma[frames, nd.y : nd.y + nd.size, nd.x : nd.x + nd.size]
        box[:, mask] = y_c
        # Chroma is stored at half resolution: blend by the shape's coverage of each 2 x 2 block.
        cover = mask.reshape(nd.size // 2, 2, nd.size // 2, 2).mean(axis=(1, 3)).astype(np.float32)
        cy0, cx0, cs = nd.y // 2, nd.x // 2, nd.size // 2
        for plane, value in ((cb, cb_c), (cr, cr_c)):
            region = plane[frames, cy0 : cy0 + cs, cx0 : cx0 + cs]
            region *= 1 - cover
            region += value * cover
    n = len(t)
    planes = [luma.reshape(n, -1), cb.reshape(n, -1), cr.reshape(n, -1)]
    # yuv420p as PyAV takes it: one (3*size/2, size) array per frame, the Y, U and V planes back to back.
    out = np.clip(np.rint(np.concatenate(planes, axis=1)), 0, 255).astype(np.uint8)
    out = out.reshape(n, size * 3 // 2, size)
    return out


def _chunks(n: int, step: int) -> Iterator[tuple[int, int]]:
    for a in range(0, n, step):
        yield a, min(n, a + step)


def render_video(plan: VideoPlan, cfg: SynthConfig, path: str | os.PathLike) -> Path:
    """Encode a plan to ``path`` (h264, yuv420p, mp4). Written to this writer's own ``part_path`` and renamed
    when complete: concurrent writers of one cache each rename a whole file (the bytes are the same)."""
    path = Path(path)
    tmp = part_path(path)
    try:
        with av.open(str(tmp), "w", format="mp4") as container:
            stream = container.add_stream("libx264", rate=cfg.fps)
            stream.width = stream.height = cfg.size
            stream.pix_fmt = "yuv420p"
            stream.codec_context.gop_size = cfg.gop
            stream.codec_context.thread_count = 1
            stream.codec_context.thread_type = "NONE"
            # - one thread: x264's output depends on its thread count, so bytes would differ between machines;
            # - mbtree off: with it, x264 codes the first GOP differently from run to run (measured: 3-6
            #   variants in 25 runs of the same frames); without it, byte-identical every time;
            # - keyframes strictly every `gop` frames: a scene-cut keyframe at each event's first frame would
            #   let a keyframe-seeking overview land on events far more often than chance.
            params = (
                f"keyint={cfg.gop}:min-keyint={cfg.gop}:scenecut=0:mbtree=0:threads=1:lookahead-threads=1"
            )
            stream.options = {"preset": cfg.preset, "crf": str(cfg.crf), "x264-params": params}
            for a, b in _chunks(plan.n_frames, 64):
                for i, buf in enumerate(render_yuv(plan, cfg, a, b)):
                    frame = av.VideoFrame.from_ndarray(buf, format="yuv420p")
                    frame.pts = a + i  # explicit timestamps: frame i is on screen from i / fps
                    for packet in stream.encode(frame):
                        container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
        # Atomic: an interrupted run never leaves a half-written video under the real name.
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
