"""Errors of the video layer. They always name the file at fault."""

from __future__ import annotations


class VideoDecodeError(RuntimeError):
    """A file exists but cannot be decoded as a video (corrupt, truncated, no video stream, ...)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot decode video {path!r}: {reason}")
        self.path = path
        self.reason = reason
