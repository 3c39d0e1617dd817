"""``paravt train``: the local trainer (SFT cold start + GRPO / PARA-GRPO) on a recipe."""

from __future__ import annotations

import argparse

from paravt.cli import add_threads_argument


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("--recipe", default="tiny_cpu", metavar="NAME|YAML",
                   help=f"a recipe: {', '.join(recipe_names())}, or a YAML file's path (default tiny_cpu)")
    p.add_argument("--steps", type=int, default=None, help="RL steps to reach (default: the recipe's)")
    p.add_argument("--out", default="runs/train", help="run directory (default runs/train)")
    p.add_argument("--resume", action="store_true", help="continue from RUN/checkpoint")
    p.add_argument("--allow-config-change", action="store_true",
                   help="with --resume: continue under settings that differ from RUN/config.json")
    p.add_argument("--backend", choices=("local", "openrlhf"), default="local")
    p.add_argument("--dry-run", action="store_true", help="openrlhf backend: print the command, do not run it")
    p.add_argument("--gpus", type=int, default=8, help="openrlhf backend: GPUs of the node (actor, reference and "
                   "one vLLM engine each, colocated; default 8, the release's)")
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


def run(args: argparse.Namespace) -> int:
    from paravt.learners.config import load_recipe

    if args.steps is not None and args.steps < 0:
        raise ValueError(f"--steps must be at least 0, got {args.steps}")
    cfg = load_recipe(args.recipe, args.overrides)
    if args.backend == "local":
        from paravt.learners.metrics import check_sinks

        check_sinks(cfg)  # a missing tensorboard / wandb fails now, not after the data and the model are ready
    if args.backend == "openrlhf":
        from paravt.learners.adapters.openrlhf.launcher import launch
        from paravt.learners.run_setup import resolve_data

        if args.steps is not None:
            raise ValueError("--steps applies to the local backend; OpenRLHF runs take train.num_episodes")
        # A dry run reads no data and writes nothing: it prints what a real run would execute.
        return launch(cfg, None if args.dry_run else resolve_data(cfg), args.out, dry_run=args.dry_run, gpus=args.gpus)
    from pathlib import Path

    from paravt.cli import apply_threads
    from paravt.learners.run_setup import write_heldout
    from paravt.learners.trainer import Trainer

    apply_threads(args)

    out = Path(args.out)
    if args.resume and not (out / "checkpoint").exists() and not (out / "coldstart").exists():
        print(f"{out}: nothing to resume there (no checkpoint, no cold start): starting fresh")
    trainer = Trainer(cfg, out, resume=args.resume, progress=not args.no_progress,
                      allow_config_change=args.allow_config_change)
    interrupt_on_sigterm()  # timeout, schedulers and docker stop send SIGTERM: save like Ctrl-C does
    heldout = write_heldout(cfg, out)  # before training: the split exists even if the run is interrupted
    write_heldout(cfg, out, counterfactual=True)  # the same videos, every needle recoloured
    start = trainer.step
    try:
        rows = trainer.train(args.steps)
    finally:
        trainer.close()
    if not rows and cfg.steps == 0:
        print(f"{args.out}: no RL steps (steps 0); the cold start is {out / 'coldstart' / 'model'}")
        return 0
    target = args.steps if args.steps is not None else cfg.steps
    if not rows and start >= target:
        print(f"{args.out}: nothing to train: the run is at step {start}, the target is {target} "
              f"(raise it with --steps N)")  # fmt: skip
    else:
        last = rows[-1] if rows else {}
        print(f"{args.out}: {len(rows)} steps; last reward {last.get('reward_mean', float('nan')):.3f}, "
              f"format {last.get('format_reward', float('nan')):.3f}, tool calls {last.get('tool_calls_per_rollout', float('nan')):.2f}")  # fmt: skip
    if heldout:
        print(evaluate_heldout(out, progress=not args.no_progress), end="")
    where = [(name, out / rel) for name, rel in (("curves", "curves.png"), ("metrics", "metrics.jsonl"),
             ("held-out episodes (open in a browser)", "eval/view.html"), ("held-out report", "eval/report.md"))]  # fmt: skip
    print("\n".join(f"{name}: {path}" for name, path in where if path.exists()))
    return 0


def fresh(target, identity: str, twins: tuple[str, ...] = ()) -> None:
    """Keep ``target`` (an evaluation of a checkpoint, and its twins ``target`` + suffix on other splits) only if
    it evaluated the checkpoint as it is now (``checkpoint.json``); a continued run saves new weights to the same
    path, and its evaluation is redone rather than resumed."""
    import json
    import shutil

    for folder in (target, *(target.with_name(target.name + suffix) for suffix in twins)):
        marker = folder / "checkpoint.json"
        if folder.exists() and (not marker.is_file() or json.loads(marker.read_text()).get("identity") != identity):
            print(f"{folder}: the checkpoint changed since it was evaluated: evaluating again")
            shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"identity": identity}) + "\n")


def interrupt_on_sigterm() -> None:
    """SIGTERM interrupts like Ctrl-C, and neither is lost if it lands in a finalizer
    (``paravt.learners.interrupts.request_interrupt``). SIGINT is left ignored where it was (a run started with
    ``&``)."""
    import signal

    from paravt.learners.interrupts import request_interrupt

    signal.signal(signal.SIGTERM, request_interrupt)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, request_interrupt)


def evaluate_heldout(out, progress: bool = True) -> str:
    """``paravt eval --policy hf:RUN/checkpoint/model --data RUN/heldout --out RUN/eval`` (the checkpoint's
    policy card supplies the env options), and the same for the cold start the RL started from
    (``RUN/coldstart/model`` -> ``RUN/eval_coldstart``), as Markdown with the two side by side. Where the
    split's counterfactual copy exists (``RUN/heldout_counterfactual``: every needle recoloured), both are also
    evaluated on it (``RUN/eval_counterfactual``, ``RUN/eval_coldstart_counterfactual``) and the table says how
    often the answer follows the new colour and how often it keeps the old one
    (``paravt.evaluation.counterfactual``)."""
    from paravt.evaluation.counterfactual import follow_rates
    from paravt.evaluation.fingerprints import checkpoint_identity
    from paravt.evaluation.harness import evaluate_checkpoint
    from paravt.evaluation.report import to_markdown
    from paravt.learners.run_setup import COUNTERFACTUAL_SPLIT

    data, counter = out / "heldout", out / COUNTERFACTUAL_SPLIT
    runs = [("RL", out / "checkpoint" / "model", out / "eval")]
    if (out / "coldstart" / "model" / "paravt.json").is_file():
        runs.insert(0, ("cold start", out / "coldstart" / "model", out / "eval_coldstart"))
    with_counter = (counter / "samples.jsonl").is_file()
    parts, rows = [], []
    for label, model, target in runs:
        fresh(target, checkpoint_identity(model), ("_counterfactual",) if with_counter else ())
        summary = evaluate_checkpoint(model, data, target, progress=progress)
        parts.append(to_markdown(summary, f"Held-out evaluation ({label}): hf:{model} on {data}"))
        row = (f"| {label} | {summary['accuracy']:.3f} | {summary['avg_tool_calls']:.2f} | "
               f"{summary['tool_usage_rate']:.2f} | {summary['n']} |")  # fmt: skip
        if with_counter:
            twin = target.with_name(target.name + "_counterfactual")
            evaluate_checkpoint(model, counter, twin, progress=progress)
            rates = follow_rates(data, counter, twin)
            row += f" {_rate(rates['follows'])} | {_rate(rates['keeps'])} |"
        rows.append(row)
    head = "| policy | held-out accuracy | crops per episode | tool use | n |"
    table = [head + (" needles recoloured: follows the new colour | keeps the old one |" if with_counter else ""),
             "|---|---|---|---|---|" + ("---|---|" if with_counter else ""), *rows]  # fmt: skip
    return "".join(parts) + "\n" + "\n".join(table) + "\n"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
