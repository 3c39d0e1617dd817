"""``paravt serve``: a local checkpoint behind OpenAI-compatible and sglang-style endpoints (CPU dev server)."""

from __future__ import annotations

import argparse

from paravt.cli import add_threads_argument


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("--model", required=True, help="checkpoint directory")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port (printed on start)")
    p.add_argument("--max-unread-bytes", type=int, default=256 * 2**20,
                   help="what replies clients have not read may hold at once, all connections together; past it the "
                        "oldest unread connection is dropped first (default 256 MiB)")
    add_threads_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from paravt.cli import apply_threads
    from paravt.policies.server import ServeLimits, serve

    if args.max_unread_bytes < 1:
        raise ValueError(f"--max-unread-bytes must be at least 1, got {args.max_unread_bytes}")
    apply_threads(args)
    serve(args.model, args.host, args.port, ready=lambda line: print(line, flush=True),
          limits=ServeLimits(max_unread_bytes=args.max_unread_bytes))
    return 0
