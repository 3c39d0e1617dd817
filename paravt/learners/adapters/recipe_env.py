"""The env a recipe's rollouts build, as the JSON an engine carries to its rollout workers.

One builder for every engine: ``run_setup.env_config`` (the local trainer's own env: the recipe's ``env``
section plus what the algorithm table sets, i.e. nFrames Gating, the released reward with its sequence-level
anchor bonus, the ``<think>\\n`` prefix, the run's seed). The JSON travels with the data each engine's rollout
worker receives (OpenRLHF: the label; verl: the agent-loop config; TRL: the env factory), never through a
driver's environment variables, which a cluster's workers do not inherit.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from paravt.learners.adapters.engines import engine as engine_row


def env_options(cfg: Any, engine: str) -> dict[str, Any]:
    """The rollouts' ``EnvConfig`` of ``cfg`` (a ``TrainConfig``) as JSON-ready keyword arguments, without the
    sub-agent (each engine makes one on its own generation server). Refuses what ``engine`` cannot train."""
    from paravt.learners.run_setup import env_config

    why = engine_row(engine).token_anchoring
    if cfg.settings().token_anchoring and why:
        raise ValueError(f"para.anchoring=token is local-only: {why}. "
                         "Use para.anchoring=sequence (the release's) on this engine.")  # fmt: skip
    env = env_config(cfg)
    options = {f.name: getattr(env, f.name) for f in dataclasses.fields(env) if f.name != "subagent"}
    options["gating_choices"] = list(env.gating_choices)
    options["reward"] = env.reward.as_dict()
    return options


def processor_pixels(cfg: Any) -> dict[str, int]:
    """The pixel budget the local trainer's policy processes frames at (``min_pixels`` / ``max_pixels`` of its
    image processor: ``model.processor_*_pixels``, else the env's), for an engine's processor and inference server.
    Without it a Qwen-VL processor falls back to its own default budget: a 112 x 112 frame the local trainer shows as
    3 x 3 merged patches (9 image tokens) becomes 4 x 4 (16), and the policy sees a task it was not trained on."""
    low, high = cfg.model.processor_pixels(cfg.env.min_pixels, cfg.env.max_pixels)
    return {"min_pixels": int(low), "max_pixels": int(high)}
