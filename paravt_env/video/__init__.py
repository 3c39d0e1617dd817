"""Video layer: decode long videos into the frames an agent sees.

Two backends (PyAV and decord) behind one API; frames come with their true presentation timestamps and are
resized by Qwen-VL's pixel-budget rule.
"""

from .cache import OverviewCache, default_overview_cache
from .errors import VideoDecodeError
from .frames import Frames
from .index import FrameIndex
from .reader import AUTO_BACKEND, BACKENDS, VideoReader, open_video
from .resize import smart_resize
from .sampling import overview_times, sample_overview, sample_window

__all__ = [
    "AUTO_BACKEND",
    "BACKENDS",
    "FrameIndex",
    "Frames",
    "OverviewCache",
    "VideoDecodeError",
    "VideoReader",
    "default_overview_cache",
    "open_video",
    "overview_times",
    "sample_overview",
    "sample_window",
    "smart_resize",
]
