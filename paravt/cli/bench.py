"""``paravt bench dispatch``: sequential against parallel dispatch at matched crop budgets, with their cost."""

from __future__ import annotations

import argparse


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    which = p.add_subparsers(dest="bench", metavar="BENCH", required=True)
    d = which.add_parser("dispatch", help="sequential vs parallel dispatch at matched crop and turn budgets, accuracy and the whole cost")
    d.add_argument("--data", required=True, help="samples file or directory holding samples.jsonl")
    d.add_argument("--policy", default="detector",
                   help="any policy paravt eval takes: detector, uniform, oracle, hf:PATH, openai:URL, sglang:URL "
                        "(default detector)")  # fmt: skip
    d.add_argument("--crop-budget", default="1,2,4,8",
                   help="crop budgets to run both modes at, comma-separated (default 1,2,4,8): the same crops for both "
                        "modes, budget + 1 turns")  # fmt: skip
    d.add_argument("--turn-budget", default=None,
                   help="turn budgets to run every crop budget at too, comma-separated (e.g. 2,3): the same turns for "
                        "both modes, the last one answering (default: none, each crop budget's budget + 1 turns)")
    d.add_argument("--rounds", type=int, default=8,
                   help="chunks the samples are played in, every cell playing each chunk in turn, in alternating "
                        "order, so that a change of load falls on both modes (default 8)")
    d.add_argument("--frame-budget", type=int, default=None, help="overview frames K (default: a checkpoint's card, else 8)")
    d.add_argument("--max-parallel", type=int, default=None, help="crops per turn in parallel mode (default: card, else 5)")
    d.add_argument("--max-new-tokens", type=int, default=None, help="model policies: tokens per turn (default: card, else 2048)")
    d.add_argument("--concurrency", type=int, default=1,
                   help="episodes in flight (default 1: each episode's wall time is its own latency)")
    d.add_argument("--peers", default="",
                   help="peer protocols to play beside both modes at the same budgets, comma-separated: longvt "
                        "(LongVT's own prompt, one call a turn, its crops and scorer; default: none)")
    d.add_argument("--limit", type=int, default=None, help="only the first N samples")
    d.add_argument("--out", required=True, help="output directory (rerun with the same --out to resume)")
    d.add_argument("--no-progress", action="store_true", help="no progress bars")
    d.set_defaults(func=run_dispatch)


def run_dispatch(args: argparse.Namespace) -> int:
    from paravt.baselines import BASELINES
    from paravt.evaluation.dispatch_bench import (
        parse_budgets,
        run_dispatch_benchmark,
        to_markdown,
        write_results,
    )
    from paravt.evaluation.policy_specs import preflight
    from paravt_env import load_samples

    if args.policy in BASELINES and args.max_new_tokens is not None:  # refused, not ignored without a word
        raise ValueError(f"--max-new-tokens applies to model policies; {args.policy} is a scripted policy")
    budgets = parse_budgets(args.crop_budget)
    turn_budgets = (None,) if args.turn_budget is None else parse_budgets(args.turn_budget, "--turn-budget")
    if args.rounds < 1:
        raise ValueError(f"--rounds must be at least 1, got {args.rounds}")
    if args.concurrency < 1:
        raise ValueError(f"--concurrency must be at least 1, got {args.concurrency}")
    # Every row asked for counts in n (a missing video is an error row), as in paravt eval.
    samples = load_samples(args.data, strict=False, keep_missing=True)
    if args.limit is not None:
        samples = samples[: args.limit]
    preflight(args.policy)
    frame_budget = args.frame_budget if args.frame_budget is not None or args.policy.startswith("hf:") else 8
    results = run_dispatch_benchmark(samples, args.policy, args.out, data=str(args.data), budgets=budgets,
                                     turn_budgets=turn_budgets, rounds=args.rounds,
                                     frame_budget=frame_budget, max_parallel=args.max_parallel,
                                     max_new_tokens=args.max_new_tokens, concurrency=args.concurrency,
                                     progress=not args.no_progress,
                                     peers=[p.strip() for p in args.peers.split(",") if p.strip()])  # fmt: skip
    paths = write_results(results, args.out)
    print(to_markdown(results))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0
