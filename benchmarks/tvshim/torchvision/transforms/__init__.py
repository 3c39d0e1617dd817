import enum

from . import functional  # noqa: F401


class InterpolationMode(enum.Enum):
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
