"""Errors of the video layer. They always name the file at fault."""

from __future__ import annotations


class VideoDecodeError(RuntimeError):
    """A file exists but cannot be decoded as a video (corrupt, truncated, no video stream, ...)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot decode video {path!r}: {reason}")
        self.path = path
        self.reason = reason


class UnusableVideo(VideoDecodeError):
    """A video that decodes but whose frames a Qwen-VL model cannot take (an aspect ratio above 200:1): skipped
    where undecodable videos are, under its own message."""

    def __init__(self, path: str, reason: str) -> None:
        RuntimeError.__init__(self, f"video {path!r} decodes, but a Qwen-VL model cannot take its frames: {reason}")
        self.path = path
        self.reason = reason
