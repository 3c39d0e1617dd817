"""Does an executor episode line up with what OpenRLHF will train on? One teacher-forced forward pass of the
policy over the episode's ``observation_tokens`` and ``mm_train_inputs`` must give, at every token inside the
``action_ranges``, the log-prob the engine reported when it generated that token (``rollout_log_probs``): the
importance ratio of the first PPO step is exp of their difference, so a shift, a misplaced range, a missing
image or a pad-count mismatch shows up here as a ratio far from 1.
"""

from __future__ import annotations

from typing import Any

import torch

from paravt.policies.encoded import Encoded
from paravt.policies.hf import HFPolicy


def check_alignment(policy: HFPolicy, result: dict[str, Any]) -> dict[str, Any]:
    """Compare ``result`` (``run_local_episode``'s / the executor's dict) with a forward pass of ``policy`` at its
    temperature; returns the action-token count, the max and mean |Δ log-prob| over them, and ``problems``
    (structural ones: lengths, ranges, prompt log-probs, image pads), empty when the episode lines up."""
    toks, lps, ranges = list(result["observation_tokens"]), list(result["rollout_log_probs"]), list(result["action_ranges"])
    mm = result.get("mm_train_inputs") or {}
    problems = []
    if len(toks) != len(lps):
        problems.append(f"{len(toks)} observation tokens but {len(lps)} log-probs")
    if not ranges or any(not 0 < a < b <= len(toks) for a, b in ranges) or any(
            ranges[i][1] > ranges[i + 1][0] for i in range(len(ranges) - 1)):  # fmt: skip
        problems.append(f"action ranges {ranges} are not ordered, non-empty spans inside the {len(toks)} tokens")
        return {"action_tokens": 0, "max_abs_diff": None, "mean_abs_diff": None, "problems": problems}
    if any(lps[i] != 0.0 for i in range(ranges[0][0])):
        problems.append("the prompt carries behaviour log-probs")
    grids = mm.get("image_grid_thw")
    pads = sum(1 for t in toks if t == policy.image_pad_id)
    expected = 0 if grids is None else int(grids.prod(dim=-1).sum()) // policy.merge_size**2
    if pads != expected:
        problems.append(f"{pads} image pads in the tokens, {expected} for the images' grids")
        return {"action_tokens": 0, "max_abs_diff": None, "mean_abs_diff": None, "problems": problems}
    encoded = Encoded(toks, mm.get("pixel_values"), grids)
    with torch.no_grad():
        forward = policy.sequence_logprobs(encoded).float().cpu()  # forward[i - 1]: log p(token i | tokens < i)
    positions = [i for a, b in ranges for i in range(a, b)]
    diffs = torch.tensor([abs(float(forward[i - 1]) - float(lps[i])) for i in positions])
    return {"action_tokens": len(positions), "max_abs_diff": float(diffs.max()), "mean_abs_diff": float(diffs.mean()),
            "problems": problems}  # fmt: skip
