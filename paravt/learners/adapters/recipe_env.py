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

TOKEN_ANCHORING = {
    "local": None,
    "openrlhf": "OpenRLHF takes one scalar reward per sample (the agent executor's 'reward') and has no per-token reward hook",
    "verl": "verl's agent loop returns one scalar (reward_score), which its worker places on the last response token",
    "trl": "TRL's GRPOTrainer takes one scalar per completion from each reward function",
}  # fmt: skip
"""Why token-granularity anchoring (``para.anchoring: token``) cannot run on an engine (None: it can)."""


def env_options(cfg: Any, engine: str) -> dict[str, Any]:
    """The rollouts' ``EnvConfig`` of ``cfg`` (a ``TrainConfig``) as JSON-ready keyword arguments, without the
    sub-agent (each engine makes one on its own generation server). Refuses what ``engine`` cannot train."""
    from paravt.learners.run_setup import env_config

    if engine not in TOKEN_ANCHORING:
        raise ValueError(f"unknown engine {engine!r}; known: {sorted(TOKEN_ANCHORING)}")
    if cfg.settings().token_anchoring and TOKEN_ANCHORING[engine]:
        raise ValueError(f"para.anchoring=token is local-only: {TOKEN_ANCHORING[engine]}. "
                         "Use para.anchoring=sequence (the release's) on this engine.")  # fmt: skip
    env = env_config(cfg)
    options = {f.name: getattr(env, f.name) for f in dataclasses.fields(env) if f.name != "subagent"}
    options["gating_choices"] = list(env.gating_choices)
    options["reward"] = env.reward.as_dict()
    return options
