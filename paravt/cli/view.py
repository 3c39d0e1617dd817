"""``paravt view DIR``: a self-contained HTML page of what the agent did in each episode (``DIR/view.html``)."""

from __future__ import annotations

import argparse


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("dir", help="an eval directory (results.jsonl), or a run / repro directory holding evaluations")
    p.add_argument("--out", default=None, help="where to write the page (default DIR/view.html)")
    p.add_argument("--no-thumbnails", action="store_true", help="skip decoding the frames the agent saw")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from paravt.evaluation.viewer import write_view

    path, counts = write_view(args.dir, args.out, thumbs=not args.no_thumbnails)
    note = f", {counts['without_record']} rows without an episode record" if counts["without_record"] else ""
    print(f"{path}: {counts['episodes']} episodes from {counts['runs']} record file(s) (evaluations, rollout steps){note}")
    return 0
