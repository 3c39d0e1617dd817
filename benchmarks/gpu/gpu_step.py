"""What one PARA-GRPO step costs at real model size: rollout, reference and update time, tokens per second, peak
memory and the update's model FLOP utilisation, printed per step and written to ``OUT/gpu_step.json``.

    python -m benchmarks.gpu.gpu_step --out runs/gpu_step                      # recipe gpu_smoke: Qwen3-VL-2B, CUDA
    python -m benchmarks.gpu.gpu_step --out runs/gpu_step_8b model.size=8b     # the 8B (an H200; see docs/gpu.md)
    python -m benchmarks.gpu.gpu_step --out X --quick model.device=cpu --steps 2   # the pipeline's check on a CPU (~2 min)

The recipe's cold start (``gpu_smoke``: a few SFT steps on teacher episodes with parallel crops) runs first and is
timed as a whole; then ``--steps`` RL steps of the local trainer (``Trainer.rl_step``: batched rollouts in the env,
one PPO-clipped update against the frozen reference), nothing saved. Per step: generated tokens/s in the rollout,
training tokens/s in the update (tokens of the sequences forwarded and backwarded), seconds split into rollout /
reference / update (``paravt.learners.step_clock``, synchronised on CUDA), peak memory, and MFU = 3 x forward FLOPs of the
trained sequences (``paravt.learners.model_flops``) / (update seconds x the GPU's dense bf16 peak; ``--peak-tflops`` for
a GPU not in the table, none on CPU). The summary averages the steps after the first (the first pays for
allocator growth and kernel selection) when there are several. A step that runs out of GPU memory ends the run
with exit 1, its step (0: the cold start) and the peak allocation recorded (``out_of_memory``): what does not fit
is a figure too.

The benchmark is for GPUs. ``--quick`` shrinks the recipe (``QUICK``: a tiny model, two 30-40 s videos, two
rollouts of 24 new tokens, a one-step cold start) so that the whole pipeline runs in minutes anywhere, a CPU
included; its figures say nothing about real size. On a CPU at a published size it says so and refuses.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

QUICK = ("model.size=tiny", "model.dtype=fp32", "rollout.group_size=2",
         "rollout.max_new_tokens=24", "env.frame_budget=4", "env.crop_max_frames=4", "data.size=112", "data.synth_n=2",
         "data.min_duration=30", "data.max_duration=40", "sft.episodes=1", "sft.steps=1", "sft.frame_budgets=[4]")  # fmt: skip
"""``--quick``: the recipe at tiny size, minutes on 2 CPU cores (the user's overrides still win)."""

FIGURES = ("rollout_s", "reference_s", "update_s", "wall_s", "tokens_per_s", "train_tokens", "train_tokens_per_s",
           "peak_memory_mb", "mfu", "tool_calls_per_rollout", "generated_tokens")  # fmt: skip


def _measured_trainer():
    """The local trainer, remembering the forward FLOPs of what each update trained on."""
    from paravt.learners.advantages import trained_trajectories
    from paravt.learners.model_flops import FlopModel
    from paravt.learners.trainer import Trainer

    class MeasuredTrainer(Trainer):
        last_forward_flops = 0

        def update(self, groups, **kwargs):  # noqa: ANN001, ANN003, ANN202
            flops = FlopModel.of(self.policy.model)
            trained = trained_trajectories(groups, self.cfg)
            self.last_forward_flops = sum(flops.sequence_flops(tr.encoded) for tr in trained)
            return super().update(groups, **kwargs)

    return MeasuredTrainer


def run(cfg, out: Path, steps: int, peak_tflops: float | None, progress: bool = True,  # noqa: ANN001
        engines: tuple[str, ...] = ("cached",), watch_every: float | None = None) -> dict[str, Any]:
    import torch
    import transformers

    from paravt.learners.model_flops import peak_flops
    from paravt_env.memory import release_free_memory

    trainer = _measured_trainer()(cfg, out, progress=progress)
    try:
        device = trainer.policy.device
        peak = peak_tflops * 1e12 if peak_tflops else peak_flops(device)

        def out_of_memory(step: int, exc: BaseException) -> dict[str, Any]:
            failure = {"step": step, "error": str(exc).splitlines()[0],
                       "peak_memory_mb": torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None}  # fmt: skip
            print(f"step {step}: out of memory ({failure['error']})", flush=True)
            return failure

        rows, failure = [], None
        t0 = time.perf_counter()
        try:  # step 0: the cold start (and the frozen reference, made before the first step as train() makes it)
            trainer.cold_start()
            if cfg.grpo.kl_coef > 0:
                trainer._reference()
        except torch.OutOfMemoryError as exc:  # what does not fit is a finding: its peak is reported
            failure = out_of_memory(0, exc)
        cold_start_s = time.perf_counter() - t0
        # said at once: a run cut off by its time limit still tells what its cold start cost
        print(f"cold start{' (out of memory)' if failure else ''}: {cold_start_s:.1f} s", flush=True)
        # Several engines measure from one cold start, one after another (the first pays for allocator growth
        # and kernel selection): "generate" is model.generate, the path before the rollout engine.
        with decode_watch(trainer.policy, watch_every):  # the rollout engine's progress, every S seconds
            for engine in () if failure else engines:
                trainer.policy.engine = engine
                for _ in range(steps):
                    try:
                        row = trainer.rl_step()
                    except torch.OutOfMemoryError as exc:
                        failure = out_of_memory(trainer.step + 1, exc)
                        break
                    flops = 3 * trainer.last_forward_flops
                    row["model_tflops"] = flops / 1e12
                    row["mfu"] = flops / (row["update_s"] * peak) if peak and row["update_s"] > 0 else None
                    row["generated_tokens"] = row["tokens_per_s"] * row["rollout_s"]
                    rows.append({"engine": engine, **{k: row.get(k) for k in ("step", *FIGURES, "model_tflops")}})
                    _print_row(rows[-1])
                    release_free_memory(collect=True)
                if failure:
                    break
        by_engine = {engine: _summary([r for r in rows if r["engine"] == engine]) for engine in engines}
        params = sum(p.numel() for p in trainer.policy.model.parameters())
        return {
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
            "torch": torch.__version__, "transformers": transformers.__version__, "parameters": params,
            "model": {"size": cfg.model.size, "path": cfg.model.path, "dtype": cfg.model.dtype,
                      "gradient_checkpointing": cfg.model.gradient_checkpointing},
            "peak_flops": peak, "cold_start_s": cold_start_s, "steps": rows,
            "summary": by_engine[engines[0]][0], "summary_over": by_engine[engines[0]][1],
            "by_engine": {e: {"summary": s, "summary_over": over} for e, (s, over) in by_engine.items()},
            "out_of_memory": failure,
        }  # fmt: skip
    finally:
        trainer.close()


def _summary(rows: list[dict[str, Any]]) -> tuple[dict[str, float], list[int]]:
    """The figures' means over the steps after an engine's first (all of them when it ran one), and those steps."""
    measured = rows[1:] if len(rows) > 1 else rows
    summary = {k: statistics.fmean(r[k] for r in measured) for k in FIGURES
               if measured and all(r.get(k) is not None for r in measured)}  # fmt: skip
    return summary, [r["step"] for r in measured]


@contextlib.contextmanager
def decode_watch(policy: Any, seconds: float | None):  # noqa: ANN401
    """Every ``seconds`` (None or 0: never) while the rollout engine decodes, its progress on stdout: decode steps,
    tokens, and the rate since the last line. The first GPU runs' rollouts were cut off by the call's limit with
    nothing to say how far they had come."""
    if not seconds:
        yield
        return
    import threading

    done = threading.Event()

    def watch() -> None:
        stats = policy.cached.stats
        t0 = last_t = time.perf_counter()
        last_steps, last_tokens = stats["decode_steps"], stats["decoded_tokens"]
        while not done.wait(seconds):
            now, steps, tokens = time.perf_counter(), stats["decode_steps"], stats["decoded_tokens"]
            if steps != last_steps:
                dt = now - last_t
                print(f"[{now - t0:.0f} s] decoding: {steps} steps, {tokens} tokens so far; last {dt:.0f} s: "
                      f"{1e3 * dt / (steps - last_steps):.1f} ms a step, {(tokens - last_tokens) / dt:.0f} tok/s", flush=True)  # fmt: skip
            last_t, last_steps, last_tokens = now, steps, tokens

    thread = threading.Thread(target=watch, name="decode_watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@contextlib.contextmanager
def stack_dumps(seconds: float | None):
    """Every ``seconds`` (None or 0: never), every thread's Python stack to stderr: on a leased GPU, a run cut off by
    its time limit still says where its time went (the first GPU run lost a whole step to an unknown phase)."""
    if not seconds:
        yield
        return
    faulthandler.dump_traceback_later(seconds, repeat=True, file=sys.stderr)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def _print_row(r: dict[str, Any]) -> None:
    mfu = f"{100 * r['mfu']:.1f} %" if r.get("mfu") is not None else "-"
    print(f"step {r['step']} ({r['engine']}): rollout {r['rollout_s']:.1f} s ({r['tokens_per_s']:.0f} generated tok/s), reference "
          f"{r['reference_s']:.1f} s, update {r['update_s']:.1f} s ({r['train_tokens_per_s']:.0f} train tok/s, MFU {mfu}), "
          f"wall {r['wall_s']:.1f} s, peak {r['peak_memory_mb'] / 1024:.1f} GiB, "
          f"{r['tool_calls_per_rollout']:.2f} crops/rollout", flush=True)  # fmt: skip


def load_runnable_recipe(parser: argparse.ArgumentParser, recipe: str, overrides: list[str]):  # noqa: ANN201
    """The recipe with its overrides, or a usage error naming what is wrong: a bad key or value, or a CUDA device
    on a machine whose torch sees no GPU (the GPU benchmarks' shared front door)."""
    from paravt.learners.config import load_recipe

    try:
        cfg = load_recipe(recipe, overrides)
    except (ValueError, FileNotFoundError) as exc:
        parser.error(str(exc))
    if cfg.model.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            parser.error(f"recipe {recipe} runs on {cfg.model.device} but torch sees no GPU here; "
                         "pass model.device=cpu (with model.size=tiny) to run it on the CPU")  # fmt: skip
    return cfg


def step_config(parser: argparse.ArgumentParser, args: argparse.Namespace):  # noqa: ANN201
    """The recipe to measure and the overrides it was built with (``QUICK`` first under ``--quick``, so that the
    user's overrides win); a published size on a CPU is a usage error that names the way out."""
    overrides = [*QUICK, *args.overrides] if args.quick else list(args.overrides)
    cfg = load_runnable_recipe(parser, args.recipe, overrides)
    if cfg.model.device == "cpu" and cfg.model.size != "tiny":
        parser.error(f"gpu_step measures a {cfg.model.size} model's step, which is for GPUs: on a CPU, pass --quick "
                     "(the pipeline at tiny size, minutes) or model.size=tiny")  # fmt: skip
    return cfg, overrides


def _engines(text: str) -> tuple[str, ...]:
    from paravt.policies.hf import ENGINES

    engines = tuple(e.strip() for e in text.split(","))
    bad = [e for e in engines if e not in ENGINES]
    if bad or len(set(engines)) != len(engines):
        raise argparse.ArgumentTypeError(f"engines are distinct names of {', '.join(ENGINES)}; got {text!r}")
    return engines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="run directory (its cold start and gpu_step.json)")
    p.add_argument("--recipe", default="gpu_smoke")
    p.add_argument("--steps", type=int, default=None, help="RL steps to measure (default: the recipe's steps)")
    p.add_argument("--peak-tflops", type=float, default=None, help="the device's dense peak, for MFU (default: by GPU name)")
    p.add_argument("--quick", action="store_true", help="the recipe at tiny size (QUICK): a check of the pipeline in minutes, on a CPU too")
    p.add_argument("--engine", default="cached", type=_engines,
                   help="how rollouts generate: cached (the rollout engine, default) or generate (model.generate, the "
                        "path before it); several, comma-separated (cached,generate), each measure --steps steps "
                        "in turn from the one cold start")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--stacks-every", type=float, default=None, metavar="S",
                   help="print every thread's Python stack to stderr every S seconds (where a long run spends its time), "
                        "and the rollout engine's decode progress to stdout as often")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    args = p.parse_args(argv)
    cfg, overrides = step_config(p, args)
    steps = cfg.steps if args.steps is None else args.steps
    if steps < 1:
        p.error(f"--steps must be at least 1, got {steps}")
    out = Path(args.out)
    # The cold start runs first and is timed as a whole: say so up front, so that its progress bars make sense.
    print(f"gpu_step: recipe {args.recipe}{' (--quick)' if args.quick else ''}, {cfg.model.size} model on "
          f"{cfg.model.device}: its cold start first (timed as a whole), then {steps} measured RL step(s)", flush=True)  # fmt: skip
    with stack_dumps(args.stacks_every):
        result = run(cfg, out, steps, args.peak_tflops, progress=not args.no_progress, engines=args.engine,
                     watch_every=args.stacks_every)
    result["recipe"], result["overrides"], result["quick"], result["engines"] = args.recipe, overrides, args.quick, args.engine
    (out / "gpu_step.json").write_text(json.dumps(result, indent=2) + "\n")
    if result["out_of_memory"]:
        oom = result["out_of_memory"]
        peak = "" if oom["peak_memory_mb"] is None else f", peak {oom['peak_memory_mb'] / 1024:.1f} GiB"
        print(f"\n{result['device']}, {result['parameters'] / 1e6:,.1f} M parameters: out of memory in step {oom['step']}{peak}"
              f" -> {out / 'gpu_step.json'}")  # fmt: skip
        return 1
    print(f"\n{result['device']}, {result['parameters'] / 1e6:,.1f} M parameters, cold start {result['cold_start_s']:.0f} s")
    for engine, measured in result["by_engine"].items():
        s = measured["summary"]
        mfu = f"{100 * s['mfu']:.1f} %" if "mfu" in s else "- (no peak known for this device)"
        print(f"{engine} engine, mean of steps {measured['summary_over']}:\n"
              f"  rollout {s['rollout_s']:.1f} s | reference {s['reference_s']:.1f} s | update {s['update_s']:.1f} s | "
              f"wall {s['wall_s']:.1f} s\n  generated {s['tokens_per_s']:.0f} tok/s | trained {s['train_tokens_per_s']:.0f} tok/s | "
              f"peak memory {s['peak_memory_mb'] / 1024:.1f} GiB | update MFU {mfu}")  # fmt: skip
    print(f"  -> {out / 'gpu_step.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
