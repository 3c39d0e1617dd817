"""One module per data format: ``matches(keys) -> bool`` and ``read(row, ctx) -> list[Candidate]``."""

from __future__ import annotations

from types import ModuleType

from . import charades_sta, longvideobench, lvbench, mlvu, mmvu, ours, paravt, videomme
from ._common import Candidate, DataFormatError, RowContext

# Detection tries these in order: the most specific key sets first, our own schema before the benchmarks
# whose rows it could be mistaken for, MLVU (the loosest rule) last.
READERS: dict[str, ModuleType] = {
    "jsonl": ours,
    "paravt": paravt,
    "charades_sta": charades_sta,
    "lvbench": lvbench,
    "longvideobench": longvideobench,
    "videomme": videomme,
    "mmvu": mmvu,
    "mlvu": mlvu,
}
FORMATS = tuple(READERS)
ALIASES = {
    "ours": "jsonl", "json": "jsonl", "samples": "jsonl", "parquet": "paravt", "paravt_rl": "paravt",
    "charades": "charades_sta", "charades-sta": "charades_sta", "video-mme": "videomme", "video_mme": "videomme",
    "lvb": "longvideobench", "long_video_bench": "longvideobench",
}  # fmt: skip

__all__ = ["ALIASES", "FORMATS", "READERS", "Candidate", "DataFormatError", "RowContext"]
