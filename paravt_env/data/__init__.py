"""Data: ``VideoQASample``, loaders for the formats people already have, and synthetic needle videos."""

from .loaders import FORMATS, DataFormatError, detect_format, load_samples
from .sample import QUESTION_TYPES, Event, VideoQASample
from .synthetic import SynthConfig, generate_dataset

__all__ = [
    "FORMATS",
    "QUESTION_TYPES",
    "DataFormatError",
    "Event",
    "SynthConfig",
    "VideoQASample",
    "detect_format",
    "generate_dataset",
    "load_samples",
]
