"""Episode records: what an agent did in one episode, kept with its ``paravt eval`` row (``row["episode"]``)
and drawn by ``paravt view``.

Schema ``paravt-episode/1`` (a JSON object; times in seconds of the video; non-finite numbers become null):

- ``schema``, ``sample_id``, ``video`` (path), ``duration``, ``question``, ``question_type``, ``answer``,
  ``prediction``, ``score``, ``correct``, ``frame_budget`` (K), ``wall_s``, ``system_prompt_sha``;
- ``overview``: timestamps of the K overview frames shown at reset;
- ``events``: the true event windows ``{start, end, label}`` (synthetic and annotated data; empty otherwise);
  ``truth_span``: ``[start, end]`` of a grounding answer (``tvg``), else null;
- ``turns``: per agent turn, ``text`` (what the agent wrote), ``crops`` (per call: ``call``, ``start``,
  ``end``, ``status`` executed / rejected / failed, ``frames``, ``timestamps``, ``error``), ``frames``
  (timestamps of the frames the next observation carried), ``parse_problems``, ``timing`` (decode, sub-agent,
  tool wall and total seconds);
- ``reward``: the reward terms (``total``, ``accuracy``, ``format``, ``tool``).
"""

from __future__ import annotations

import math
from typing import Any

SCHEMA = "paravt-episode/1"


def finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (JSON readers refuse NaN and Infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def episode_record(sample: Any, episode: Any, *, prediction: str, score: float, correct: bool,
                   truth_span: tuple[float, float] | None) -> dict[str, Any]:  # fmt: skip
    """The record of one finished ``baselines.runner.EpisodeResult`` on ``sample``."""
    return finite({
        "schema": SCHEMA, "sample_id": sample.id, "video": sample.video_path,
        "duration": episode.duration if episode.duration is not None else sample.duration,
        "question": sample.question_with_options(), "question_type": sample.question_type, "answer": sample.answer,
        "prediction": prediction, "score": float(score), "correct": bool(correct),
        "frame_budget": episode.frame_budget, "wall_s": round(episode.wall_s, 4),
        "system_prompt_sha": episode.system_prompt_sha,
        "overview": list(episode.overview),
        "events": [{"start": float(e.start), "end": float(e.end), "label": e.label} for e in sample.events],
        "truth_span": list(truth_span) if truth_span else None,
        "turns": list(episode.steps), "reward": dict(episode.breakdown),
    })  # fmt: skip
