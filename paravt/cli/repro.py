"""``paravt repro --out DIR``: the paper's training comparison at CPU scale, resumable.

data -> perception -> cold start (once) -> probe gate -> every arm (vanilla GRPO, PARA-GRPO, EA only, gating
only, and the EA arms under the prefix-scored reward) for each seed -> each final policy evaluated on the
held-out videos at several K with parallel and sequential dispatch ->
``DIR/report.md``, ``DIR/report.png``, ``DIR/report.json``. Rerun the same command to resume; ``--report-only``
rewrites the report from what is on disk.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("--out", required=True, help="run directory (rerun with the same --out to resume)")
    p.add_argument("--recipe", default="repro_cpu", help="shared recipe (default repro_cpu: long videos, short events)")
    p.add_argument("--arms", default=None,
                   help="comma-separated arms (default: the six of the released reward; the tool-neutral arms of "
                        "the tool-neutral design are named with _neutral: paravt.experiments.repro.arms.ARMS)")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated RL seeds (default 0,1,2)")
    p.add_argument("--steps", type=int, default=None, help="RL steps per arm (default: the recipe's)")
    p.add_argument("--eval-limit", type=int, default=None, help="held-out samples per evaluation (default all)")
    p.add_argument("--eval-frame-budgets", default="4,16,64",
                   help="overview frames K of the held-out evaluations, every arm alike, each with every --dispatch "
                        "(default 4,16,64; 'card': each policy card's)")
    p.add_argument("--dispatch", default="parallel,sequential",
                   help="comma-separated tool dispatch modes each final policy is evaluated with (default "
                        "parallel,sequential; the tool-neutral design: parallel, the protocol every arm is trained for)")
    p.add_argument("--no-gate", action="store_true",
                   help="train the arms even when the cold start fails the probe gate (its figures are still "
                        "recorded in OUT/coldstart/gate.json and the report)")
    p.add_argument("--gate-habit", type=float, default=None, metavar="SHARE",
                   help="the probe gate's tool-prior check: greedy at K = 64 the cold start crops in at least this "
                        "share of the held-out episodes (the tool-neutral design: 0.5; default: not checked)")
    p.add_argument("--report-only", action="store_true", help="only rewrite the report from finished runs")
    p.add_argument("--jobs", type=int, default=1,
                   help="arm runs trained and evaluated at once, each in its own process with its share of the CPU "
                        "threads (default 1; on a 2-core machine --jobs 2 finishes the comparison sooner: see docs/repro.md)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch CPU threads per job (default: $PARAVT_THREADS, else with --jobs 1 half the usable cores, "
                        "with --jobs N the cores shared out among the N jobs)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="recipe overrides for every stage and arm")
    p.set_defaults(func=run)


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--{what} must be comma-separated integers, got {text!r}") from None


def run(args: argparse.Namespace) -> int:
    from paravt.experiments.repro.arms import DEFAULT_ARMS, ReproConfig, saved_config
    from paravt.experiments.repro.evaluations import evaluate_coldstart, evaluate_run
    from paravt.experiments.repro.gate import GateFailed
    from paravt.experiments.repro.report import coldstart_summary, write_report
    from paravt.experiments.repro.train import run_training
    from paravt.experiments.repro.wall import WallClock

    if args.steps is not None and args.steps < 1:
        raise ValueError(f"--steps must be at least 1, got {args.steps}")
    budgets = () if args.eval_frame_budgets.strip() == "card" else _ints(args.eval_frame_budgets, "eval-frame-budgets")
    if any(k < 1 for k in budgets):
        raise ValueError(f"--eval-frame-budgets must be positive frame counts, got {args.eval_frame_budgets!r}")
    if args.eval_limit is not None and args.eval_limit < 1:
        raise ValueError(f"--eval-limit must be at least 1, got {args.eval_limit}")
    if args.jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {args.jobs}")
    cfg = ReproConfig(recipe=args.recipe, arms=_names(args.arms) if args.arms else DEFAULT_ARMS,
                      seeds=_ints(args.seeds, "seeds"), steps=args.steps, overrides=tuple(args.overrides),
                      eval_limit=args.eval_limit, eval_frame_budgets=budgets, gate=not args.no_gate,
                      gate_habit=args.gate_habit,
                      dispatch=_names(args.dispatch))  # fmt: skip
    out = Path(args.out)
    progress = not args.no_progress
    from paravt.learners.interrupts import interrupt_on_sigterm

    interrupt_on_sigterm()  # a SIGTERM saves the running arm's checkpoint, as Ctrl-C does
    clock = WallClock(out / "wall_s.json")
    wall, timed = clock.seconds, clock.timed

    if not args.report_only:
        def after_run() -> None:  # a partial report, and the stage's time so far, after every finished run
            clock.flush()
            write_report(out, cfg, coldstart_summary(out, cfg), wall)

        def after_arm(arm: str, seed: int, run_dir: Path) -> None:
            evaluate_run(run_dir, out / "coldstart" / "heldout", cfg, progress)
            after_run()

        from paravt.experiments.repro.train import prepare
        from paravt.learners.threads import resolve_threads, set_torch_threads

        set_torch_threads(args.threads)  # this process: the cold start, and every run with --jobs 1
        if args.threads is not None or os.environ.get("PARAVT_THREADS"):
            args.threads = resolve_threads(args.threads)[0]  # the workers get what was asked; else their share
        try:  # every key of wall_s.json adds up over the invocations that resumed the run
            timed("cold start and probe gate", prepare, cfg, out, progress)
        except GateFailed as exc:  # the user's recipe made a cold start RL cannot test: said, not a traceback
            print(f"paravt repro: {exc}", file=sys.stderr)
            write_report(out, cfg, coldstart_summary(out, cfg), wall)
            return 1
        # before the arms: every partial report has the row they start from
        timed("cold start's evaluation", evaluate_coldstart, out, cfg, progress)
        if args.jobs == 1:
            timed("arms, trained and evaluated",
                  lambda: run_training(cfg, out, progress=progress, on_arm=after_arm, prepared=True))
        else:
            timed("arms, trained and evaluated", run_parallel, cfg, out, args.jobs, progress,
                  after_run, args.threads)
    else:  # the report of the run on disk, under the settings it was run with
        if not (out / "repro.json").is_file():
            raise FileNotFoundError(f"{out} holds no repro run (no repro.json)")
        cfg = saved_config(out / "repro.json")
    print(write_report(out, cfg, coldstart_summary(out, cfg), wall), end="")
    return 0


def run_parallel(cfg, out: Path, jobs: int, progress: bool, report, threads: int | None = None) -> None:
    """After ``prepare`` (the shared cold start and its gate, run once by the caller), every (arm, seed) run and
    its evaluations in ``jobs`` worker processes (``paravt.experiments.repro.jobs``), seeds outermost as in the
    sequential order; the partial report after each."""
    from paravt.experiments.repro.jobs import run_jobs

    tasks = [((arm, seed), arm_job, (cfg, out, arm, seed)) for seed in cfg.seeds for arm in cfg.arms]
    run_jobs(tasks, jobs, on_done=lambda key, seconds: report(), threads=threads)


def arm_job(cfg, out: Path, arm: str, seed: int) -> None:
    """One worker's job: train the arm for the seed (or resume it), then evaluate its final policy with every
    dispatch mode (each evaluation resumes too). Module-level so a spawned worker can unpickle it."""
    from paravt.experiments.repro.evaluations import evaluate_run
    from paravt.experiments.repro.train import run_arm

    run_dir = run_arm(cfg, out, arm, seed, progress=False)
    evaluate_run(run_dir, out / "coldstart" / "heldout", cfg, False)
