"""The docs' tables of measured figures, regenerated from the committed result files.

A table in the README or ``docs/*.md`` between

    <!-- generated: MODULE:FUNCTION RESULT.json -->
    ...
    <!-- /generated -->

is ``FUNCTION(json.load(RESULT.json))`` of ``MODULE`` (a function that renders Markdown). ``tests/test_docs.py``
checks every such block against its file; after a rerun has written new result files,

    python scripts/docs_tables.py          # rewrite every block from its file (--check: only say which differ)

brings the pages up to date.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- generated: ([\w.]+):(\w+) (\S+) -->\n)(.*?)(<!-- /generated -->)", re.S)


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def render(module: str, function: str, source: str) -> str:
    data = json.loads((REPO / source).read_text())
    return getattr(importlib.import_module(module), function)(data)


def blocks(path: Path) -> list[tuple[str, str, str, str]]:
    """``(module, function, source, table as written)`` of every generated block of a page."""
    return [(m[2], m[3], m[4], m[5]) for m in BLOCK.finditer(path.read_text())]


def regenerate(path: Path) -> bool:
    """Rewrite a page's blocks from their files; whether anything changed."""
    text = path.read_text()
    new = BLOCK.sub(lambda m: m[1] + render(m[2], m[3], m[4]) + m[6], text)
    if new != text:
        path.write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only list the pages whose tables differ from their files")
    args = p.parse_args(argv)
    stale = []
    try:
        for path in pages():
            if args.check:
                if any(table != render(mod, fn, src) for mod, fn, src, table in blocks(path)):
                    stale.append(path)
            elif regenerate(path):
                stale.append(path)
    except (FileNotFoundError, ValueError, KeyError) as exc:  # a result file missing or not what the table reads
        print(f"docs_tables: error: {exc}", file=sys.stderr)
        return 1
    for path in stale:
        print(f"{path.relative_to(REPO)}: {'stale' if args.check else 'rewritten'}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
