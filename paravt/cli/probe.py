"""``paravt probe perception|calls CKPT --data DIR``: does a checkpoint see, and can it write its calls?

``perception``: accuracy after an oracle crop with the crop frames right, grey, or another video's; how far the
next-token distribution moves when only the pixels change; and the Tool Necessity Gap (answers from the
overview alone at K=4 and K=64); then whole episodes sampled at temperature 1: κ, calls per calling turn, share
of well-formed turns. See ``paravt.probes.perception``.

``calls``: the opening words of a call turn forced after the overview, the rest written by the checkpoint,
greedy and at ``--temperature`` (default 0.7, the RL recipes'): the share of turns that parse and whose calls
all run. See ``paravt.probes.calls``.
"""

from __future__ import annotations

import argparse
import json
import sys

from paravt.cli import add_threads_argument


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("what", choices=("perception", "calls"), help="what to probe")
    p.add_argument("checkpoint", help="checkpoint directory (or hf:DIR); its policy card gives the env settings")
    p.add_argument("--data", required=True, help="synthetic samples (paravt synth output, or RUN/heldout)")
    p.add_argument("--limit", type=int, default=None, help="only the first N samples")
    p.add_argument("--window", type=float, default=20.0, help="oracle crop length in seconds (default 20)")
    p.add_argument("--budgets", default="4,64", help="overview budgets for the Tool Necessity Gap (default 4,64)")
    p.add_argument("--temperature", type=float, default=None,
                   help="perception: also sample whole episodes at this temperature: κ, calls per turn, well-formed "
                        "turns (default 1.0; 0 skips them); calls: the sampling temperature besides greedy "
                        "(default 0.7, the RL recipes')")
    p.add_argument("--per-video", type=int, default=4, help="calls: sampled turns per video (default 4)")
    p.add_argument("--prefix", default=None,
                   help="calls: the forced opening words of the call turn (default: the tiny recipes' teacher's)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (per-sample rows included)")
    add_threads_argument(p)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from paravt.cli import apply_threads
    from paravt.probes.perception import (
        ProbeConfig,
        load_checkpoint,
        probe_perception,
        sample_tool_use,
        to_markdown,
    )

    apply_threads(args)
    if args.what == "calls":
        return _run_calls(args)
    try:
        budgets = tuple(int(b) for b in args.budgets.split(",") if b.strip())
    except ValueError:
        raise ValueError(f"--budgets must be comma-separated integers, got {args.budgets!r}") from None
    samples = _samples(args, 2, " (the 'other' condition borrows another video)")
    policy, env = load_checkpoint(args.checkpoint)
    cfg = ProbeConfig(env=env, window=args.window, overview_budgets=budgets)
    summary = probe_perception(policy, samples, cfg, progress=not args.no_progress)
    temperature = 1.0 if args.temperature is None else args.temperature
    if temperature > 0:
        summary["sampling"] = sample_tool_use(policy, samples, env, temperature=temperature)
    return _emit(summary, args.json, to_markdown)


def _samples(args: argparse.Namespace, minimum: int, why: str = "") -> list:
    """``--data``'s samples, the first ``--limit`` of them when given (at least ``minimum``)."""
    from paravt_env import load_samples

    if args.limit is not None and args.limit < minimum:
        raise ValueError(f"--limit must be at least {minimum}{why}, got {args.limit}")
    samples = load_samples(args.data, strict=False)
    return samples if args.limit is None else samples[: args.limit]


def _emit(summary: dict, as_json: bool, to_markdown) -> int:
    """Print the probe's summary as JSON or as its markdown table."""
    if as_json:
        json.dump(summary, sys.stdout, indent=2)
        print()
    else:
        print(to_markdown(summary), end="")
    return 0


def _run_calls(args: argparse.Namespace) -> int:
    from paravt.probes.calls import CALL_PREFIX, probe_call_writing, to_markdown
    from paravt.probes.perception import load_checkpoint

    temperature = 0.7 if args.temperature is None else args.temperature
    if temperature < 0:
        raise ValueError(f"--temperature must be >= 0, got {temperature}")
    if args.per_video < 1:
        raise ValueError(f"--per-video must be at least 1, got {args.per_video}")
    samples = _samples(args, 1)
    policy, env = load_checkpoint(args.checkpoint)
    temperatures = (0.0,) if temperature == 0 else (0.0, temperature)
    summary = probe_call_writing(policy, samples, env, temperatures=temperatures, per_video=args.per_video,
                                 prefix=CALL_PREFIX if args.prefix is None else args.prefix)  # fmt: skip
    return _emit(summary, args.json, to_markdown)
