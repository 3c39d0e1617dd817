"""What ``paravt serve-env`` and ``RemoteVideoToolEnv`` send each other: JSON, with frames inside it.

An observation travels as ``{"text": str, "timestamps": [float, ...], "frames": FRAMES}``. Timestamps are
JSON numbers, which Python writes with the shortest repr that reads back to the same float64, so they
arrive bit for bit. ``FRAMES`` is, at the client's choice (``frame_encoding`` when the session opens):

- ``{"encoding": "raw", "shape": [N, H, W, 3], "dtype": "uint8", "data": BASE64}``: the array's bytes in C
  order, base64 (4/3 of the raw size; nothing to decode but base64);
- ``{"encoding": "png", "shape": [N, H, W, 3], "dtype": "uint8", "data": [BASE64_PNG, ...]}``: one lossless
  PNG per frame (about half the bytes of raw on natural frames; costs an encode and a decode).

Both arrive as the very array the env returned. ``info`` is made JSON-safe (dataclasses as dicts, numpy
values as Python ones, tuples as lists); its ``timing`` comes back as a ``StepTiming``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import math
from typing import Any

import numpy as np

FRAME_ENCODINGS = ("raw", "png")


class WireError(ValueError):
    """A message that does not follow this wire format; says which field is wrong."""


def jsonable(value: Any) -> Any:
    """``value`` with every part JSON can hold: dataclasses and ``as_dict`` objects as dicts, numpy values
    as Python ones, tuples as lists. Non-finite floats become None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if hasattr(value, "as_dict"):
        return jsonable(value.as_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    return repr(value)


def _png_bytes(frame: np.ndarray) -> bytes:
    import av  # PyAV: the env's own decoder library also encodes PNG losslessly

    codec = av.CodecContext.create("png", "w")
    codec.height, codec.width = frame.shape[:2]
    codec.pix_fmt = "rgb24"
    packets = [*codec.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")), *codec.encode(None)]
    return b"".join(bytes(p) for p in packets)


def _png_frame(data: bytes, where: str) -> np.ndarray:
    import av

    try:
        frames = av.CodecContext.create("png", "r").decode(av.Packet(data))
    except av.FFmpegError as exc:
        raise WireError(f"{where}: not a PNG image ({exc})") from None
    if len(frames) != 1:
        raise WireError(f"{where}: expected one PNG image, decoded {len(frames)}")
    return frames[0].to_ndarray(format="rgb24")


def encode_frames(frames: np.ndarray, encoding: str) -> dict[str, Any]:
    """An N x H x W x 3 uint8 array as ``FRAMES`` (see the module docstring)."""
    if encoding not in FRAME_ENCODINGS:
        raise WireError(f"frame encoding must be one of {FRAME_ENCODINGS}, got {encoding!r}")
    frames = np.asarray(frames)
    out: dict[str, Any] = {"encoding": encoding, "shape": list(frames.shape), "dtype": "uint8"}
    if encoding == "raw":
        out["data"] = base64.b64encode(np.ascontiguousarray(frames, dtype=np.uint8).tobytes()).decode("ascii")
    else:
        out["data"] = [base64.b64encode(_png_bytes(f)).decode("ascii") for f in frames]
    return out


def _b64(data: Any, where: str) -> bytes:
    if not isinstance(data, str):
        raise WireError(f"{where} must be a base64 string, got {type(data).__name__}")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise WireError(f"{where} is not valid base64") from None


def png_size(data: bytes, where: str) -> tuple[int, int]:
    """``(height, width)`` a PNG's header declares, read before anything is decoded."""
    if len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise WireError(f"{where}: not a PNG image (no PNG signature and IHDR header)")
    return int.from_bytes(data[20:24], "big"), int.from_bytes(data[16:20], "big")


def decode_frames(payload: Any, where: str = "frames", *, max_frames: int | None = None,
                  max_pixels: int | None = None) -> np.ndarray:  # fmt: skip
    """The N x H x W x 3 uint8 array ``encode_frames`` wrote. ``max_frames`` / ``max_pixels``: the bounds of the
    observation space; frames beyond them are refused before anything is decoded (a PNG by its header)."""
    if not isinstance(payload, dict):
        raise WireError(f"{where} must be an object, got {type(payload).__name__}")
    encoding, shape = payload.get("encoding"), payload.get("shape")
    if encoding not in FRAME_ENCODINGS:
        raise WireError(f"{where}.encoding must be one of {FRAME_ENCODINGS}, got {encoding!r}")
    if not (isinstance(shape, list) and len(shape) == 4 and all(isinstance(s, int) and s >= 0 for s in shape)
            and shape[3] == 3):  # fmt: skip
        raise WireError(f"{where}.shape must be [N, H, W, 3], got {shape!r}")
    if payload.get("dtype", "uint8") != "uint8":
        raise WireError(f"{where}.dtype must be 'uint8', got {payload.get('dtype')!r}")
    if max_frames is not None and shape[0] > max_frames:
        raise WireError(f"{where}: {shape[0]} frames, above the observation space's {max_frames}")
    if max_pixels is not None and shape[1] * shape[2] > max_pixels:
        raise WireError(f"{where}: {shape[1]}x{shape[2]} frames, above the observation space's {max_pixels} pixels")
    if encoding == "raw":
        raw = _b64(payload.get("data"), f"{where}.data")
        if len(raw) != math.prod(shape):
            raise WireError(f"{where}.data holds {len(raw)} bytes, shape {shape} needs {math.prod(shape)}")
        return np.frombuffer(raw, dtype=np.uint8).reshape(shape).copy()
    images = payload.get("data")
    if not isinstance(images, list) or len(images) != shape[0]:
        raise WireError(f"{where}.data must be a list of {shape[0]} PNG images")
    out = np.empty(shape, dtype=np.uint8)
    for i, item in enumerate(images):
        data = _b64(item, f"{where}.data[{i}]")
        declared = png_size(data, f"{where}.data[{i}]")
        if declared != tuple(shape[1:3]):  # checked before decoding: a small body can declare a huge image
            raise WireError(f"{where}.data[{i}] declares {declared[0]}x{declared[1]}, shape says {shape[1]}x{shape[2]}")
        image = _png_frame(data, f"{where}.data[{i}]")
        if image.shape != tuple(shape[1:]):
            raise WireError(f"{where}.data[{i}] is {image.shape}, shape says {tuple(shape[1:])}")
        out[i] = image
    return out


def encode_observation(obs: dict[str, Any], encoding: str) -> dict[str, Any]:
    return {
        "text": obs["text"],
        "timestamps": [float(t) for t in obs["timestamps"]],
        "frames": encode_frames(obs["frames"], encoding),
    }


def decode_observation(payload: Any, *, max_frames: int | None = None, max_pixels: int | None = None,
                       max_text_chars: int | None = None) -> dict[str, Any]:  # fmt: skip
    """The observation dict ``VideoToolEnv`` returned: ``text``, ``frames`` (uint8) and ``timestamps`` (float64),
    checked against the observation space's bounds (given) before the frames are decoded."""
    if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
        raise WireError("observation must be an object with a string 'text'")
    stamps = payload.get("timestamps")
    if not isinstance(stamps, list) or not all(isinstance(t, (int, float)) for t in stamps):
        raise WireError("observation.timestamps must be a list of numbers")
    if max_text_chars is not None and len(payload["text"]) > max_text_chars:
        raise WireError(f"observation.text has {len(payload['text'])} characters, above the space's {max_text_chars}")
    frames = decode_frames(payload.get("frames"), "observation.frames", max_frames=max_frames, max_pixels=max_pixels)
    if len(stamps) != len(frames):
        raise WireError(f"observation has {len(frames)} frames but {len(stamps)} timestamps")
    return {"text": payload["text"], "frames": frames, "timestamps": np.array(stamps, dtype=np.float64)}
