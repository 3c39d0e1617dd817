"""Our own rows: one ``VideoQASample.to_dict()`` per line (what ``paravt synth`` writes)."""

from __future__ import annotations

from ..sample import VideoQASample
from ._common import Candidate, RowContext

FIELDS = frozenset(VideoQASample.__dataclass_fields__)
REQUIRED = frozenset({"id", "video_path", "question", "answer"})


def matches(keys: set[str]) -> bool:
    return REQUIRED <= keys <= FIELDS


def read(row: dict, ctx: RowContext) -> list[Candidate]:
    try:
        sample = VideoQASample.from_dict(row)
    except (TypeError, ValueError) as exc:
        raise ctx.error(str(exc)) from None
    return [Candidate(sample, [sample.video_path])]
