"""``paravt train``: the local trainer (SFT cold start + GRPO / PARA-GRPO) on a recipe."""

from __future__ import annotations

import argparse

from paravt.cli import add_threads_argument
from paravt.learners.adapters.engines import backends


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("--recipe", default=None, metavar="NAME|YAML",
                   help=f"a recipe: {', '.join(recipe_names())}, or a YAML file's path (default tiny_cpu; with "
                        "--resume, the run's own settings, RUN/config.json, with any overrides given)")
    p.add_argument("--steps", type=int, default=None, help="RL steps to reach (default: the recipe's)")
    p.add_argument("--out", default="runs/train", help="run directory (default runs/train)")
    p.add_argument("--resume", action="store_true",
                   help="continue from RUN/checkpoint, under RUN/config.json's settings unless --recipe is given")
    p.add_argument("--allow-config-change", action="store_true",
                   help="with --resume: continue under settings that differ from RUN/config.json")
    p.add_argument("--backend", choices=backends(), default="local", help="where the recipe trains (default local)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan and train nothing: local backend, the stages with their steps, the data, the "
                        "model and the output directory (nothing built or written); openrlhf, the launch command")
    p.add_argument("--gpus", type=int, default=None, help="openrlhf backend: GPUs of the node (actor, reference and "
                   "one vLLM engine each, colocated; default 8, the release's); refused on the local backend")
    add_threads_argument(p)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="recipe overrides, e.g. grpo.kl_coef=0")
    p.set_defaults(func=run)


def recipe_names() -> list[str]:
    """The bundled recipes (paravt/learners/recipes/*.yaml), found without importing paravt.learners (no torch for --help)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("paravt.learners")
    folders = [Path(p) / "recipes" for p in (spec.submodule_search_locations or [])] if spec else []
    return sorted({f.stem for d in folders for f in d.glob("*.yaml")})


def settings(args: argparse.Namespace):
    """The run's settings and what they came from: ``--recipe`` (default tiny_cpu) with the overrides; with
    ``--resume`` and no ``--recipe``, the run's own ``RUN/config.json`` with the overrides (a continued run need not
    retype them)."""
    from pathlib import Path

    from paravt.learners.config import load_recipe, load_run_config

    saved = Path(args.out) / "config.json"
    if args.resume and args.recipe is None and args.backend == "local" and saved.is_file():
        return load_run_config(args.out, args.overrides), f"{saved} (the run's own settings)"
    recipe = args.recipe or "tiny_cpu"
    return load_recipe(recipe, args.overrides), recipe


def run(args: argparse.Namespace) -> int:
    if args.steps is not None and args.steps < 0:
        raise ValueError(f"--steps must be at least 0, got {args.steps}")
    # flags that would otherwise be ignored without a word are refused by name
    if args.gpus is not None and args.backend != "openrlhf":
        raise ValueError(f"--gpus applies to --backend openrlhf; the {args.backend} backend trains on this machine's "
                         "CPU or its one device")  # fmt: skip
    if args.allow_config_change and not args.resume:
        raise ValueError("--allow-config-change applies with --resume (a new run has no earlier settings to differ from)")
    if args.backend == "local" and args.threads is not None:
        from paravt.learners.threads import resolve_threads

        resolve_threads(args.threads)  # --threads 0 is refused by a dry run as by the real one
    cfg, args.recipe = settings(args)
    if args.backend == "local":
        from paravt.learners.metrics import check_sinks

        check_sinks(cfg)  # a missing tensorboard / wandb fails now, not after the data and the model are ready
    if args.backend == "openrlhf":
        from paravt.learners.adapters.openrlhf.launcher import launch
        from paravt.learners.run_setup import resolve_data

        if args.steps is not None:
            raise ValueError("--steps applies to the local backend; OpenRLHF runs take train.num_episodes")
        # A dry run reads no data and writes nothing: it prints what a real run would execute.
        return launch(cfg, None if args.dry_run else resolve_data(cfg), args.out, dry_run=args.dry_run,
                      gpus=8 if args.gpus is None else args.gpus)
    from pathlib import Path

    out = Path(args.out)
    if args.dry_run:  # the plan only: no data, model, directory or lock
        from paravt.learners.plan import describe_plan

        print(describe_plan(cfg, out, recipe=args.recipe, steps=args.steps, resume=args.resume), end="")
        return 0
    return train_local(args, cfg, out)


def train_local(args: argparse.Namespace, cfg, out) -> int:
    """The local backend's job: videos, cold start, RL, the held-out evaluation and the result picture, with the
    job's progress line (``paravt.evaluation.progress``), each step said as it ends."""
    from paravt.cli import apply_threads
    from paravt.evaluation.progress import JobProgress, job_progress
    from paravt.learners.interrupts import interrupt_on_sigterm
    from paravt.learners.plan import job_stages
    from paravt.learners.run_setup import write_heldout
    from paravt.learners.trainer import Trainer

    apply_threads(args)
    progress = not args.no_progress
    if args.resume and not (out / "checkpoint").exists() and not (out / "coldstart").exists():
        print(f"{out}: nothing to resume there (no checkpoint, no cold start): starting fresh")
    job = JobProgress(job_stages(cfg, out, steps=args.steps, resume=args.resume), bars=progress)
    with job_progress(job):
        trainer = Trainer(cfg, out, resume=args.resume, progress=progress, allow_config_change=args.allow_config_change)
        interrupt_on_sigterm()  # timeout, schedulers and docker stop send SIGTERM: save like Ctrl-C does
        # before training: the split exists even if the run is interrupted; then the same videos, every needle recoloured
        heldout = write_heldout(cfg, out, progress=progress)
        write_heldout(cfg, out, counterfactual=True, progress=progress)
        start = trainer.step
        try:
            rows = trainer.train(args.steps)
        finally:
            trainer.close()
        target = args.steps if args.steps is not None else cfg.steps
        print(trained_words(out, rows, start, target))
        evaluate = heldout and not (target == 0 and start == 0)  # a cold start alone has no RL checkpoint to evaluate
        if evaluate:
            from paravt.evaluation.heldout import evaluate_heldout

            print(evaluate_heldout(out, progress=progress), end="")
    job.write(job.finish())
    where = [(name, out / rel) for name, rel in (("curves", "curves.png"), ("metrics", "metrics.jsonl"),
             ("held-out report", "eval/report.md"))]  # fmt: skip
    print("\n".join(f"{name}: {path}" for name, path in where if path.exists()))
    if evaluate:
        print(result_words(out))
    return 0


def trained_words(out, rows: list[dict], start: int, target: int) -> str:
    """What this invocation trained: the steps it ran (not the run's total), or that there was nothing to train."""
    if not rows and target == 0 and start == 0:
        return f"{out}: no RL steps (steps 0); the cold start is {out / 'coldstart' / 'model'}"
    if not rows:
        return f"{out}: nothing to train: the run is at step {start}, the target is {target} (raise it with --steps N)"
    last = rows[-1]
    which = f"step {last['step']}" if len(rows) == 1 else f"steps {rows[0]['step']}-{last['step']}"
    return (f"{out}: trained {len(rows)} step{'s' if len(rows) != 1 else ''} now ({which}; "
            f"the run is at step {last['step']}); last reward {last.get('reward_mean', float('nan')):.3f}, "
            f"format {last.get('format_reward', float('nan')):.3f}, tool calls {last.get('tool_calls_per_rollout', float('nan')):.2f}")  # fmt: skip


def result_words(out) -> str:
    """Draw ``RUN/result.png`` (the cold start against RL) and say where it is and how to see every episode."""
    from paravt.evaluation.heldout import plot_result

    try:
        picture = f"result: {plot_result(out, title=f'{out}: the cold start against RL on the held-out split')}"
    except ImportError:
        picture = f"result: {out / 'result.png'} not drawn: matplotlib is not installed (the [plot] extra)"
    return f"{picture}\nevery episode, in a browser: paravt view {out}"
