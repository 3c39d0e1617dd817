"""``paravt probe calls``: can a checkpoint *write* the parallel calls it decides to make?

Format compliance over whole episodes mixes two things: whether the policy decides to call, and whether the
calls it writes parse and run. A tool-shy cold start never calls greedily, so its call writing is never
exercised by a greedy evaluation, yet RL samples it from step 1. This probe takes the decision away: after
the overview it forces the opening words of a call turn (``prefix``, by default the tiny recipes' teacher
sentence before its crops) and lets the checkpoint write the rest, greedy and at the training temperature.
Each turn is parsed and stepped in the env, which says what would run:

- ``well_formed``: the turn parses without a problem (tags balanced, every call valid JSON with both times);
- ``clean``: well formed and every call it wrote was executed (none rejected, e.g. an end before its start);
- ``clean_inside``: well formed, and every call the env refused lies wholly past the video's end (a policy that
  writes five windows on a 40 s video covers it all; the refused windows cost it nothing but a message);
- ``executed`` / ``rejected`` / ``past_end``: calls per turn the env ran / refused / refused past the end.

The teacher writes one JSON line per window, so a turn of five calls is ~190 tokens: a small error rate per
token at temperature 0.7 breaks most turns, and RL then trains on those broken turns (docs/training.md,
"Format under RL").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from paravt.learners.coldstart.teacher import GUESS_TEXT
from paravt.policies.encoded import Encoded
from paravt.policies.hf import HFPolicy
from paravt_env import EnvConfig, VideoToolEnv
from paravt_env.data import VideoQASample
from paravt_env.messages import observation_messages
from paravt_env.protocol import THINK_PREFIX, parse_response

CALL_PREFIX = GUESS_TEXT.removesuffix(" guess.") + " inspect"
"""The tiny recipes' teacher writes this before its parallel crops ("The overview shows no coloured shape. I will
inspect 5 windows in parallel.</think>..."); the call decision is the word after "I will"."""


def probe_call_writing(policy: HFPolicy, samples: Sequence[VideoQASample], env: EnvConfig, *,
                       temperatures: Sequence[float] = (0.0, 0.7), per_video: int = 4, prefix: str = CALL_PREFIX,
                       max_new_tokens: int = 256, seed: int = 0) -> dict[str, Any]:  # fmt: skip
    """Force ``prefix`` after each sample's overview and generate the rest of the turn: once greedy (temperature
    0), ``per_video`` times at every other temperature; returns, per temperature, the share of well-formed and
    clean turns and the calls executed / rejected per turn."""
    if per_video < 1:
        raise ValueError(f"per_video must be at least 1, got {per_video}")
    torch.manual_seed(seed)
    vt = VideoToolEnv(list(samples), replace(env, tool_result="frames", subagent=None))
    # With the policy's forced think prefix the prompt already ends in "<think>\n"; without it the probe writes it.
    head = prefix if policy.think_prefix else THINK_PREFIX + prefix
    head_ids = policy.tokenizer.encode(head, add_special_tokens=False)
    out: dict[str, Any] = {"prefix": prefix, "videos": len(samples), "frame_budget": env.frame_budget,
                           "per_video": per_video, "by_temperature": {}}  # fmt: skip
    try:
        for temperature in temperatures:
            reps = 1 if temperature == 0 else per_video
            rows = []
            for s in samples:
                obs, info = vt.reset(options={"sample": s})
                prompt = policy.encode(observation_messages(obs, info))
                forced = Encoded(list(prompt.input_ids) + head_ids, prompt.pixel_values, prompt.image_grid_thw)
                gens = policy.generate_encoded([forced] * reps, temperature=temperature, max_new_tokens=max_new_tokens)
                for gen in gens:
                    text = gen.prefix + head + gen.text[len(gen.prefix):]
                    rows.append(_score_turn(vt, s, text, truncated=gen.finish_reason == "length"))
            out["by_temperature"][f"{temperature:g}"] = _summarise(rows)
    finally:
        vt.close()
    return out


def _score_turn(vt: VideoToolEnv, sample: VideoQASample, text: str, *, truncated: bool) -> dict[str, Any]:
    """Parse one forced turn and step it in a fresh episode of ``sample``: what the env would run."""
    parsed = parse_response(text)
    _, reset_info = vt.reset(options={"sample": sample})
    _, _, _, _, info = vt.step(text)
    counts = info["tool_calls"]  # what the env did with the calls it could read; unreadable ones are not in it
    executed = int(counts["executed"])
    duration = float(reset_info["duration"])
    past_end = sum(1 for c in info["crops"] if c["status"] != "executed" and c["start"] is not None
                   and c["start"] >= duration)  # fmt: skip
    return {"well_formed": not parsed.problems, "executed": executed,
            "rejected": len(parsed.tool_calls) - executed, "past_end": past_end,
            "truncated": truncated, "problems": list(parsed.problems)[:3]}  # fmt: skip


def _summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(value) -> float:  # of value(row) over the rows; a share where value is a condition
        return float(np.mean([float(value(r)) for r in rows])) if rows else float("nan")

    return {
        "turns": len(rows),
        "well_formed": mean(lambda r: r["well_formed"]),
        "clean": mean(lambda r: r["well_formed"] and r["rejected"] == 0 and r["executed"] > 0),
        "clean_inside": mean(lambda r: r["well_formed"] and r["rejected"] == r["past_end"] and r["executed"] > 0),
        "executed_per_turn": mean(lambda r: r["executed"]),
        "rejected_per_turn": mean(lambda r: r["rejected"]),
        "past_end_per_turn": mean(lambda r: r["past_end"]),
        "truncated": mean(lambda r: r["truncated"]),
        "example_problems": [p for r in rows for p in r["problems"]][:5],
    }


def to_markdown(summary: dict[str, Any]) -> str:
    lines = [f"Forced call turns after `{summary['prefix']}` on {summary['videos']} videos:", "",
             "| temperature | turns | well formed | clean | clean inside the video | executed / turn "
             "| rejected / turn (past the end) | cut at max tokens |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for t, r in summary["by_temperature"].items():
        lines.append(f"| {t} | {r['turns']} | {r['well_formed']:.3f} | {r['clean']:.3f} | {r['clean_inside']:.3f} "
                     f"| {r['executed_per_turn']:.2f} | {r['rejected_per_turn']:.2f} ({r['past_end_per_turn']:.2f}) "
                     f"| {r['truncated']:.3f} |")  # fmt: skip
    return "\n".join(lines) + "\n"
