"""What ``paravt train`` (the local backend) will do, read from the recipe and the run directory before anything
runs: its stages with their sizes (the job's progress line counts them: ``paravt.evaluation.progress``) and, for
``--dry-run``, the whole plan in words: recipe, output directory and what it holds, data, model, stages.

Nothing here builds, loads or writes anything: videos are counted from their plans (``missing_videos``), the
model's place is named, not built, and the run's state is read from its files."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from paravt.evaluation.heldout import COUNTERFACTUAL_SPLIT, HELDOUT_SPLIT
from paravt.evaluation.progress import Stage
from paravt.learners.config import TrainConfig
from paravt.learners.run_setup import synth_dir, tiny_model_dir
from paravt.learners.selection import VALIDATION_SPLIT, first_candidate, selects
from paravt.policies.card import CARD_NAME

# Seconds per unit of each stage: tiny_cpu's units measured on a 2-core machine at one torch thread beside one other
# job of the same kind (the main job's seed 0: perception examples 0:27 for 400 videos, perception 0:49 for 600
# steps, teacher 1:26 for 1,400 episodes, SFT 4:00 for 1,400 steps, RL 3:43 for 60 steps with its four validation
# checks, held-out evaluation 0:23 for 240 episodes; a new 30-150 s video at 112 px). The job rescales them by the
# speed it measures once a stage has run (``JobProgress.speed``); the dry run adds them up as its estimate.
COST_S = {"videos": 0.15, "perception examples": 0.07, "perception": 0.08, "teacher episodes": 0.06, "sft": 0.17,
          "sft (streamed)": 0.17, "train": 3.45, "eval": 0.1}  # fmt: skip


@dataclass
class RunState:
    """What a run directory holds: the RL checkpoint's step (None: none), a saved cold start, an interrupted cold
    start (its saved parts in words), earlier metrics."""

    step: int | None
    coldstart_saved: bool
    coldstart_partial: str | None
    has_metrics: bool

    @classmethod
    def read(cls, out: Path) -> RunState:
        from paravt.learners.coldstart.store import ColdStartStore

        state = out / "checkpoint" / "state.json"
        try:
            step = int(json.loads(state.read_text())["step"]) if state.is_file() else None
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            step = None
        store = ColdStartStore(out)
        return cls(step=step, coldstart_saved=(out / "coldstart" / "model" / CARD_NAME).is_file(),
                   coldstart_partial=store.describe() if store.exists() else None,
                   has_metrics=(out / "metrics.jsonl").is_file())  # fmt: skip


def runs_cold_start(cfg: TrainConfig, state: RunState, resume: bool) -> bool:
    """Whether this invocation trains a cold start (``Trainer.cold_start``'s condition, read before the trainer
    exists)."""
    resumed = resume and (state.step is not None or state.coldstart_saved)
    return not resumed and (cfg.perception.steps > 0 or cfg.sft.steps > 0)


def video_sets(cfg: TrainConfig, out: Path, cold_start: bool, target: int) -> list[tuple[str, Path, object]]:
    """(what, directory, SynthConfig) of every synthetic dataset the run uses to step ``target`` (none on real
    data)."""
    if cfg.data.path:
        return []
    sets: list[tuple[str, Path, object]] = [("training", synth_dir(synth := cfg.data.synth_config()), synth)]
    if cold_start and cfg.perception.steps > 0:
        p = cfg.perception
        pool = cfg.data.synth_config(n=p.videos, seed=cfg.data.perception_seed, min_duration=p.min_duration,
                                     max_duration=p.max_duration)  # fmt: skip
        sets.append(("perception", synth_dir(pool), pool))
    if cfg.data.heldout_n > 0:
        for name, split, cf in (("held-out", HELDOUT_SPLIT, ""), ("recoloured held-out", COUNTERFACTUAL_SPLIT, "colour")):
            sets.append((name, out / split, cfg.data.synth_config(n=cfg.data.heldout_n, seed=cfg.data.heldout_seed,
                                                                   counterfactual=cf)))  # fmt: skip
    if selects(cfg, target):
        sets.append(("validation", out / VALIDATION_SPLIT, cfg.data.synth_config(n=cfg.data.validation_n,
                                                                                 seed=cfg.data.validation_seed)))  # fmt: skip
    return sets


def job_stages(cfg: TrainConfig, out: str | Path, *, steps: int | None, resume: bool) -> list[Stage]:
    """The stages of ``paravt train``'s job: videos, the cold start's stages (done where a resumed run saved its cold
    start), RL (done up to the checkpoint's step) and the held-out evaluation."""
    from paravt_env.data.synthetic import missing_videos

    out = Path(out)
    state = RunState.read(out)
    cold = runs_cold_start(cfg, state, resume)
    stages = []
    target = cfg.steps if steps is None else steps
    sets = video_sets(cfg, out, cold, target)
    if sets:
        todo = sum(missing_videos(where, synth) for _, where, synth in sets)
        total = sum(synth.n for _, _, synth in sets)
        stages.append(Stage("videos", f"videos ({total} in all, {total - todo} already built)", todo, "video",
                            COST_S["videos"], calibrates=False))  # fmt: skip
    p, s = cfg.perception, cfg.sft
    cold_stages = []
    if p.steps > 0:
        if not cfg.data.path:  # on real data the examples come from the training samples, not counted here
            cold_stages.append(Stage("perception examples", "perception examples", p.videos, "video",
                                     COST_S["perception examples"]))  # fmt: skip
        cold_stages.append(Stage("perception", "perception stage", p.steps, "step", COST_S["perception"]))
    if s.steps > 0 and s.data:
        cold_stages.append(Stage("sft (streamed)", "SFT on the released data", s.steps, "step", COST_S["sft (streamed)"]))
    elif s.steps > 0:
        cold_stages += [Stage("teacher episodes", "teacher episodes", s.episodes, "episode", COST_S["teacher episodes"]),
                        Stage("sft", "SFT cold start", s.steps, "step", COST_S["sft"])]  # fmt: skip
    for stage in cold_stages:
        stage.done = 0 if cold else stage.units
    stages += cold_stages
    at = state.step if resume and state.step is not None else 0
    if target > 0:
        stages.append(Stage("train", f"RL ({cfg.algorithm})", max(target, at), "step", COST_S["train"], done=at))
    if cfg.data.heldout_n > 0 and not cfg.data.path:
        policies = (2 if (cold or state.coldstart_saved) else 1) + (1 if selects(cfg, target) else 0)
        stages.append(Stage("eval", "held-out evaluation", cfg.data.heldout_n * policies * 2, "episode", COST_S["eval"],
                            parts=True))
    return stages


def describe_plan(cfg: TrainConfig, out: str | Path, *, recipe: str, steps: int | None, resume: bool) -> str:
    """The plan of ``paravt train --dry-run``: what a real run of the same command would do, in words."""
    out = Path(out)
    state = RunState.read(out)
    target = cfg.steps if steps is None else steps
    lines = ["paravt train --dry-run: the plan of this command; nothing is trained, built or written.",
             f"recipe: {recipe} ({cfg.algorithm}, seed {cfg.seed}, {target} RL steps)",
             f"output directory: {out} ({_run_words(out, state, resume, target)})"]  # fmt: skip
    cold = runs_cold_start(cfg, state, resume)
    if cfg.data.path:
        lines.append(f"data: {cfg.data.path}" + (f" (videos under {cfg.data.video_root})" if cfg.data.video_root else ""))
    else:
        from paravt_env.data.synthetic import missing_videos

        for what, where, synth in video_sets(cfg, out, cold, target):
            todo = missing_videos(where, synth)
            built = "all built" if todo == 0 else f"{todo} to build"
            lines.append(f"data, {what}: {synth.n} synthetic videos of {synth.min_duration:g}-{synth.max_duration:g} s, "
                         f"seed {synth.seed}, in {where} ({built})")  # fmt: skip
    lines.append(f"model: {_model_words(cfg)}")
    lines.append("stages:")
    for i, stage in enumerate(job_stages(cfg, out, steps=steps, resume=resume), 1):
        left = max(0, stage.units - stage.done)
        status = "done" if left == 0 else f"{left} {stage.unit}{'s' if left != 1 else ''}"
        if stage.done and left:
            status += f" (steps 1-{stage.done} done)" if stage.key == "train" else f" ({stage.done} done)"
        lines.append(f"  {i}. {stage.label}: {status}")
    if selects(cfg, target):
        first = first_candidate(cfg.select.every, cfg.select.after)
        lines.append(f"during RL: every {cfg.select.every} steps from step {first}, the policy "
                     f"scored on {out / VALIDATION_SPLIT}; the best (the earliest on a tie) kept in {out / 'select'}")  # fmt: skip
    if cfg.data.heldout_n > 0 and not cfg.data.path:
        selected = ", the selected checkpoint" if selects(cfg, target) else ""
        lines.append(f"then: the cold start, the RL checkpoint{selected} evaluated on {out / HELDOUT_SPLIT} and its recoloured "
                     f"copy ({out}/eval*), the result drawn in {out / 'result.png'}")  # fmt: skip
    lines.append("time: " + estimate_words(cfg, job_stages(cfg, out, steps=steps, resume=resume)))
    return "\n".join(lines) + "\n"


def estimate_words(cfg: TrainConfig, stages: list[Stage]) -> str:
    """The dry run's time estimate: the stages' units left at ``COST_S`` each, for the tiny local model on a CPU
    (the only case the costs were measured for); other models are not estimated."""
    if cfg.model.path or cfg.model.size != "tiny" or cfg.model.device != "cpu":
        return "not estimated (the costs per unit are measured for the tiny model on a CPU only)"
    seconds = sum(max(0, s.units - s.done) * s.cost_s for s in stages)
    selection = 0.0
    if selects(cfg, cfg.steps):  # the validation episodes every select.every steps, at a held-out episode's cost
        checks = len(range(first_candidate(cfg.select.every, cfg.select.after), cfg.steps + 1, cfg.select.every))
        selection = checks * cfg.data.validation_n * COST_S["eval"]
    minutes = (seconds + selection) / 60
    return (f"about {max(1, round(minutes))} min at one torch thread on a 2-core machine running one other job "
            f"(the main job's measured cost per unit of each stage; an idle machine is faster)")


def _run_words(out: Path, state: RunState, resume: bool, target: int) -> str:
    """What the output directory holds and what this command does with it."""
    if out.exists() and not out.is_dir():
        return "a file, not a directory: a real run would stop there"
    if state.step is not None:
        where = f"a run at step {state.step}"
        if not resume:
            return f"{where}: refused without --resume"
        return where + (f"; trains steps {state.step + 1}-{target}" if target > state.step else "; nothing to train")
    if state.coldstart_partial:
        return (f"an interrupted cold start ({state.coldstart_partial}): "
                + ("continued" if resume else "refused without --resume"))  # fmt: skip
    if state.coldstart_saved:
        return "a saved cold start: RL starts from it" if resume else "a saved cold start: refused without --resume"
    if state.has_metrics and not resume:
        return "earlier metrics: refused without --resume"
    return "new" if not out.exists() else "exists, no run in it yet"


def _model_words(cfg: TrainConfig) -> str:
    if cfg.model.path:
        return cfg.model.path
    path = tiny_model_dir(cfg)
    built = "built" if path.is_dir() else "built on first use"
    return f"random-weight {cfg.model.tiny_arch} ({cfg.model.size}), {path} ({built})"
