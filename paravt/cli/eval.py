"""``paravt eval``: run a policy through the env on a dataset (resumable), or compare finished runs.

paravt eval --policy detector --data runs/synth --out runs/eval_detector [--dispatch sequential] ...
paravt eval compare runs/eval_parallel runs/eval_sequential
paravt eval diff runs/eval_k64 runs/eval_k32      # what differs between two runs, and on which samples
paravt eval suite --data-root $HF_HOME --policy openai:http://localhost:8000/v1#ParaVT-8B --protocol release --out runs/t1
"""

from __future__ import annotations

import argparse
import sys

from paravt.cli import add_threads_argument
from paravt_env.episodes import PROTOCOLS
from paravt_env.protocol.prompts import PROMPT_MODES


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text,
                       epilog="subcommands (each with its own --help): compare, diff, suite")  # fmt: skip
    add_eval_options(p, single=True)
    actions = p.add_subparsers(dest="action", metavar="{compare,diff,suite}")
    text = "side-by-side table of finished evaluation runs"
    c = actions.add_parser("compare", help=text, description=text)
    c.add_argument("dirs", nargs="+", metavar="DIR", help="evaluation output directories (paravt eval --out)")
    c.set_defaults(func=run_compare)
    text = "what differs between two evaluation runs (settings, data, code), and on which samples"
    d = actions.add_parser("diff", help=text, description=text)
    d.add_argument("a", metavar="DIR_A")
    d.add_argument("b", metavar="DIR_B")
    d.set_defaults(func=run_diff)
    text = "the paper's seven benchmark columns from --data-root (resumable), with the paper's rows beside"
    s = actions.add_parser("suite", help=text, description=text)
    s.add_argument("--data-root", help="the folder laid out as the released driver's $HF_HOME")
    s.add_argument("--columns", default=None, help="comma-separated subset of the columns (default: all)")
    s.add_argument(
        "--grounding-prompt-mode", default=None,
        choices=PROMPT_MODES,
        help="prompt mode of Charades-STA (default: agentic_minimal under the release protocol, as the "
        "release's ParaVT-8B recipe; else the --prompt-mode)",
    )
    s.add_argument("--paper-rows", default=None, help="JSON {row: {column: value}} of the paper's rows")
    s.add_argument(
        "--grounding-video-channel", choices=("image_url", "video_url"), default=None,
        help="the channel of Charades-STA (default: --video-channel; the release's recipes use video_url)",
    )
    add_eval_options(s, single=False)
    s.set_defaults(func=run_suite_command)
    p.set_defaults(func=run)


def add_eval_options(p: argparse.ArgumentParser, *, single: bool) -> None:
    """The options of one evaluation (``single``: ``paravt eval`` itself, with ``--data``) or of the suite."""
    p.add_argument(
        "--policy", help="detector | no_tool | uniform | oracle | hf:PATH | openai:URL | sglang:URL"
    )
    if single:
        p.add_argument("--data", help="samples file or directory (anything load_samples reads)")
        p.add_argument("--video-root", default=None, help="directory the data's video paths are relative to")
    p.add_argument("--out", help="output directory (rerun with the same --out to resume)")
    p.add_argument("--dispatch", choices=("parallel", "sequential"), default=None,
                   help="tool dispatch (default: a checkpoint's card, the protocol it was trained for, else parallel)")
    # Env options default to the checkpoint's policy card (hf:DIR trained here), else to the paper's values.
    p.add_argument("--frame-budget", type=int, default=None, help="overview frames K (default: card, else 64)")
    p.add_argument("--max-turns", type=int, default=None, help="turns per episode (default: card, else 3)")
    p.add_argument("--max-parallel", type=int, default=None, help="crops per turn (default: card, else 5)")
    p.add_argument("--crop-budget", type=int, default=None,
                   help="most crops an episode may run, the same for both dispatch modes; the episode then has "
                        "N + 1 turns, whatever --max-turns says (default: none)")
    p.add_argument("--turn-budget", type=int, default=None,
                   help="most turns an episode may take, the same for both dispatch modes, the last one answering; "
                        "overrides --max-turns and the N + 1 turns of --crop-budget (default: none)")
    p.add_argument("--crop-fps", type=float, default=None, help="crop frames per second (default: card, else 1)")
    p.add_argument("--crop-max-frames", type=int, default=None, help="frames per crop (default: card, else 16)")
    p.add_argument("--max-pixels", type=int, default=None, help="pixel budget per frame (default: card, else 50176)")
    p.add_argument(
        "--prompt-mode", choices=PROMPT_MODES, default=None,
        help="system prompt (default: card, else agentic; agentic_general is the release's name of agentic)",
    )
    p.add_argument(
        "--protocol", choices=PROTOCOLS, default="paravt",
        help="release: the released eval driver's messages, frames, turns and scoring, so a released checkpoint "
        "sees what it was evaluated on (--max-turns then counts rounds of tool calls); release_rl: its RL "
        "workflow's (a checkpoint trained with sub-agents); longvt: LongVT's eval protocol (its prompt and tool, one call "
        "a turn, its crops and answer parsing)",
    )
    if single:
        p.add_argument("--subtitles", action="store_true", help="show each video's .srt subtitles before the question")
    p.add_argument(
        "--video-channel", choices=("image_url", "video_url"), default="image_url",
        help="release protocol: video_url sends the video as a file:// URL for a vLLM server to sample (the "
        "release's Charades-STA runs); crops stay images",
    )
    p.add_argument("--tool-result", choices=("frames", "subagent"), default=None)
    p.add_argument("--limit", type=int, default=None, help="only the first N samples")
    p.add_argument("--concurrency", type=int, default=None,
                   help="episodes in flight (default: 16 for a greedy hf: model, their turns generated as one batch; "
                        "else 1)")
    p.add_argument(
        "--max-new-tokens", type=int, default=None,
        help="model policies: tokens per turn (default: a checkpoint's card, the cap it was trained under; else 2048)",
    )
    if single:  # the suite runs the paper's greedy protocol
        p.add_argument("--temperature", type=float, default=0.0,
                       help="model policies: sampling temperature (default 0: greedy, the paper's eval protocol; e.g. "
                            "0.7, the release's RL rollouts)")
        p.add_argument("--seed", type=int, default=0,
                       help="with --temperature > 0: each episode is sampled from this seed and its sample's id, so "
                            "a resumed run draws the same episodes (default 0)")
    add_threads_argument(p)
    p.add_argument("--no-progress", action="store_true")


def run_compare(args: argparse.Namespace) -> int:
    from paravt.evaluation.report import compare

    print(compare(args.dirs), end="")
    return 0


def run_diff(args: argparse.Namespace) -> int:
    from paravt.evaluation.fingerprints import diff_runs

    print(diff_runs(args.a, args.b), end="")
    return 0


def threads_for(args: argparse.Namespace) -> None:
    """``--threads`` checked whatever the policy; set for an in-process model (``hf:``), whose speed it decides."""
    from paravt.learners.threads import resolve_threads

    resolve_threads(args.threads)
    if (args.policy or "").startswith("hf:"):
        from paravt.cli import apply_threads

        apply_threads(args)


def run(args: argparse.Namespace) -> int:
    from paravt.evaluation.harness import (
        OPTION_KEYS,
        eval_options,
        evaluate,
        pending_samples,
        resolve_turn_tokens,
        sampling_config,
    )
    from paravt.evaluation.policy_specs import make_agent_factory, preflight
    from paravt.evaluation.report import to_markdown

    missing = [f"--{k}" for k in ("policy", "data", "out") if not getattr(args, k)]
    if missing:
        raise ValueError(f"paravt eval needs {', '.join(missing)}")
    from paravt.baselines import BASELINES

    if args.policy in BASELINES and args.max_new_tokens is not None:  # refused, not ignored without a word
        raise ValueError(f"--max-new-tokens applies to model policies (hf:, openai:, sglang:); {args.policy} is a "
                         "scripted policy and generates no tokens")  # fmt: skip
    threads_for(args)
    from paravt_env import load_samples

    # Every row asked for counts in n: a missing video is an error row, not a smaller denominator.
    samples = load_samples(args.data, video_root=args.video_root, strict=False, keep_missing=True)
    if args.limit is not None:
        samples = samples[: args.limit]
    options = eval_options(args.policy, args.dispatch, protocol=args.protocol, subtitles=args.subtitles,
                           video_channel=args.video_channel, **{k: getattr(args, k) for k in OPTION_KEYS})  # fmt: skip
    preflight(args.policy)  # a server that is not up fails the run now, not every sample
    tokens = resolve_turn_tokens(args.policy, args.max_new_tokens)
    factory, subagent = make_agent_factory(args.policy, max_new_tokens=tokens, tool_result=options.tool_result,
                                           protocol=args.protocol, temperature=args.temperature)  # fmt: skip
    sampled = args.temperature > 0
    todo = pending_samples(args.out, samples)
    if sampled and (args.concurrency or 1) > 1 and args.policy.startswith("hf:"):
        raise ValueError("--temperature with --concurrency > 1: episodes in flight at once would share torch's random "
                         "generator, so the run could not be reproduced or resumed; use --concurrency 1")  # fmt: skip
    summary = evaluate(
        samples,
        factory,
        args.out,
        options,
        concurrency=args.concurrency,
        progress=not args.no_progress,
        run_config={"policy": args.policy, "data": str(args.data), "max_new_tokens": tokens,
                    **sampling_config(args.temperature, args.seed)},
        subagent=subagent,
        seed=args.seed if sampled else None,
    )
    print(to_markdown(summary, f"Evaluation: {args.policy} on {args.data}"), file=sys.stdout)
    print(ran_words(args.out, todo, summary["n"]))
    if summary["n"] and summary["errors"] == summary["n"]:  # nothing was scored: not a result, whatever the table says
        print(f"paravt eval: error: none of the {summary['n']} samples could be scored (the failures are listed above "
              f"and in {args.out}/summary.json)", file=sys.stderr)  # fmt: skip
        return 1
    return 0


def ran_words(out: str, todo: int, n: int) -> str:
    """What an evaluation did now: a rerun over a finished ``--out`` says that nothing ran and whose table it
    printed."""
    if todo == 0:
        return f"{out}: nothing to evaluate, {n} rows already scored (the table is theirs)"
    before = f", {n - todo} scored before" if n > todo else ""
    return f"{out}: {todo} samples scored now{before}"


def run_suite_command(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from paravt.evaluation.harness import OPTION_KEYS, eval_options, resolve_turn_tokens
    from paravt.evaluation.policy_specs import make_agent_factory, preflight
    from paravt.evaluation.suite import COLUMN_KEYS, run_suite, to_markdown

    missing = [f"--{k.replace('_', '-')}" for k in ("policy", "data_root", "out") if not getattr(args, k)]
    if missing:
        raise ValueError(f"paravt eval suite needs {', '.join(missing)}")
    threads_for(args)
    columns = tuple(c.strip() for c in args.columns.split(",")) if args.columns else COLUMN_KEYS
    paper_rows = json.loads(Path(args.paper_rows).read_text()) if args.paper_rows else None
    if paper_rows is not None and not (isinstance(paper_rows, dict) and all(isinstance(v, dict) for v in paper_rows.values())):
        raise ValueError(f"--paper-rows {args.paper_rows} must hold a JSON object {{row: {{column: value}}}}")
    options = eval_options(args.policy, args.dispatch, protocol=args.protocol, video_channel=args.video_channel,
                           **{k: getattr(args, k) for k in OPTION_KEYS})  # fmt: skip
    from paravt_env.episodes import episode_of

    grounding = args.grounding_prompt_mode or episode_of(options).grounding_prompt_mode or options.prompt_mode
    preflight(args.policy)
    factory, subagent = make_agent_factory(
        args.policy, max_new_tokens=resolve_turn_tokens(args.policy, args.max_new_tokens), tool_result=options.tool_result,
        protocol=args.protocol,
    )
    table = run_suite(args.data_root, factory, args.out, options, grounding_prompt_mode=grounding, columns=columns,
                      grounding_video_channel=args.grounding_video_channel or args.video_channel,
                      limit=args.limit, concurrency=args.concurrency, progress=not args.no_progress,
                      run_config={"policy": args.policy, "protocol": args.protocol, "data_root": str(args.data_root)},
                      subagent=subagent, paper_rows=paper_rows)  # fmt: skip
    print(to_markdown(table, {"policy": args.policy, "protocol": args.protocol}), end="")
    return 0
