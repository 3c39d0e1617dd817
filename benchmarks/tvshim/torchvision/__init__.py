"""A stand-in for torchvision with only what qwen-vl-utils' decord path calls (see ../README.md)."""

__version__ = "0.28.0"

from . import io, transforms  # noqa: E402,F401
