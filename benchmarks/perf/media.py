"""Benchmark media: a long, realistic-sized h264 video, generated once and cached.

The reference numbers in the issue tracker (qwen-vl-utils ~5 s for a 64-frame overview) were taken on a
5-minute 640x360 h264 video at 30 fps with x264's default GOP (250 frames) and B-frames; this builds one.
"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from paravt_env.paths import cache_dir


def long_video(
    duration: float = 300.0, width: int = 640, height: int = 360, fps: int = 30, gop: int = 250
) -> Path:
    """A moving, textured video (so that inter-frame prediction has real work to do), cached by its settings."""
    path = cache_dir() / f"bench_{int(duration)}s_{width}x{height}_{fps}fps_gop{gop}.mp4"
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp.mp4")
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.int32)
    texture = rng.integers(0, 48, (height, width + fps * 4, 3), dtype=np.uint8)
    with av.open(str(tmp), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = gop
        stream.options = {"preset": "veryfast", "crf": "23"}
        base = np.empty((height, width, 3), dtype=np.uint8)
        for i in range(int(duration * fps)):
            base[..., 0] = (xx + 3 * i) & 255
            base[..., 1] = (yy + i) & 255
            base[..., 2] = ((xx + yy) // 2 + 2 * i) & 255
            shift = (i * 2) % (fps * 4)
            img = (base >> 1) + texture[:, shift : shift + width]
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    tmp.replace(path)
    return path
