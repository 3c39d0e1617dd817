"""``paravt repro``, training half: one shared cold start, then every RL arm of the paper's comparison for
several seeds, each arm changing only what the paper changes.

    OUT/coldstart/                 data -> perception -> SFT cold start (once, arm-independent)
    OUT/coldstart/heldout/         held-out videos of the training distribution, never trained on
    OUT/arms/ARM/seedS/            an RL run from OUT/coldstart/coldstart/model

The arms and their settings are in ``paravt.experiments.repro.arms``. Every stage is resumable: a finished stage
is skipped, an interrupted arm resumes from its last checkpoint (or restarts when it had none).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from paravt.experiments.repro.arms import ARMS, ReproConfig, arm_config, arm_dir, base_config, coldstart_model
from paravt_env import storage
from paravt_env.storage import DamagedFile, read_json

logger = logging.getLogger(__name__)


def run_coldstart(cfg: ReproConfig, out: Path, progress: bool = True) -> Path:
    """The shared cold start (and the held-out split), unless it is already saved."""
    from paravt.learners.run_setup import write_heldout
    from paravt.learners.trainer import Trainer

    target = coldstart_model(out)
    run = Path(out) / "coldstart"
    base = base_config(cfg)
    base.steps = 0
    if (target / "paravt.json").is_file():
        # a run carried to another machine without its videos (results/repro/ keeps the weights, not the videos)
        # gets its held-out split again: the same seed draws the same videos
        write_heldout(base, run)
        return target
    # an interrupted cold start resumes from what it saved (RUN/coldstart/partial), as `paravt train --resume`
    trainer = Trainer(base, run, progress=progress, resume=run.exists())
    try:
        write_heldout(base, run)
        trainer.cold_start()
    finally:
        trainer.close()
    if not (target / "paravt.json").is_file():
        raise RuntimeError(f"the cold start finished without saving {target}: does the recipe run perception or SFT?")
    return target


def run_arm(cfg: ReproConfig, out: Path, arm: str, seed: int, progress: bool = True) -> Path:
    """Train one arm for one seed (resuming its checkpoint); returns its run directory."""
    from paravt.learners.trainer import Trainer

    run = arm_dir(out, arm, seed)
    tc = arm_config(cfg, arm, seed, coldstart_model(out))
    state = run / "checkpoint" / "state.json"
    if is_finished(run):
        return run
    if run.exists():
        with wait_for_writer(run):  # a run directory is never changed or deleted under a live writer
            if tc.model.path:
                follow_move(run, Path(tc.model.path))
            problem = None if state.is_file() else "it has no checkpoint yet"
            problem = problem or damage(run)
            if problem:  # nothing sound to resume: trained again from the cold start
                logger.warning("repro: %s is trained again: %s", run, problem)
                shutil.rmtree(run)
    trainer = Trainer(tc, run, resume=state.is_file(), progress=progress)
    try:
        trainer.train()
    finally:
        trainer.close()
    return run


def follow_move(run: Path, model: Path) -> None:
    """Point an arm's saved config at the shared cold start where it is now. A repro directory copied elsewhere
    (another machine, a copy of ``results/repro/``) names its cold start by the absolute path it had, and a
    resumed run must keep its settings: without this, an unfinished arm would not resume. Only a path that ends as
    this repro's own cold start does (``coldstart/coldstart/model``) is followed: the same weights, moved."""
    path = run / "config.json"
    try:
        saved = read_json(path)
        old = saved["model"]["path"]
    except (OSError, DamagedFile, KeyError, TypeError):
        return  # no config yet (a fresh run), or a damaged one, which the resume check names
    if old and Path(old) != model and Path(old).parts[-3:] == model.parts[-3:]:
        saved["model"]["path"] = str(model)
        storage.write_text_atomic(path, json.dumps(saved, indent=2) + "\n")
        logger.info("repro: %s moved: its cold start %s is now %s", run, old, model)


def run_training(cfg: ReproConfig, out: str | Path, *, progress: bool = True,
                 on_arm: Callable[[str, int, Path], None] | None = None,
                 prepared: bool = False) -> list[tuple[str, int, Path]]:  # fmt: skip
    """Cold start (unless the caller ran ``prepare`` already: ``prepared``), then every (arm, seed); ``on_arm``
    is called after each finished run (the evaluation)."""
    out = Path(out)
    if not prepared:
        prepare(cfg, out, progress)
    done = []
    for seed in cfg.seeds:  # seeds outermost: an interrupted repro has whole seeds of every arm
        for arm in cfg.arms:
            logger.info("repro: arm %s, seed %d", arm, seed)
            run = run_arm(cfg, out, arm, seed, progress)
            if on_arm:
                on_arm(arm, seed, run)
            done.append((arm, seed, run))
    return done


def prepare(cfg: ReproConfig, out: Path, progress: bool = True) -> Path:
    """The run directory checked against its configuration, the shared cold start every arm starts from, and
    its probe gate (``GateFailed`` when it fails and ``cfg.gate`` holds)."""
    from paravt.experiments.repro.gate import GateConfig, run_gate

    out.mkdir(parents=True, exist_ok=True)
    check_config(cfg, out)
    model = run_coldstart(cfg, out, progress)
    run_gate(out, cfg, GateConfig(min_crop_habit=cfg.gate_habit), enforce=cfg.gate, progress=progress)
    return model


def check_config(cfg: ReproConfig, out: Path) -> None:
    """A repro directory belongs to one configuration: resuming with another one is refused, except for
    adding arms or seeds (which only adds runs) or dispatch modes (which only adds evaluations)."""
    path = out / "repro.json"
    mine = asdict(cfg)
    if path.is_file():
        theirs = json.loads(path.read_text())
        theirs = asdict(ReproConfig.from_saved(theirs))
        fixed = ("recipe", "steps", "overrides", "eval_limit", "eval_frame_budgets")
        changed = [k for k in fixed if _norm(theirs.get(k)) != _norm(mine.get(k))]
        if changed:
            raise ValueError(f"{out} holds a repro run with other settings ({', '.join(changed)}): "
                             f"use a new --out, or the same settings to resume")  # fmt: skip
        mine["arms"] = list(dict.fromkeys([*theirs.get("arms", []), *mine["arms"]]))
        mine["seeds"] = list(dict.fromkeys([*theirs.get("seeds", []), *mine["seeds"]]))
        mine["dispatch"] = list(dict.fromkeys([*theirs.get("dispatch", []), *mine["dispatch"]]))
    path.write_text(json.dumps(mine, indent=2) + "\n")


def _norm(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


def finished_runs(out: str | Path, arms: Sequence[str] | None = None) -> list[tuple[str, int, Path]]:
    """(arm, seed, run dir) of every arm run that completed its RL steps under ``out`` (a run still training,
    or interrupted, has a checkpoint too, but its curves would enter the report cut short)."""
    found = []
    for arm in arms or ARMS:
        for run in sorted((Path(out) / "arms" / arm).glob("seed*")):
            if is_finished(run):
                found.append((arm, int(run.name[4:]), run))
    return found


WRITER_WAIT_S = 120.0
"""How long a rerun waits for the writer of an arm's run directory (an earlier repro's worker still saving its
checkpoint after its parent died) before it gives up, naming it."""


@contextlib.contextmanager
def wait_for_writer(run: Path, wait_s: float | None = None):
    """Hold ``run``'s trainer lock, waiting up to ``wait_s`` for a live writer to exit first; ``OutputLocked``
    naming it (pid, host, since when) if it does not."""
    wait_s = WRITER_WAIT_S if wait_s is None else wait_s
    deadline = time.monotonic() + wait_s
    while True:
        try:
            lock = storage.DirectoryLock(run, "train.lock", "trained")
            break
        except storage.OutputLocked as exc:
            if time.monotonic() >= deadline:
                raise storage.OutputLocked(f"{exc} (a worker of an earlier paravt repro on {run.parents[2]}? it "
                                           f"was waited for {wait_s:g} s; stop it, then rerun)") from None  # fmt: skip
            time.sleep(1.0)
    try:
        yield
    finally:
        lock.release()


def damage(run: Path) -> str | None:
    """Why a run directory with a checkpoint cannot be resumed as it is (None: it can): its config or its metrics
    do not cover the checkpoint's steps (a directory deleted under a writer that went on, say)."""
    try:
        step = int(json.loads((run / "checkpoint" / "state.json").read_text()).get("step", 0))
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        return f"its checkpoint/state.json cannot be read ({exc})"
    if not (run / "config.json").is_file():
        return "it has a checkpoint but no config.json"
    steps = []
    try:
        with open(run / "metrics.jsonl", encoding="utf-8") as f:
            for line in f:
                with contextlib.suppress(ValueError):
                    row = json.loads(line)
                    if isinstance(row, dict) and isinstance(row.get("step"), int) and row.get("stage", "rl") == "rl":
                        steps.append(row["step"])
    except OSError:
        pass
    if sorted(set(s for s in steps if s <= step)) != list(range(1, step + 1)):
        have = f"{min(steps)}..{max(steps)}" if steps else "none"
        return f"its checkpoint is at step {step} but its metrics hold steps {have}"
    return None


def unreadable_runs(out: str | Path, arms: Sequence[str] | None = None) -> list[tuple[str, int, str]]:
    """(arm, seed, why) of every run under ``out`` with a checkpoint whose ``checkpoint/state.json`` or ``config.json``
    cannot be read: neither finished nor resumable as it is. A report names them, instead of leaving their seed
    out of an arm's means without a word."""
    found = []
    for arm in arms or ARMS:
        for run in sorted((Path(out) / "arms" / arm).glob("seed*")):
            if not (run / "checkpoint").exists():
                continue  # never saved a step: not started, nothing to read
            for name, key in (("checkpoint/state.json", "step"), ("config.json", "steps")):
                try:
                    value = read_json(run / name)[key]
                    if not isinstance(value, int) or isinstance(value, bool):
                        raise DamagedFile(f"{run / name}: damaged, its {key!r} is {value!r}, not a step count")
                except (OSError, DamagedFile, KeyError) as exc:
                    why = f"{run / name} has no {exc}" if isinstance(exc, KeyError) else str(exc)
                    found.append((arm, int(run.name[4:]) if run.name[4:].isdigit() else -1, why))
                    break
    return found


def is_finished(run: Path) -> bool:
    """The run's checkpoint holds its last step (``checkpoint/state.json`` step >= ``config.json`` steps)."""
    try:
        step = json.loads((run / "checkpoint" / "state.json").read_text()).get("step", 0)
        steps = json.loads((run / "config.json").read_text())["steps"]
    except (OSError, ValueError, KeyError):
        return False
    return step >= steps
