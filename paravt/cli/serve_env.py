"""``paravt serve-env``: the env over HTTP for agents and trainers in other processes or on other machines."""

from __future__ import annotations

import argparse


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text,
                       epilog="routes and wire format: paravt_env/remote/server.py; client: paravt_env.RemoteVideoToolEnv")  # fmt: skip
    p.add_argument("--data", required=True, help="samples file or directory the server owns (anything load_samples reads)")
    p.add_argument("--video-root", default=None, help="directory the data's video paths are relative to")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=int, default=8100, help="0 picks a free port (printed on start)")
    p.add_argument("--max-sessions", type=int, default=64, help="open sessions at once (503 beyond)")
    p.add_argument("--idle-timeout", type=float, default=600.0, help="seconds before an untouched session is closed")
    p.add_argument("--max-body-bytes", type=int, default=1 << 20, help="largest request body (413 beyond)")
    p.add_argument("--max-unread-bytes", type=int, default=256 * 2**20,
                   help="what replies clients have not read may hold at once, all connections together; past it the "
                        "oldest unread connection is dropped first (default 256 MiB)")
    p.add_argument("--workers", type=int, default=None, help="env calls running at once (default: 2 per CPU core)")
    p.add_argument("--max-frame-budget", type=int, default=256, help="largest overview K a session may ask (400 beyond)")
    p.add_argument("--max-pixels", type=int, default=200704, help="largest frame a session may ask, in pixels")
    p.add_argument("--max-parallel", type=int, default=16, help="most crops per turn a session may ask")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from paravt_env.remote.server import EnvServerLimits, serve_env

    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in [0, 65535], got {args.port}")
    extra = {"workers": args.workers} if args.workers is not None else {}
    limits = EnvServerLimits(max_sessions=args.max_sessions, idle_timeout_s=args.idle_timeout,
                             max_body_bytes=args.max_body_bytes, max_frame_budget=args.max_frame_budget,
                             max_pixels=args.max_pixels, max_parallel=args.max_parallel,
                             max_unread_bytes=args.max_unread_bytes, **extra)  # fmt: skip
    serve_env(args.data, args.host, args.port, video_root=args.video_root, limits=limits,
              ready=lambda line: print(line, flush=True))  # fmt: skip
    return 0
