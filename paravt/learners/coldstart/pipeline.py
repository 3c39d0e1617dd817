"""The cold start: perception stage, then SFT on teacher episodes, into one checkpoint every RL arm shares.

    perception (``paravt.learners.coldstart.perception``)  ->  SFT on teacher episodes (``paravt.learners.coldstart.teacher``)  ->  RUN/coldstart/model

The paper starts PARA-GRPO and every ablation from one SFT checkpoint; so does this: the cold start does not
depend on the RL arm (no forced think prefix: the teacher writes ``<think>\\n`` itself, so the same model
continues naturally after a forced one; frame budgets drawn from the gating choices, so the data holds both
answer-from-overview and parallel-crop episodes), and ``paravt repro`` runs it once for all arms.
"""

from __future__ import annotations

import json
import logging
import random
import time
from pathlib import Path
from typing import Any

import torch

from paravt.learners.coldstart.perception import build_examples, example_losses, train_perception
from paravt.learners.coldstart.sft import progress_bar, run_scripted_episode, sft_losses, train_cross_entropy
from paravt.learners.coldstart.store import ColdStartStore
from paravt.learners.coldstart.teacher import (
    CHECK_TEXT,
    GUESS_TEXT,
    GUESS_TEXT_AFTER_CROPS,
    RECROP_TEXT,
    TeacherMiss,
    crop_turn,
    first_turn,
    needed_events,
)
from paravt.learners.config import TrainConfig
from paravt.learners.interrupts import commit_section, raise_if_requested
from paravt.learners.trajectory import Trajectory
from paravt.policies.hf import HFPolicy
from paravt_env import EnvConfig, VideoToolEnv
from paravt_env.data import VideoQASample
from paravt_env.gating import gated_frame_budget

logger = logging.getLogger(__name__)


TEACHER_KEYS = ("frame_budget", "max_turns", "max_parallel", "crop_fps", "crop_max_frames", "min_pixels", "max_pixels",
                "prompt_mode", "dispatch", "crop_budget")  # fmt: skip
"""What the teacher's env takes from the run's: its budgets, its dispatch mode and its prompt (a recipe that
trains for sequential dispatch, ``env.dispatch: sequential``, gets a teacher that crops one window a turn). The
rest is the env's defaults (our protocol, crop frames back, the released reward): the cold start does not depend
on the RL algorithm."""


def teacher_env_config(cfg: TrainConfig) -> EnvConfig:
    return EnvConfig(**{k: getattr(cfg.env, k) for k in TEACHER_KEYS}, seed=cfg.seed)


def teacher_episodes(policy: HFPolicy, samples: list[VideoQASample], cfg: TrainConfig, *, progress: bool = False,
                     store: ColdStartStore | None = None, save_every_s: float | None = None) -> tuple[list[Trajectory], int]:  # fmt: skip
    """``cfg.sft.episodes`` teacher episodes over ``samples`` (cycled, each pass with new frame budgets drawn
    like nFrames Gating draws them), played through the real env and tokenised like rollouts, their frames
    kept compressed (``Encoded.compact``: the processed pixels of 900 episodes were gigabytes). Where the
    overview misses the needle the teacher crops in ``sft.crop_rate`` of the episodes and otherwise guesses
    one of the answers its question kind has in the data; where it shows the needle the teacher crops around it
    to check in ``sft.check_rate`` of them. Returns the trajectories and how many episodes were
    dropped because their frames showed no needle. With ``store``, the episodes go to disk a shard at a time
    (every ``save_every_s`` seconds, default ``sft.save_every_s``, at the end, and on Ctrl-C) and saved shards are
    loaded, not replayed."""
    save_every_s = cfg.sft.save_every_s if save_every_s is None else save_every_s
    env = VideoToolEnv(samples, teacher_env_config(cfg))
    rng = random.Random(f"teacher:{cfg.seed}")
    widen = cfg.sft.coverage == "widen"
    out: list[Trajectory] = []
    missed = begin = 0
    for shard in store.teacher_shards() if store is not None else []:
        out += _bound(shard["episodes"], policy)
        missed += shard["missed"]
        begin = shard["end"]
        rng.setstate(shard["rng"])
    pending: dict[str, Any] = {"start": begin, "episodes": [], "missed": 0, "rng": rng.getstate()}

    def flush() -> None:  # the episodes since the last shard, with the teacher's RNG after the last of them
        if store is not None and pending["end"] > pending["start"]:
            store.save(f"teacher_{pending['start']:06d}", dict(pending))
            pending.update(start=pending["end"], episodes=[], missed=0)

    pending["end"] = begin
    answers: dict[str, list[str]] = {}
    for s in samples:
        answers.setdefault(s.question_type, []).append(s.answer)
    answers = {k: sorted(set(v)) for k, v in answers.items()}
    # A check crops one window around the frame that showed the needle: no longer than the crop's frames
    # cover at crop_fps before crop_max_frames thins them (16 s at 0.5 fps and 8 frames), or a 2 s needle
    # falls between two frames and the episode is dropped.
    check_window = min(cfg.sft.window, cfg.env.crop_max_frames / cfg.env.crop_fps)
    # Calls a turn: as many as one parallel turn runs, one under sequential dispatch (the coverage then goes on a
    # window a turn: sft.coverage "continue"), never more than the episode's crop budget.
    per_turn = 1 if cfg.env.dispatch == "sequential" else cfg.env.max_parallel
    if cfg.env.crop_budget is not None:
        per_turn = min(per_turn, cfg.env.crop_budget)
    turn_limit = env.unwrapped.config.turn_limit
    one_a_turn = cfg.env.dispatch == "sequential"
    bar = progress_bar(cfg.sft.episodes, "teacher episodes", progress, initial=begin, unit="episode")
    last_save = time.monotonic()
    try:
        for i in range(begin, cfg.sft.episodes):
            raise_if_requested()  # an interrupt a finalizer swallowed
            sample = samples[i % len(samples)]
            k = gated_frame_budget(sample.id, i // len(samples), cfg.seed, tuple(cfg.sft.frame_budgets))
            guess = rng.choice(answers[sample.question_type]) if rng.random() >= cfg.sft.crop_rate else None
            # drawn only when asked for, so recipes without checks (or late guesses) keep their episodes
            check = cfg.sft.check_rate > 0 and rng.random() < cfg.sft.check_rate
            late_guess = rng.choice(answers[sample.question_type]) if cfg.sft.guess_after_miss else None

            needed = needed_events(sample)
            shown: list[float] = []  # every frame time the episode showed before this turn's (multi-event tasks)

            def turn(t: int, obs: dict[str, Any], sample=sample, guess=guess, check=check, late_guess=late_guess,
                     needed=needed, shown=shown) -> str:  # fmt: skip
                duration = env.unwrapped._reader.duration
                times = [float(x) for x in obs["timestamps"]]
                try:
                    if t == 0:
                        return first_turn(sample, times, duration, window=cfg.sft.window, max_calls=per_turn,
                                          needed=needed, guess=guess, check=check, check_window=check_window,
                                          widen=widen, one_a_turn=one_a_turn)  # fmt: skip
                    last = t + 1 >= turn_limit  # a turn must be left for the answer
                    return crop_turn(sample, times, duration, window=cfg.sft.window, max_calls=per_turn, last=last,
                                     needed=needed, guess=late_guess, recrop=cfg.sft.recrop, widen=widen,
                                     one_a_turn=one_a_turn, earlier=shown if needed > 1 else ())  # fmt: skip
                finally:
                    shown.extend(times)

            try:
                tr = run_scripted_episode(env, policy, turn, options={"sample": sample, "frame_budget": k})
                tr.encoded = tr.encoded.compact()
                kept: list[Trajectory] = [tr]
            except TeacherMiss:
                kept = []
            with commit_section():  # the episode is recorded whole with the RNG state after it, or not at all
                out += kept
                pending["episodes"] += kept
                missed += 1 - len(kept)
                pending["missed"] += 1 - len(kept)
                pending.update(end=i + 1, rng=rng.getstate())
            if bar:
                bar.update(1)
            if time.monotonic() - last_save >= save_every_s:
                flush()
                last_save = time.monotonic()
        flush()
    except KeyboardInterrupt:
        flush()  # the episodes completed so far
        raise
    finally:
        env.close()
        if bar:
            bar.close()
    return out, missed


def train_sft(policy: HFPolicy, data: list[Trajectory], cfg: TrainConfig, *, rehearsal: list | None = None,
              progress: bool = False, store: ColdStartStore | None = None) -> list[dict]:
    """Cross-entropy on the assistant's tokens: ``sft.steps`` AdamW steps of ``sft.batch`` episodes each,
    reshuffled every pass, plus ``sft.rehearsal`` perception examples per step from ``rehearsal``."""
    s = cfg.sft
    return train_cross_entropy(policy, data, sft_losses, steps=s.steps, batch=s.batch, lr=s.lr,
                               grad_clip=cfg.optim.grad_clip, seed=cfg.seed, stage="sft", rehearsal=rehearsal or (),
                               rehearsal_losses=example_losses, rehearse=s.rehearsal, progress=progress,
                               schedule=s.lr_schedule, warmup_ratio=s.warmup_ratio, weight_decay=s.weight_decay,
                               **_stage_checkpoints(store, "sft", s.save_every_s))  # fmt: skip


def _stage_checkpoints(store: ColdStartStore | None, stage: str, save_every_s: float = 60.0) -> dict[str, Any]:
    """``train_cross_entropy``'s resume / save arguments for ``stage`` under ``store`` (none without one)."""
    if store is None:
        return {}
    return {"resume": store.load(stage), "save_state": lambda state: store.save(stage, state),
            "save_every_s": save_every_s}


def run_cold_start(policy: HFPolicy, samples: list[VideoQASample], cfg: TrainConfig, out: str | Path, *,
                   perception_samples: list[VideoQASample] | None = None, progress: bool = False,
                   resume: bool = False) -> dict[str, Any]:  # fmt: skip
    """Both stages on ``policy`` (in place); their loss rows go to ``OUT/sft_metrics.jsonl``. Returns a summary
    (steps, episodes, drops, final losses). Progress is saved in ``OUT/coldstart/partial``
    (``paravt.learners.coldstart.store``) as it goes; with ``resume`` it is continued from there, to the same result
    as an uninterrupted cold start (without, an existing partial state is refused)."""
    out = Path(out)
    store = ColdStartStore(out)
    if store.exists() and not resume:
        raise FileExistsError(f"{out} holds an interrupted cold start ({store.describe()}): pass --resume to "
                              "continue it, or use a new --out")  # fmt: skip
    if store.exists():
        logger.warning("resuming the cold start from %s: %s", store.root, store.describe())
    torch.manual_seed(cfg.seed)
    was_think = policy.think_prefix
    policy.think_prefix = False  # the teacher writes "<think>\n" itself: the cold start is arm-independent
    rows: list[dict] = []
    summary: dict[str, Any] = {}
    try:
        examples: list = []
        if cfg.perception.steps > 0:
            e = cfg.env
            examples = _bound(store.load("perception_examples"), policy)
            if examples is None:
                examples = build_examples(policy, perception_samples or samples, cfg.perception, crop_fps=e.crop_fps,
                                          crop_max_frames=e.crop_max_frames, min_pixels=e.min_pixels,
                                          max_pixels=e.max_pixels, seed=cfg.seed, progress=progress)  # fmt: skip
                store.save("perception_examples", examples)
            rows += train_perception(policy, examples, cfg.perception, grad_clip=cfg.optim.grad_clip, seed=cfg.seed,
                                     progress=progress, **_stage_checkpoints(store, "perception", cfg.sft.save_every_s))  # fmt: skip
            summary["perception"] = {"examples": len(examples), "steps": cfg.perception.steps,
                                     "final_loss": _tail_mean(rows, "perception")}  # fmt: skip
        if cfg.sft.steps > 0 and cfg.sft.data:  # the released SFT conversations (lmms-engine schema), streamed
            summary["sft"] = _streamed_sft(policy, cfg, store, rows, progress)
        elif cfg.sft.steps > 0:
            # Teacher episodes over the perception pool, never over the RL prompts: the paper's SFT and RL
            # sets are disjoint, and a 2-layer model memorises the answer of a video it was taught on (measured:
            # RL-prompt accuracy 0.75 without a crop vs 0.45 held-out), which leaves RL nothing to gain from
            # the tool on them. Without a pool (real data) the training videos are all there is.
            data, missed = teacher_episodes(policy, list(perception_samples or samples), cfg, progress=progress,
                                            store=store)  # fmt: skip
            calls = sum(1 for t in data if t.tool_calls)
            guesses = sum(1 for t in data if not t.tool_calls and GUESS_TEXT in t.turn_texts[0])
            checks = sum(1 for t in data if t.tool_calls and CHECK_TEXT in t.turn_texts[0])
            recrops = sum(1 for t in data if any(RECROP_TEXT in x for x in t.turn_texts[1:]))
            late_guesses = sum(1 for t in data if t.tool_calls and GUESS_TEXT_AFTER_CROPS in t.turn_texts[-1])
            from_overview = sum(1 for t in data if not t.tool_calls and GUESS_TEXT not in t.turn_texts[0])
            rows += train_sft(policy, data, cfg, rehearsal=examples, progress=progress, store=store)
            summary["sft"] = {"episodes": len(data), "dropped": missed, "with_crops": calls, "checks": checks,
                              "guesses": guesses, "answered_from_overview": from_overview, "recrops": recrops,
                              "guesses_after_crops": late_guesses, "steps": cfg.sft.steps,
                              "final_loss": _tail_mean(rows, "sft")}  # fmt: skip
    finally:
        policy.think_prefix = was_think
    with open(out / "sft_metrics.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    logger.info("%s", describe_cold_start(summary))
    return summary


def describe_cold_start(summary: dict[str, Any]) -> str:
    """``run_cold_start``'s summary in words (the log line; ``RUN/coldstart/summary.json`` keeps the figures)."""
    parts = []
    if "perception" in summary:
        p = summary["perception"]
        parts.append(f"perception stage: {p['steps']} steps on {p['examples']} examples, final loss {p['final_loss']:.3f}")
    sft = summary.get("sft")
    if sft and "episodes" in sft:
        among = [f"{sft[k]} {words}" for k, words in (("checks", "check"), ("recrops", "crop a second round"),
                                                       ("guesses_after_crops", "guess after cropping")) if sft.get(k)]  # fmt: skip
        kinds = [f"{sft['with_crops']} crop" + (f" ({', '.join(among)})" if among else ""),
                 f"{sft['answered_from_overview']} answer from the overview", f"{sft['guesses']} guess"]  # fmt: skip
        dropped = f" ({sft['dropped']} dropped: their frames showed no needle)" if sft.get("dropped") else ""
        parts.append(f"SFT: {sft['steps']} steps on {sft['episodes']} teacher episodes{dropped}, of which "
                     f"{', '.join(kinds)}; final loss {sft['final_loss']:.3f}")  # fmt: skip
    elif sft:
        parts.append(f"SFT on the released data: {sft['steps']} steps on {sft['rows_trained']} rows "
                     f"({sft['dropped_overlong']} too long, {sft['skipped_unreadable']} unreadable), "
                     f"final loss {sft['final_loss']:.3f}")  # fmt: skip
    return "cold start done: " + ("; ".join(parts) if parts else "nothing to train")


def _streamed_sft(policy: HFPolicy, cfg: TrainConfig, store: ColdStartStore, rows: list[dict], progress: bool) -> dict:
    from paravt.learners.coldstart.sft_stream import train_streaming_sft

    s = cfg.sft
    losses, counts = train_streaming_sft(
        policy, s.data, steps=s.steps, batch=s.batch, pack_tokens=s.pack_tokens, lr=s.lr, grad_clip=cfg.optim.grad_clip,
        seed=cfg.seed, schedule=s.lr_schedule, warmup_ratio=s.warmup_ratio, weight_decay=s.weight_decay,
        video_root=s.video_root, limit=s.data_limit, resume=store.load("sft_stream"),
        save_state=lambda state: store.save("sft_stream", state), save_every_s=s.save_every_s, progress=progress,
    )  # fmt: skip
    rows += losses
    return {"rows_trained": counts.trained, "dropped_overlong": counts.overlong, "skipped_unreadable": counts.unreadable,
            "pack_tokens": s.pack_tokens, "steps": s.steps, "final_loss": _tail_mean(rows, "sft")}  # fmt: skip


def _bound(items: list | None, policy: HFPolicy) -> list | None:
    """Loaded examples or episodes, their compressed frames bound again to ``policy``'s image processing."""
    for item in items or ():
        item.encoded.bind(policy.process_images)
    return items


def _tail_mean(rows: list[dict], stage: str, n: int = 20) -> float:
    vals = [r["loss"] for r in rows if r["stage"] == stage][-n:]
    return sum(vals) / len(vals) if vals else float("nan")
