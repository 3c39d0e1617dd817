"""``paravt bench dispatch``: parallel vs sequential tool dispatch (and no tools) on the same samples."""

from __future__ import annotations

import argparse


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    which = p.add_subparsers(dest="bench", metavar="BENCH", required=True)
    d = which.add_parser("dispatch", help="parallel vs sequential vs no-tool on the same samples")
    d.add_argument("--data", required=True, help="samples file or directory holding samples.jsonl")
    d.add_argument(
        "--policy", default="detector", help="scripted policy: detector, uniform, oracle (default detector)"
    )
    d.add_argument("--frame-budget", type=int, default=8, help="overview frames K (default 8)")
    d.add_argument("--max-turns", type=int, default=3, help="turns per episode (default 3)")
    d.add_argument("--max-parallel", type=int, default=5, help="crops per turn in parallel mode (default 5)")
    d.add_argument("--limit", type=int, default=None, help="only the first N samples")
    d.add_argument("--out", required=True, help="result JSON (a .md table and a .png chart go beside it)")
    d.add_argument("--no-progress", action="store_true", help="no progress bars")
    d.set_defaults(func=run_dispatch)


def run_dispatch(args: argparse.Namespace) -> int:
    from paravt.evaluation.dispatch_bench import run_dispatch_benchmark, to_markdown, write_results
    from paravt_env import load_samples

    # Every row asked for counts in n (a missing video is an error row), as in paravt eval.
    samples = load_samples(args.data, strict=False, keep_missing=True)
    if args.limit is not None:
        samples = samples[: args.limit]
    results = run_dispatch_benchmark(
        samples,
        args.policy,
        frame_budget=args.frame_budget,
        max_turns=args.max_turns,
        max_parallel=args.max_parallel,
        progress=not args.no_progress,
    )
    paths = write_results(results, args.out)
    print(to_markdown(results))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0
