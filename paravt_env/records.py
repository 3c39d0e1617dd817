"""Episode records: what an agent did in one episode, kept with its ``paravt eval`` row (``row["episode"]``),
sampled from training rollouts (``RUN/rollouts/step_NNNNNN.jsonl``) and drawn by ``paravt view``.

Schema ``paravt-episode/1`` (a JSON object; times in seconds of the video; non-finite numbers become null):

- ``schema``, ``sample_id``, ``video`` (path), ``duration``, ``question``, ``question_type``, ``answer``,
  ``prediction``, ``score``, ``correct``, ``frame_budget`` (K), ``wall_s``, ``system_prompt_sha``;
- ``overview``: timestamps of the K overview frames shown at reset;
- ``events``: the true event windows ``{start, end, label, asked, in_overview, in_crops}`` (synthetic and
  annotated data; empty otherwise); ``asked`` is true for the events the question is about (the sample's
  ``extra["relevant_events"]``), false for the others, null where the sample does not say; ``in_overview`` and
  ``in_crops``: whether an overview frame, or a frame of a crop that ran, lies inside the window (by its true
  timestamp): whether the agent was shown the event at all;
- ``overview_visual_tokens``: the visual tokens of the overview frames (``visual_tokens``);
- ``truth_span``: ``[start, end]`` of a grounding answer (``tvg``), else null; ``predicted_span``: the span the
  prediction names, as the scorer read it (null where it names none, or for other question types);
- ``turns``: per agent turn, ``text`` (what the agent wrote), ``crops`` (per call: ``call``, ``start``,
  ``end``, ``status`` executed / rejected / failed, ``frames``, ``timestamps``, ``error``), ``frames``
  (timestamps of the frames the next observation carried), ``parse_problems``, ``timing`` (decode, sub-agent,
  tool wall and total seconds), ``visual_tokens`` (of the frames the next observation carried), and ``tokens``
  (generated tokens) and ``prompt_tokens`` (the context the turn was generated from) where the agent's policy
  reports them;
- ``cost``: what the episode cost (``episode_cost``: turns, crops, frames decoded, visual tokens, generated and
  prompt tokens, model calls, the critical path, wall seconds concurrent and serial), where the record was made
  by ``paravt eval`` or a rollout;
- ``reward``: the reward terms (``total``, ``accuracy``, ``format``, ``tool``);
- training rollouts add ``step`` (the RL step) and ``epoch``.
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


def finite_or_none(value: Any) -> float | None:
    """A finite number of seconds, or None for anything else (a bool, a string, NaN, infinity, a 400-digit
    integer): what a record, or a parser that must not raise, keeps of a time a model wrote."""
    if isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return x if math.isfinite(x) else None


def crop_entry(call: int, start: Any, end: Any, status: str, timestamps: Any = (), error: str | None = None) -> dict[str, Any]:
    """One entry of the env's ``info["crops"]`` (and of a record's turns): the call's index, its window (as
    run, or as asked), executed / rejected / failed, the frames it returned and why it did not run."""
    times = [round(float(t), 3) for t in timestamps]
    return {"call": call, "start": finite_or_none(start), "end": finite_or_none(end), "status": status,
            "frames": len(times), "timestamps": times, "error": error}  # fmt: skip


TOKEN_PIXELS = 28
"""The side in pixels of one visual token: the env resizes frames to multiples of 28 (Qwen-VL's 14-pixel patch,
merged 2 x 2), so a frame of H x W pixels is (H / 28) x (W / 28) tokens (Qwen3-VL's processor, at 16-pixel
patches, resizes again to multiples of 32: its own count differs by that rounding)."""


def visual_tokens(frames: Any) -> int:
    """The visual tokens of a batch of frames (an array N x H x W x C, or a list of H x W x C arrays)."""
    total = 0
    for frame in frames:
        h, w = int(frame.shape[0]), int(frame.shape[1])
        total += math.ceil(h / TOKEN_PIXELS) * math.ceil(w / TOKEN_PIXELS)
    return total


def _shown(times: list[float], start: float, end: float) -> bool:
    return any(start <= t < end for t in times)


def episode_record(sample: Any, *, duration: float | None, frame_budget: int, overview: list[float],
                   turns: list[dict[str, Any]], reward: dict[str, float], prediction: str, score: float,
                   correct: bool, truth_span: tuple[float, float] | list[float] | None = None,
                   predicted_span: tuple[float, float] | list[float] | None = None, wall_s: float = 0.0,
                   system_prompt_sha: str | None = None, overview_visual_tokens: int | None = None,
                   **extra: Any) -> dict[str, Any]:  # fmt: skip
    """The record of one finished episode on ``sample`` (a ``VideoQASample``); ``extra`` fields are kept."""
    relevant = (sample.extra or {}).get("relevant_events")
    asked = set(relevant) if isinstance(relevant, (list, tuple)) else None
    crop_times = [float(t) for turn in turns for c in turn.get("crops", []) if c.get("status") == "executed"
                  for t in c.get("timestamps") or []]  # fmt: skip
    overview_times = [float(t) for t in overview]
    return finite({
        "schema": SCHEMA, "sample_id": sample.id, "video": sample.video_path,
        "duration": duration if duration is not None else sample.duration,
        "question": sample.question_with_options(), "question_type": sample.question_type, "answer": sample.answer,
        "prediction": prediction, "score": float(score), "correct": bool(correct),
        "frame_budget": int(frame_budget), "wall_s": round(float(wall_s), 4), "system_prompt_sha": system_prompt_sha,
        "overview": list(overview), "overview_visual_tokens": overview_visual_tokens,
        "events": [{"start": float(e.start), "end": float(e.end), "label": e.label,
                    "asked": (e.label in asked) if asked is not None else None,
                    "in_overview": _shown(overview_times, e.start, e.end), "in_crops": _shown(crop_times, e.start, e.end)}
                   for e in sample.events],
        "truth_span": list(truth_span) if truth_span else None,
        "predicted_span": [float(t) for t in predicted_span] if predicted_span else None,
        "turns": list(turns), "reward": dict(reward), **extra,
    })  # fmt: skip


def turn_entry(text: str, info: dict[str, Any], frames: Any, tokens: int | None = None,
               prompt_tokens: int | None = None, visual: int | None = None) -> dict[str, Any]:  # fmt: skip
    """One ``turns`` entry from an env step: the action, its ``info`` and the observation's frame times
    (``tokens``: generated; ``prompt_tokens``: the context the turn was generated from, where the policy says;
    ``visual``: the visual tokens of the observation's frames, ``visual_tokens``)."""
    from dataclasses import asdict, is_dataclass

    timing = info.get("timing")
    entry = {"text": text, "crops": list(info.get("crops", [])), "frames": [round(float(t), 3) for t in frames],
             "parse_problems": list(info.get("parse_problems", [])), "timing": asdict(timing) if is_dataclass(timing) else {}}  # fmt: skip
    if tokens is not None:
        entry["tokens"] = int(tokens)
    if prompt_tokens is not None:
        entry["prompt_tokens"] = int(prompt_tokens)
    if visual is not None:
        entry["visual_tokens"] = int(visual)
    return entry


COST_KEYS = ("turns", "crops", "frames_decoded", "visual_tokens", "generated_tokens", "prompt_tokens", "model_calls",
             "critical_path", "wall_s", "wall_s_serial")  # fmt: skip
"""What an episode cost (``episode_cost``); ``summary.json``'s ``cost`` holds their means over episodes."""


def critical_path(turns: list[dict[str, Any]], *, subagent: bool = False) -> int:
    """The longest chain of dependent steps of an episode, as the parallel function-calling literature counts it
    (LLMCompiler, Kim et al. 2024): each turn is one model call, then, where a crop ran, one tool execution (a
    turn's crops run concurrently: one step however many), then, with ``subagent``, one sub-agent call (the
    summaries are concurrent too) that the next turn waits for. Sequential dispatch pays a tool step per crop;
    parallel dispatch one per turn of crops."""
    steps = 0
    for t in turns:
        ran = any(c.get("status") in ("executed", "failed") for c in t.get("crops", []))
        steps += 1 + (1 + int(subagent) if ran else 0)
    return steps


def episode_cost(record: dict[str, Any], *, subagent: bool = False) -> dict[str, Any]:
    """What one episode cost, from its record: ``turns``; ``crops`` run; ``frames_decoded`` (overview and crop
    frames); ``visual_tokens`` (of every frame a model read: the overview, and the crops' frames, read by the
    main agent or, with ``subagent``, by its sub-agents, counted at the overview's tokens a frame; null in records
    made before the count existed); ``generated_tokens`` and ``prompt_tokens`` (the context each turn was
    generated from, summed over turns: what a policy without a kept cache re-reads; null where the policy reports
    no tokens, e.g. a scripted one); ``model_calls`` (the main agent's generations and, with ``subagent``, one
    sub-agent call per crop run); ``critical_path`` (``critical_path``: dependent steps); ``wall_s`` (a turn's
    crops and sub-agents run concurrently, as they ran) and ``wall_s_serial`` (the same with each turn's tool
    phase replaced by its crops' decode seconds one after another plus its sub-agent seconds)."""
    turns = record.get("turns") or []
    crops = sum(1 for t in turns for c in t.get("crops", []) if c.get("status") == "executed")
    crop_frames = sum(int(c.get("frames") or 0) for t in turns for c in t.get("crops", []) if c.get("status") == "executed")
    overview = record.get("overview") or []
    frames = len(overview) + crop_frames
    visual = record.get("overview_visual_tokens")
    if visual is not None:
        visual += sum(int(t.get("visual_tokens") or 0) for t in turns)
        if subagent and overview:  # the sub-agents read the crops' frames, sized as the overview's
            visual += round(crop_frames * record["overview_visual_tokens"] / len(overview))
    generated = [t["tokens"] for t in turns if t.get("tokens") is not None]
    prompts = [t["prompt_tokens"] for t in turns if t.get("prompt_tokens") is not None]
    model = bool(generated)
    wall = float(record.get("wall_s") or 0.0)
    timings = [t.get("timing") or {} for t in turns]
    serial = wall + sum(float(x.get("decode_s") or 0.0) + float(x.get("subagent_s") or 0.0)
                        - float(x.get("tool_wall_s") or 0.0) for x in timings)  # fmt: skip
    return {"turns": len(turns), "crops": crops, "frames_decoded": frames, "visual_tokens": visual,
            "generated_tokens": sum(generated) if model else None, "prompt_tokens": sum(prompts) if prompts else None,
            "model_calls": (len(turns) if model else 0) + (crops if subagent else 0),
            "critical_path": critical_path(turns, subagent=subagent),
            "wall_s": round(wall, 4), "wall_s_serial": round(max(serial, wall), 4)}  # fmt: skip


def with_cost(record: dict[str, Any], *, subagent: bool = False) -> dict[str, Any]:
    """``record`` with its ``cost`` (``episode_cost``) added."""
    record["cost"] = episode_cost(record, subagent=subagent)
    return record


def prompt_sha(info: dict[str, Any]) -> str | None:
    """A short hash of the system prompt a reset's ``info`` shows."""
    import hashlib

    prompt = info.get("system_prompt")
    return hashlib.sha256(prompt.encode()).hexdigest()[:16] if isinstance(prompt, str) else None
