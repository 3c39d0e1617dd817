"""One OpenRLHF executor episode with the local engine, at any model size and on any device, checked for the
token / action-range / log-prob alignment OpenRLHF trains on (``paravt.learners.adapters.openrlhf.alignment``).

    python -m benchmarks.gpu.openrlhf_episode                                   # gpu_smoke's model: Qwen3-VL-2B, CUDA
    python -m benchmarks.gpu.openrlhf_episode model.size=tiny model.device=cpu model.dtype=fp32   # on the CPU

The model, the video (the recipe's first synthetic sample) and the env settings come from ``--recipe`` (default
``gpu_smoke``: 64-frame overview, parallel crops) with ``key=value`` overrides. ``--engine scripted`` (default)
plays a main agent that calls ``crop_video`` twice in parallel, then answers, each turn scored by the model (a
random-weight model writes no valid call); ``--engine sampled`` lets the model write every turn. Exit 1 when the
episode does not line up: a structural problem, or a log-prob off by more than ``--tolerance`` (default 1e-4 in
fp32; in bf16 none unless given: generation with a KV cache and one full forward pass round differently, and the
figure is what is measured).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

SCRIPT = [
    '<think>Two windows at once.</think><tool_call>{"name": "crop_video", "arguments": {"start_time": 2, "end_time": 22}}'
    '</tool_call><tool_call>{"name": "crop_video", "arguments": {"start_time": 40, "end_time": 60}}</tool_call>',
    "<think>I saw enough of the video.</think><answer>red</answer>",
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="gpu_smoke")
    p.add_argument("--engine", choices=["scripted", "sampled"], default="scripted")
    p.add_argument("--mode", choices=["frames", "subagent"], default="frames", help="what the crops return")
    p.add_argument("--tolerance", type=float, default=None, help="largest |Δ log-prob| accepted")
    p.add_argument("--out", default=None, help="also write the report as JSON here")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    args = p.parse_args(argv)
    from benchmarks.gpu.gpu_step import load_runnable_recipe

    cfg = load_runnable_recipe(p, args.recipe, args.overrides)
    from paravt.learners.adapters.openrlhf import run_local_episode
    from paravt.learners.adapters.openrlhf.alignment import check_alignment
    from paravt.learners.adapters.openrlhf.local_engine import ScriptedEngine
    from paravt.learners.run_setup import resolve_data, resolve_model_path
    from paravt.policies.hf import HFPolicy

    model = resolve_model_path(cfg)
    sample = resolve_data(cfg)[0]
    engine = (lambda policy: ScriptedEngine(policy, SCRIPT)) if args.engine == "scripted" else None
    e = cfg.env
    t0 = time.perf_counter()
    result = run_local_episode(model, sample, engine=engine, device=cfg.model.device, dtype=cfg.model.dtype,
                               temperature=cfg.rollout.temperature, max_new_tokens=cfg.rollout.max_new_tokens,
                               max_length=1 << 20, frame_budget=e.frame_budget, max_turns=e.max_turns,
                               tool_result=args.mode, crop_fps=e.crop_fps, crop_max_frames=e.crop_max_frames,
                               min_pixels=e.min_pixels, max_pixels=e.max_pixels)  # fmt: skip
    episode_s = time.perf_counter() - t0
    policy = HFPolicy.from_pretrained(model, device=cfg.model.device, dtype=cfg.model.dtype, temperature=cfg.rollout.temperature)
    report = check_alignment(policy, result)
    tolerance = args.tolerance if args.tolerance is not None else (1e-4 if cfg.model.dtype == "fp32" else None)
    if tolerance is not None and report["max_abs_diff"] is not None and report["max_abs_diff"] > tolerance:
        report["problems"].append(f"max |Δ log-prob| {report['max_abs_diff']:.3g} > tolerance {tolerance:g}")
    report.update(device=str(policy.device), dtype=cfg.model.dtype, size=cfg.model.size, engine=args.engine, mode=args.mode,
                  tokens=len(result["observation_tokens"]), action_ranges=result["action_ranges"],
                  kappa=result["extra_logs"].get("kappa"), episode_s=episode_s, tolerance=tolerance)  # fmt: skip
    diff = "-" if report["max_abs_diff"] is None else f"{report['max_abs_diff']:.2e} (mean {report['mean_abs_diff']:.2e})"
    print(f"{report['size']} {report['dtype']} on {report['device']}, {args.engine} {args.mode} episode: {report['tokens']} "
          f"tokens, {len(report['action_ranges'])} action ranges, {report['action_tokens']} action tokens, "
          f"κ {report['kappa']}, {episode_s:.1f} s; max |Δ log-prob| {diff}")  # fmt: skip
    for problem in report["problems"]:
        print(f"NOT ALIGNED: {problem}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
