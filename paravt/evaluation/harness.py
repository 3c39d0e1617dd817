"""``paravt eval``: any policy through the env on a dataset, the paper's protocol, resumable.

Each finished sample is appended to ``DIR/results.jsonl`` at once (flushed and fsynced); rerunning with the
same ``--out`` skips every sample already there, so an interrupted run loses at most the episodes in flight
and never counts a sample twice. A sample that fails (a corrupt video, a server error after retries) is
recorded with its error and counted, never aborts the run; failures that may not recur (server unreachable,
timeout, 5xx) are marked ``transient`` and run again on resume. One process at a time writes ``DIR`` (an OS
lock on ``DIR/eval.lock``). ``DIR/summary.json``, ``DIR/report.md`` and ``DIR/report.png`` are rewritten at
the end from the whole ``results.jsonl``.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from paravt.evaluation.fingerprints import fingerprint, input_identity, policy_settings
from paravt.evaluation.progress import stage_bar
from paravt.evaluation.report import (
    summarize,
    write_report,
)
from paravt.evaluation.scoring import (
    grounding_span,
    is_correct,
    predicted_span,
    release_result,
    score_prediction,
)
from paravt.evaluation.store import (
    CONFIG,
    RESULTS,
    ResultsWriter,
    SampleResult,
    check_config,
    exclusive_lock,
    is_transient,
    read_results,
)
from paravt_env import EnvConfig, VideoQASample, VideoToolEnv, storage
from paravt_env.episodes import episode_class, episode_of, resolve_protocol
from paravt_env.play import play_episode
from paravt_env.protocol import THINK_PREFIX
from paravt_env.records import episode_record, with_cost
from paravt_env.tools import PENDING_SUBAGENT, PendingSubAgent

RECORDED = ("dispatch", "frame_budget", "max_turns", "max_parallel", "prompt_mode", "tool_result", "crop_fps",
            "crop_max_frames", "min_pixels", "max_pixels", "response_prefix", "protocol", "subtitles", "video_channel")
"""The env settings an evaluation records in ``eval_config.json`` (what its numbers depend on; resuming needs
the same)."""


BATCHED_EPISODES = 16
"""Episodes a greedy evaluation of a model in process plays at once, their turns generated as one batch (not
tuned: the main job's 40 held-out episodes in three waves; ``benchmarks/perf/test_bench_engine.py`` measures it)."""


def eval_settings(config: EnvConfig) -> dict[str, Any]:
    settings = {k: getattr(config, k) for k in RECORDED}
    for key in ("crop_budget", "turn_budget"):  # recorded only when set: evaluations made before they existed resume
        if getattr(config, key) is not None:
            settings[key] = getattr(config, key)
    return settings


OPTION_KEYS = ("frame_budget", "max_turns", "max_parallel", "crop_fps", "crop_max_frames", "max_pixels",
               "prompt_mode", "tool_result", "crop_budget", "turn_budget")  # fmt: skip
"""Env options that default to the checkpoint's policy card, then to the paper's values."""


def policy_card(spec: str) -> dict:
    """The policy card of an ``hf:DIR`` checkpoint trained here (``{}`` for anything else)."""
    if not spec.startswith("hf:"):
        return {}
    from paravt.policies.card import read_card

    path = Path(spec[3:])
    if not path.exists():
        raise FileNotFoundError(f"checkpoint directory {path} does not exist (policy {spec})")
    return read_card(path)


def eval_options(policy: str, dispatch: str | None = None, *, protocol: str = "paravt", subtitles: bool = False,
                 video_channel: str = "image_url", **given) -> EnvConfig:  # fmt: skip
    """The env of an evaluation: options given (None: not given), then the checkpoint's card, then the paper's
    eval defaults (``EnvConfig``'s); ``dispatch`` likewise (a checkpoint trained for sequential dispatch is
    evaluated under it unless told otherwise). A sub-agent mode names its sub-agent at ``evaluate``."""
    unknown = sorted(set(given) - set(OPTION_KEYS))
    if unknown:
        raise TypeError(f"unknown eval option(s) {unknown}; known: {list(OPTION_KEYS)}")
    card = policy_card(policy)
    trained = card.get("env", {})
    defaults = EnvConfig()
    pick = {}
    for key in OPTION_KEYS:
        value = given.get(key)
        pick[key] = value if value is not None else trained.get(key, getattr(defaults, key))
    pick["min_pixels"] = min(trained.get("min_pixels", defaults.min_pixels), pick["max_pixels"])
    # the protocol's own name of the prompt mode (the release's "agentic_general"), so the config says what ran
    pick["prompt_mode"] = episode_class(resolve_protocol(protocol, pick["tool_result"])).prompt_mode_name(pick["prompt_mode"])
    dispatch = dispatch if dispatch is not None else trained.get("dispatch", defaults.dispatch)
    return EnvConfig(dispatch=dispatch, response_prefix=THINK_PREFIX if card.get("think_prefix") else "", protocol=protocol,
                     subtitles=subtitles, video_channel=video_channel, force_final_answer=True,
                     subagent=PENDING_SUBAGENT if pick["tool_result"] == "subagent" else None, **pick)  # fmt: skip


def evaluate_checkpoint(model: str | Path, data: str | Path, out: str | Path, *, dispatch: str | None = None,
                        limit: int | None = None, frame_budget: int | None = None, max_new_tokens: int | None = None,
                        progress: bool = True, temperature: float = 0.0, seed: int = 0,
                        turn_budget: int | None = None) -> dict[str, Any]:  # fmt: skip
    """``paravt eval --policy hf:MODEL --data DATA --out OUT [--dispatch D] [--frame-budget K] [--temperature T
    --seed S] [--max-new-tokens N] [--turn-budget T]``: a checkpoint trained here, every other option (tokens per turn included:
    ``paravt.policies.card.turn_tokens``) from its policy card; every sample asked for counts in ``n``."""
    from paravt.evaluation.policy_specs import make_agent_factory
    from paravt_env import load_samples

    spec = f"hf:{model}"
    # A checkpoint trained under the release protocol is evaluated under it (its card says which).
    protocol = policy_card(spec).get("env", {}).get("protocol", "paravt")
    options = eval_options(spec, dispatch, protocol=protocol, frame_budget=frame_budget, turn_budget=turn_budget)
    samples = load_samples(data, strict=False, keep_missing=True)[: limit or None]
    tokens = resolve_turn_tokens(spec, max_new_tokens)
    factory, subagent = make_agent_factory(spec, max_new_tokens=tokens, tool_result=options.tool_result,
                                           temperature=temperature)  # fmt: skip
    return evaluate(samples, factory, out, options, progress=progress, subagent=subagent,
                    run_config={"policy": spec, "data": str(data), "max_new_tokens": tokens,
                                **sampling_config(temperature, seed)},
                    seed=seed if temperature > 0 else None)  # fmt: skip


def resolve_turn_tokens(spec: str, requested: int | None) -> int:
    """Tokens per turn: what was asked, else an ``hf:`` checkpoint's card (``turn_tokens``), else 2048."""
    from paravt.policies.card import DEFAULT_MAX_NEW_TOKENS, turn_tokens

    if requested is not None:
        if requested < 1:
            raise ValueError(f"--max-new-tokens must be at least 1, got {requested}")
        return int(requested)
    return turn_tokens(Path(spec[3:])) if spec.startswith("hf:") else DEFAULT_MAX_NEW_TOKENS


def sampling_config(temperature: float, seed: int) -> dict[str, Any]:
    """What a sampled evaluation adds to its ``eval_config.json`` (nothing for greedy decoding, so greedy
    evaluations made before sampling existed resume as they were)."""
    return {"temperature": float(temperature), "seed": int(seed)} if temperature > 0 else {}


def seed_episode(sample_id: str, seed: int) -> None:
    """Seed the sampling of one episode from the run's ``seed`` and the sample's id, so that a sampled evaluation
    draws the same episode for a sample however the run was interrupted and resumed (with concurrency 1:
    episodes in flight at once share torch's generator)."""
    import hashlib
    import random
    import sys

    value = int.from_bytes(hashlib.sha256(f"paravt-eval|{seed}|{sample_id}".encode()).digest()[:8], "big")
    random.seed(value)
    if "torch" in sys.modules:  # a model policy samples with torch's global generator
        sys.modules["torch"].manual_seed(value)


def pending_samples(out: str | Path, samples: Sequence[VideoQASample]) -> int:
    """How many of ``samples`` an evaluation into ``out`` would run now: those not in ``out/results.jsonl`` yet,
    or there with a transient failure (what ``evaluate`` runs). 0: a rerun only rewrites the report."""
    done = {r["id"] for r in read_results(Path(out) / RESULTS) if not r.get("transient")}
    return sum(1 for s in samples if s.id not in done)


def evaluate(
    samples: Sequence[VideoQASample],
    make_agent: Callable[[], Any],
    out: str | Path,
    options: EnvConfig | None = None,
    *,
    concurrency: int | None = None,
    progress: bool = True,
    run_config: dict[str, Any] | None = None,
    subagent: Any = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """Run every sample not yet in ``out/results.jsonl``; write the summary, report and chart; return the summary.
    ``subagent`` answers the crops of a sub-agent mode (``options.tool_result="subagent"``). ``seed``: each
    episode's sampling is seeded from it and the sample's id (``seed_episode``; sampled policies).
    ``concurrency``: episodes in flight (default ``default_concurrency``)."""
    options = options or EnvConfig()
    if subagent is not None:
        options = replace(options, subagent=subagent)
    if options.tool_result == "subagent" and isinstance(options.subagent, PendingSubAgent):
        raise ValueError('tool_result="subagent" needs a sub-agent: pass evaluate(..., subagent=...)')
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(out):
        return _evaluate(samples, make_agent, out, options, concurrency=concurrency, progress=progress,
                         run_config=run_config, seed=seed)  # fmt: skip


def default_concurrency(agent: Any, seed: int | None) -> int:
    """Episodes in flight when not asked: ``BATCHED_EPISODES`` for a greedy model in this process (their turns are
    generated together: ``paravt.policies.gather``), else 1 (a sampled evaluation draws each episode from its own
    seed, which episodes sharing torch's generator at once would not)."""
    policy = getattr(agent, "policy", None)
    return BATCHED_EPISODES if seed is None and getattr(policy, "gather", None) is not None else 1


def _evaluate(samples, make_agent, out: Path, config: EnvConfig, *, concurrency: int | None, progress: bool,
              run_config: dict[str, Any] | None, seed: int | None = None) -> dict[str, Any]:  # fmt: skip
    check_config(out, {**(run_config or {}), **eval_settings(config)})
    release = episode_of(config).release
    subagent_mode = config.tool_result == "subagent"  # each crop run is a sub-agent call (the cost's model_calls)
    # Rows that failed for a transient reason (server down, timeout) are run again; the rest are kept.
    existing = [r for r in read_results(out / RESULTS) if not r.get("transient")]
    done = {r["id"] for r in existing}
    todo = [s for s in samples if s.id not in done]
    writer = ResultsWriter(out / RESULTS, existing)
    local = threading.local()
    envs: list[VideoToolEnv] = []
    envs_lock = threading.Lock()
    write_failed = threading.Event()  # a full disk: no later episode could be kept, so none is run
    settings: dict[str, Any] = {}  # the policy's sampling settings, read off the first agent (fingerprint)
    spare: list[Any] = []  # the agent made to choose the concurrency plays the first episode
    if concurrency is None:
        spare = [make_agent()] if todo else []
        concurrency = default_concurrency(spare[0], seed) if spare else 1

    def env_for_thread() -> VideoToolEnv:
        if getattr(local, "env", None) is None:
            local.env = VideoToolEnv(list(samples), config)
            with envs_lock:
                envs.append(local.env)
        return local.env

    def run_one(sample: VideoQASample) -> dict[str, Any] | None:
        if write_failed.is_set():
            return None
        t0, started = time.perf_counter(), time.time()
        try:
            try:
                agent = spare.pop()
            except IndexError:
                agent = make_agent()
            if not settings:
                settings.update(policy_settings(agent))
            if seed is not None:
                seed_episode(sample.id, seed)
            gather = getattr(getattr(agent, "policy", None), "gather", None)
            with gather.episode() if gather is not None else contextlib.nullcontext():
                try:
                    ep = play_episode(env_for_thread(), agent, options={"sample": sample})
                finally:
                    if hasattr(agent, "end"):  # the policy's cache of this episode is dropped
                        agent.end()
            if release:  # the release's scoring of its final response
                score, prediction, answer, correct, extra = release_result(sample, ep.final_info)
            else:
                score, prediction, answer = (
                    score_prediction(ep.prediction, sample.answer, sample.question_type), ep.prediction, sample.answer
                )  # fmt: skip
                correct, extra = is_correct(score, sample.question_type), {}
            row = SampleResult(
                id=sample.id, question_type=sample.question_type, duration=sample.duration,
                prediction=prediction, answer=answer, score=score, correct=correct, reward=ep.reward,
                tool_calls=ep.tool_calls, turns=ep.turns, frame_budget=ep.frame_budget,
                wall_s=time.perf_counter() - t0, started_at=started, ended_at=time.time(),
                error=ep.final_info.get("error"), extra=extra,
                episode=with_cost(episode_record(
                    sample, duration=ep.duration, frame_budget=ep.frame_budget, overview=ep.overview, turns=ep.steps,
                    reward=ep.breakdown, prediction=prediction, score=score, correct=correct, wall_s=ep.wall_s,
                    system_prompt_sha=ep.system_prompt_sha, overview_visual_tokens=ep.overview_visual_tokens,
                    truth_span=grounding_span(sample.answer) if sample.question_type == "tvg" else None,
                    predicted_span=predicted_span(sample, prediction, ep.final_info, release=release)),
                    subagent=subagent_mode),
                inputs=input_identity(sample),
            )  # fmt: skip
        except Exception as exc:  # one sample's failure is recorded and counted, never fatal
            row = SampleResult(
                id=sample.id, question_type=sample.question_type, duration=sample.duration, answer=sample.answer,
                wall_s=time.perf_counter() - t0, started_at=started, ended_at=time.time(),
                error=f"{type(exc).__name__}: {exc}", transient=is_transient(exc),
                inputs=input_identity(sample),
            )  # fmt: skip
        data = asdict(row)
        try:
            writer.write(data)
        except OSError:
            write_failed.set()
            raise
        return data

    # inside paravt train's job the bar also counts the job's "eval" stage (paravt.evaluation.progress)
    bar = stage_bar("eval", len(samples), enabled=progress and bool(todo), initial=len(samples) - len(todo),
                    unit="sample", detail=out.name)  # fmt: skip
    scores = [r["score"] for r in existing]
    errors = sum(1 for r in existing if r.get("error"))
    try:
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futures = [pool.submit(run_one, s) for s in todo]
            try:
                for fut in as_completed(futures):
                    row = fut.result()
                    if row is None:
                        continue
                    scores.append(row["score"])
                    errors += 1 if row["error"] else 0
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix(acc=f"{statistics.fmean(scores):.3f}", errors=errors)
            except BaseException as exc:
                # Ctrl-C, a full disk: the samples not yet started never start, so leaving the pool waits only
                # for the ones in flight (it would otherwise run every submitted sample first)
                for f in futures:
                    f.cancel()
                if not isinstance(exc, OSError):
                    raise
                reason = "the disk is full" if storage.is_disk_full(exc) else str(exc)
                kept = len(read_results(out / RESULTS))
                raise OSError(exc.errno, f"could not write {out / RESULTS} ({reason}): the evaluation stopped; "
                                         f"its {kept} results are intact, rerun with the same --out to resume "
                                         "from them") from exc  # fmt: skip
    finally:
        writer.close()
        if bar is not None:
            bar.close()
        for env in envs:
            env.close()
    wanted = {s.id for s in samples}
    rows = [r for r in read_results(out / RESULTS) if r["id"] in wanted]
    summary = summarize(rows)
    if not settings and (out / "summary.json").is_file():  # nothing ran now: keep what the first run read
        with contextlib.suppress(ValueError, KeyError, TypeError, RecursionError):
            settings.update(json.loads((out / "summary.json").read_text())["fingerprint"]["sampling"])
    config = json.loads((out / CONFIG).read_text())
    summary["fingerprint"] = fingerprint(config, rows, settings)
    write_report(summary, out)
    return summary


