"""``paravt eval``: run a policy through the env on a dataset (resumable), or compare finished runs.

paravt eval --policy detector --data runs/synth --out runs/eval_detector [--dispatch sequential] ...
paravt eval compare runs/eval_parallel runs/eval_sequential
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument(
        "compare_dirs", nargs="*", metavar="compare DIR", help="'compare DIR1 DIR2 ...': side-by-side table"
    )
    p.add_argument(
        "--policy", help="detector | no_tool | uniform | oracle | hf:PATH | openai:URL | sglang:URL"
    )
    p.add_argument("--data", help="samples file or directory (anything load_samples reads)")
    p.add_argument("--video-root", default=None, help="directory the data's video paths are relative to")
    p.add_argument("--out", help="output directory (rerun with the same --out to resume)")
    p.add_argument("--dispatch", choices=("parallel", "sequential"), default="parallel")
    # Env options default to the checkpoint's policy card (hf:DIR trained here), else to the paper's values.
    p.add_argument("--frame-budget", type=int, default=None, help="overview frames K (default: card, else 64)")
    p.add_argument("--max-turns", type=int, default=None, help="turns per episode (default: card, else 3)")
    p.add_argument("--max-parallel", type=int, default=None, help="crops per turn (default: card, else 5)")
    p.add_argument("--crop-fps", type=float, default=None, help="crop frames per second (default: card, else 1)")
    p.add_argument("--crop-max-frames", type=int, default=None, help="frames per crop (default: card, else 16)")
    p.add_argument("--max-pixels", type=int, default=None, help="pixel budget per frame (default: card, else 50176)")
    p.add_argument(
        "--prompt-mode", choices=("direct", "reasoning", "agentic", "agentic_minimal"), default=None
    )
    p.add_argument("--tool-result", choices=("frames", "subagent"), default=None)
    p.add_argument("--limit", type=int, default=None, help="only the first N samples")
    p.add_argument("--concurrency", type=int, default=1, help="episodes in flight (default 1)")
    p.add_argument(
        "--max-new-tokens", type=int, default=2048, help="model policies: tokens per turn (default 2048)"
    )
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


OPTION_KEYS = ("frame_budget", "max_turns", "max_parallel", "crop_fps", "crop_max_frames", "max_pixels",
               "prompt_mode", "tool_result")  # fmt: skip
"""Env options that default to the checkpoint's policy card, then to the paper's values."""


def policy_card(spec: str) -> dict:
    """The policy card of an ``hf:DIR`` checkpoint trained here (``{}`` for anything else)."""
    if not spec.startswith("hf:"):
        return {}
    from pathlib import Path

    from learners.policies.card import read_card

    path = Path(spec[3:])
    if not path.exists():
        raise FileNotFoundError(f"checkpoint directory {path} does not exist (policy {spec})")
    return read_card(path)


def eval_options(policy: str, dispatch: str = "parallel", **given):
    """Options given (None: not given), then the checkpoint's card, then the paper's eval defaults."""
    from benchmarks.evaluation import EvalOptions

    unknown = sorted(set(given) - set(OPTION_KEYS))
    if unknown:
        raise TypeError(f"unknown eval option(s) {unknown}; known: {list(OPTION_KEYS)}")
    card = policy_card(policy)
    trained = card.get("env", {})
    defaults = EvalOptions()
    pick = {}
    for key in OPTION_KEYS:
        value = given.get(key)
        pick[key] = value if value is not None else trained.get(key, getattr(defaults, key))
    pick["min_pixels"] = min(trained.get("min_pixels", defaults.min_pixels), pick["max_pixels"])
    return EvalOptions(dispatch=dispatch, response_prefix="<think>\n" if card.get("think_prefix") else "", **pick)


def run(args: argparse.Namespace) -> int:
    from benchmarks.evaluation import compare, evaluate, to_markdown
    from benchmarks.policies import make_agent_factory

    if args.compare_dirs:
        if args.compare_dirs[0] != "compare" or len(args.compare_dirs) < 2:
            raise ValueError("usage: paravt eval compare DIR1 [DIR2 ...]")
        print(compare(args.compare_dirs[1:]), end="")
        return 0
    missing = [f"--{k}" for k in ("policy", "data", "out") if not getattr(args, k)]
    if missing:
        raise ValueError(f"paravt eval needs {', '.join(missing)}")
    from paravt_env import load_samples

    samples = load_samples(args.data, video_root=args.video_root, strict=False)
    if args.limit is not None:
        samples = samples[: args.limit]
    options = eval_options(args.policy, args.dispatch, **{k: getattr(args, k) for k in OPTION_KEYS})
    factory, subagent = make_agent_factory(
        args.policy, max_new_tokens=args.max_new_tokens, tool_result=options.tool_result
    )
    summary = evaluate(
        samples,
        factory,
        args.out,
        options,
        concurrency=args.concurrency,
        progress=not args.no_progress,
        run_config={"policy": args.policy, "data": str(args.data)},
        subagent=subagent,
    )
    print(to_markdown(summary, f"Evaluation: {args.policy} on {args.data}"), file=sys.stdout)
    return 0
