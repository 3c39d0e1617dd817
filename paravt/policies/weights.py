"""A checkpoint's ``*.safetensors`` checked from their headers before anything loads them.

A safetensors file is an 8-byte little-endian header length, a JSON header (each tensor's ``dtype``, ``shape`` and
``data_offsets`` into the byte buffer after it, and an optional ``__metadata__`` of strings), then the buffer. A file
cut short by a full disk or a kill, or a hostile one (a header that is a JSON list, nested thousands deep, claiming
gigabytes, or offsets past the end or overlapping), would otherwise reach transformers and safetensors and fail
there with a traceback, or allocate what its header claims. ``weights_problem`` reads only the header, bounded in
size, and names the file and what is wrong; ``paravt eval --policy hf:``, ``paravt serve`` and every checkpoint
the trainer resumes from go through it first.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

MAX_HEADER_BYTES = 100 * 1024 * 1024
"""The largest header read (safetensors' own limit: 100 MB)."""
MAX_DEPTH = 64
"""The deepest JSON nesting a header may have: a real one is three levels deep (file, tensor, shape)."""
ITEM_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I16": 2, "U16": 2, "F16": 2,
              "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8}  # fmt: skip
"""Bytes per element of each safetensors dtype."""


def _depth(text: str) -> int:
    """The deepest nesting of ``[`` / ``{`` in a JSON text, outside strings: measured before parsing, so a header
    nested a million deep is refused without recursing into it."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def header_problem(header: Any, buffer: int | None = None) -> str | None:
    """What is wrong with a parsed header whose byte buffer holds ``buffer`` bytes (None: not checked), or None."""
    if not isinstance(header, dict):
        return f"its header is a JSON {type(header).__name__}, not an object"
    spans = []
    for name, entry in header.items():
        if name == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in entry.items()):
                return "its __metadata__ is not an object of strings"
            continue
        if not isinstance(entry, dict):
            return f"tensor {name!r} is described by a JSON {type(entry).__name__}, not an object"
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if dtype not in ITEM_BYTES:
            return f"tensor {name!r} has dtype {dtype!r}; known: {sorted(ITEM_BYTES)}"
        if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
            return f"tensor {name!r} has shape {shape!r}, not a list of sizes"
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)
                and offsets[0] <= offsets[1]):  # fmt: skip
            return f"tensor {name!r} has data_offsets {offsets!r}, not [begin, end]"
        if offsets[1] - offsets[0] != math.prod(shape) * ITEM_BYTES[dtype]:
            return (f"tensor {name!r} spans {offsets[1] - offsets[0]} bytes where shape {shape} of {dtype} needs "
                    f"{math.prod(shape) * ITEM_BYTES[dtype]}")  # fmt: skip
        spans.append((offsets[0], offsets[1], name))
    spans.sort()
    at = 0
    for begin, end, name in spans:  # the tensors tile the buffer: no gap, no overlap (as safetensors requires)
        if begin != at:
            return f"tensor {name!r} starts at byte {begin} of the buffer where the previous one ends at {at}"
        at = end
    if buffer is not None and at > buffer:
        return f"it is cut short: its tensors need {at} bytes of buffer, it holds {buffer}"
    return None


def buffer_needed(header: dict[str, Any]) -> int:
    """The bytes of buffer a sound header's tensors span."""
    return max((int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"), default=0)


def file_problem(path: Path) -> str | None:
    """What makes one safetensors file unloadable, from its header alone, or None."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return f"{path.name} is {size} bytes, too short to be a safetensors file"
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            return f"{path.name} is cut short: its header alone claims {n} bytes of its {size}"
        if n > MAX_HEADER_BYTES:
            return f"{path.name} claims a header of {n} bytes, over the {MAX_HEADER_BYTES}-byte limit"
        raw = fh.read(n)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return f"{path.name} has a header that is not UTF-8 text"
    if _depth(text) > MAX_DEPTH:
        return f"{path.name} has a header nested more than {MAX_DEPTH} levels deep"
    try:
        header = json.loads(text)
    except (ValueError, RecursionError):
        return f"{path.name} has a header that is not JSON"
    why = header_problem(header)
    if why is not None:
        return f"{path.name}: {why}"
    needed = 8 + n + buffer_needed(header)
    if needed > size:  # a file cut short by a full disk or a kill
        return f"{path.name} is cut short: {size} bytes where its tensors need {needed}"
    return None


def weights_problem(path: str | Path) -> str | None:
    """What makes a local checkpoint's ``*.safetensors`` unloadable, from their headers alone, or None. A hub id or
    a folder without safetensors is left to transformers."""
    folder = Path(path)
    if not folder.is_dir():
        return None
    for f in sorted(folder.glob("*.safetensors")):
        why = file_problem(f)
        if why is not None:
            return why
    return None


__all__ = ["MAX_DEPTH", "MAX_HEADER_BYTES", "file_problem", "header_problem", "weights_problem"]
