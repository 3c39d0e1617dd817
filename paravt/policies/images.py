"""Frames over HTTP: PNG or JPEG data URLs (OpenAI ``image_url`` parts) and base64 strings (sglang ``image_data``)."""

from __future__ import annotations

import base64
import io

import numpy as np


def to_base64_png(frame: np.ndarray) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.asarray(frame, dtype=np.uint8)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def to_data_url(frame: np.ndarray, image_format: str = "png", quality: int = 85) -> str:
    """A data URL of ``frame``: lossless PNG, or JPEG at ``quality`` (the released eval driver sends JPEG 85,
    so a released checkpoint is evaluated on JPEG artefacts)."""
    if image_format == "png":
        return "data:image/png;base64," + to_base64_png(frame)
    if image_format != "jpeg":
        raise ValueError(f"image_format must be 'png' or 'jpeg', got {image_format!r}")
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.asarray(frame, dtype=np.uint8)).save(buf, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
