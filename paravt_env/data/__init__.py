"""Data: ``VideoQASample``, loaders for the formats people already have, and synthetic needle videos.

``load_samples(path, video_root=None)`` reads our JSONL, the released ParaVT RL parquet and the annotation
files of Video-MME, LongVideoBench, LVBench, MLVU, MMVU and Charades-STA. ``generate_dataset`` (the
``paravt synth`` command) writes long synthetic videos with short coloured events and questions about
them; ``make_index_video`` / ``decode_index`` make videos whose frames show their own index (seek tests).
"""

from .formats import DataFormatError
from .index_video import decode_index, make_index_video
from .loaders import FORMATS, detect_format, load_samples
from .sample import QUESTION_TYPES, Event, VideoQASample
from .synth_plan import SynthConfig
from .synthetic import generate_dataset

__all__ = [
    "FORMATS",
    "QUESTION_TYPES",
    "DataFormatError",
    "Event",
    "SynthConfig",
    "VideoQASample",
    "decode_index",
    "detect_format",
    "generate_dataset",
    "load_samples",
    "make_index_video",
]
