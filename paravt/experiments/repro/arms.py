"""``paravt repro``'s arms and settings: what each arm of the paper's comparison changes, what a repro runs
(``ReproConfig``), and where its runs live. Read by the training, the probe gate, the step-1 probe and the report;
imports nothing of theirs.

The arms (arXiv 2605.20342: vanilla GRPO vs PARA-GRPO, and the two single-component ablations):

- ``vanilla_grpo``: GRPO with the release's vanilla settings (``paravt/rl/configs/vanilla_grpo_8b.yaml``):
  no think prefix, no answer-suffix weighting, no anchoring, fixed overview budget;
- ``para_grpo``: Exploration Anchoring (think prefix, answer suffix, anchor λ=0.5) + nFrames Gating;
- ``ea_only``: PARA-GRPO without nFrames Gating;
- ``gating_only``: PARA-GRPO without Exploration Anchoring (no prefix, no suffix, λ=0);
- ``para_grpo_scored`` / ``ea_only_scored``: the two EA arms under the reward variant that scores the forced
  ``<think>\n`` as the policy's own opening tag (the paper's intent; the release scores generated text only);
- ``vanilla_grpo_neutral``, ``ea_only_neutral``, ``gating_only_neutral``, ``para_grpo_neutral``: four arms again
  under the tool-neutral reward (``grpo.tool_credit=false``: at equal accuracy calling earns nothing), where the
  skip-the-tool shortcut of the Tool Prior Paradox can pay (not run by default).

Everything else (data, cold start, optimiser, rollout settings, steps) is the recipe's, identical for every arm.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from paravt.learners.config import TrainConfig, load_recipe
from paravt_env.tools import DISPATCH_MODES

ARMS: dict[str, dict[str, Any]] = {
    "vanilla_grpo": {"algorithm": "grpo"},
    "para_grpo": {"algorithm": "para_grpo"},
    "ea_only": {"algorithm": "para_grpo", "para.nframes_gating": False},
    "gating_only": {"algorithm": "para_grpo", "para.think_prefix": False, "para.answer_suffix": False,
                    "para.anchor_weight": 0.0},
    # The EA claim again under the reward the paper describes: the forced "<think>\n" scored as the policy's
    # opening tag (RewardConfig.score_forced_prefix). Under the release's reward a bare answer after the forced
    # prefix outscores a closed think block, so EA was only tested under that quirk.
    "para_grpo_scored": {"algorithm": "para_grpo", "para.prefix_scored": True},
    "ea_only_scored": {"algorithm": "para_grpo", "para.nframes_gating": False, "para.prefix_scored": True},
}  # fmt: skip
# The four arms of the paper's comparison again under the tool-neutral reward (the preregistered comparison).
NEUTRAL = {f"{arm}_neutral": {**ARMS[arm], "grpo.tool_credit": False}
           for arm in ("vanilla_grpo", "ea_only", "gating_only", "para_grpo")}  # fmt: skip
DEFAULT_ARMS = tuple(ARMS)
"""What ``paravt repro`` runs unless ``--arms`` says otherwise: the six arms of the released reward."""
ARMS.update(NEUTRAL)
"""Recipe overrides of each arm, on top of the shared recipe."""

ARM_LABELS = {"vanilla_grpo": "Vanilla GRPO", "para_grpo": "PARA-GRPO", "ea_only": "EA only",
              "gating_only": "nFrames Gating only", "para_grpo_scored": "PARA-GRPO (prefix scored)",
              "ea_only_scored": "EA only (prefix scored)"}  # fmt: skip
ARM_LABELS.update({arm: f"{ARM_LABELS[arm[: -len('_neutral')]]} (tool-neutral)" for arm in NEUTRAL})


@dataclass
class ReproConfig:
    """What ``paravt repro`` runs."""

    recipe: str = "repro_cpu"
    """The shared recipe (name or YAML path): data, cold start, RL settings of every arm."""
    arms: tuple[str, ...] = DEFAULT_ARMS
    """Arms to run (keys of ``ARMS``)."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """RL seeds per arm (sampling, data order, gating draws). The cold start is one, shared."""
    steps: int | None = None
    """RL steps per arm (None: the recipe's)."""
    overrides: tuple[str, ...] = ()
    """``key=value`` recipe overrides applied to the cold start and every arm alike."""
    eval_limit: int | None = None
    """Held-out samples each final policy is evaluated on (None: all of them)."""
    dispatch: tuple[str, ...] = DISPATCH_MODES
    """Tool dispatch modes each final policy is evaluated with (``--dispatch``; the tool-neutral design: parallel only,
    the protocol every arm is trained for)."""
    eval_frame_budgets: tuple[int, ...] = (4, 16, 64)
    """Overview frames K of the held-out evaluations, the same for every arm, each with every ``dispatch``
    (empty: each policy card's K). Where the tool is needed (K = 4), where the overview shows the needle a
    fifth of the time (16), and the paper's fixed budget, where skipping the tool is a shortcut (64)."""
    gate: bool = True
    """Stop before any RL step when the shared cold start fails the probe gate
    (``paravt.experiments.repro.gate``); False records its figures and goes on (``paravt repro --no-gate``)."""
    gate_habit: float | None = None
    """The gate's fifth check, the tool prior (``GateConfig.min_crop_habit``, ``--gate-habit``): greedy at the
    gate's K = 64, the cold start crops in at least this share of the held-out episodes. None: not checked (the
    runs before the tool-neutral design)."""

    @classmethod
    def from_saved(cls, saved: dict[str, Any]) -> ReproConfig:
        """The configuration a run directory's ``repro.json`` records (lists back to tuples; a run recorded
        before several K existed had one ``eval_frame_budget``)."""
        saved = dict(saved)
        if "eval_frame_budget" in saved:
            k = saved.pop("eval_frame_budget")
            saved.setdefault("eval_frame_budgets", () if k is None else (k,))
        known = {f.name for f in fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items() if k in known})

    def __post_init__(self) -> None:
        for name in ("arms", "seeds", "overrides", "dispatch", "eval_frame_budgets"):
            if not isinstance(getattr(self, name), (list, tuple)):
                raise ValueError(f"ReproConfig.{name} must be a list, got {getattr(self, name)!r}")
        if any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in self.seeds):
            raise ValueError(f"ReproConfig.seeds must be non-negative integers, got {list(self.seeds)}")
        unknown = [a for a in self.arms if a not in ARMS]
        if unknown:
            raise ValueError(f"unknown arm(s) {unknown}; known: {list(ARMS)}")
        if not self.seeds:
            raise ValueError("ReproConfig.seeds is empty")
        if not self.dispatch or any(d not in DISPATCH_MODES for d in self.dispatch):
            raise ValueError(f"ReproConfig.dispatch must name one or more of {list(DISPATCH_MODES)}, got {list(self.dispatch)}")
        if self.gate_habit is not None and not (isinstance(self.gate_habit, (int, float)) and 0 <= self.gate_habit <= 1):
            raise ValueError(f"ReproConfig.gate_habit must be a share in [0, 1], got {self.gate_habit!r}")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"ReproConfig.steps must be at least 1, got {self.steps}")
        self.eval_frame_budgets = tuple(self.eval_frame_budgets)
        if any(not isinstance(k, int) or isinstance(k, bool) or k < 1 for k in self.eval_frame_budgets):
            raise ValueError(f"ReproConfig.eval_frame_budgets must be positive frame counts, got {list(self.eval_frame_budgets)}")


def saved_config(path: Path) -> ReproConfig:
    """The configuration a run directory's ``repro.json`` records; a damaged one is named (a report written under
    default settings would claim arms, seeds and K the run never had)."""
    from paravt_env.storage import DamagedFile, read_json

    saved = read_json(path)
    try:
        return ReproConfig.from_saved(saved)
    except (TypeError, ValueError) as exc:
        raise DamagedFile(f"{path}: damaged, {exc}") from None


def base_config(cfg: ReproConfig) -> TrainConfig:
    return load_recipe(cfg.recipe, list(cfg.overrides))


def arm_config(cfg: ReproConfig, arm: str, seed: int, coldstart_model: Path) -> TrainConfig:
    """The recipe + shared overrides + the arm's own changes, starting from the shared cold start."""
    changes = [f"{k}={json.dumps(v) if isinstance(v, bool) else v}" for k, v in ARMS[arm].items()]
    shared = [f"model.path={coldstart_model}", "perception.steps=0", "sft.steps=0", f"seed={seed}"]
    if cfg.steps is not None:
        shared.append(f"steps={cfg.steps}")
    return load_recipe(cfg.recipe, [*cfg.overrides, *shared, *changes])


def coldstart_model(out: Path) -> Path:
    return Path(out) / "coldstart" / "coldstart" / "model"


def arm_dir(out: Path, arm: str, seed: int) -> Path:
    return Path(out) / "arms" / arm / f"seed{seed}"
