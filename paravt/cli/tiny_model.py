"""``paravt tiny-model``: build a tiny random-weight Qwen-VL checkpoint locally (tests, the CPU default)."""

from __future__ import annotations

import argparse

ARCHS = ("qwen3_vl", "qwen2_5_vl")  # paravt.policies.tiny_model.ARCHS, repeated so --help stays light
SIZES = ("tiny", "2b", "8b")  # paravt.policies.tiny_model.SIZES


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("--out", required=True, metavar="DIR", help="directory to write the checkpoint into")
    p.add_argument("--arch", choices=ARCHS, default="qwen3_vl", help="model family (default qwen3_vl)")
    p.add_argument(
        "--seed", type=int, default=0, help="weight initialisation seed: same seed, same bytes (default 0)"
    )
    p.add_argument("--size", choices=SIZES, default="tiny",
                   help="tiny (default), or a published Qwen3-VL size with random weights, bf16 (2b: 4.3 GB, 8b: 17.5 GB)")
    p.add_argument("--device", default="cpu", help="where a published size's weights are initialised (cuda: faster)")
    p.add_argument("--overwrite", action="store_true", help="replace the contents of a non-empty --out")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from paravt.policies.tiny_model import build_tiny_model

    out = build_tiny_model(args.out, arch=args.arch, seed=args.seed, overwrite=args.overwrite, size=args.size,
                           device=args.device)  # fmt: skip
    meta = json.loads((out / "tiny_model.json").read_text())
    size_mb = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 1e6
    print(
        f"wrote {out}: {meta['arch']} ({meta['model_class']}), "
        f"{meta['parameters']:,} parameters, {size_mb:.1f} MB"
    )
    return 0
