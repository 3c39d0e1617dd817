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
import math
import os
import re
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from baselines.runner import play_episode
from paravt_env import EnvConfig, VideoQASample, VideoToolEnv, storage
from paravt_env.rewards import mcq_accuracy, normalize_text, temporal_iou
from paravt_env.storage import OutputLocked  # noqa: F401 - re-exported: callers catch it from here

from .fingerprint import fingerprint, policy_settings
from .records import episode_record

RESULTS = "results.jsonl"
CONFIG = "eval_config.json"
DURATION_BUCKETS = (
    (0, 120, "0-2 min"),
    (120, 600, "2-10 min"),
    (600, 1800, "10-30 min"),
    (1800, math.inf, "30+ min"),
)
IOU_THRESHOLDS = (0.3, 0.5, 0.7)

_DASH_SPAN_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:s|sec|seconds)?\s*(?:-|–|to)\s*(\d+(?:\.\d+)?)")


@dataclass
class EvalOptions:
    """The env options of an evaluation (defaults: the paper's eval protocol)."""

    dispatch: str = "parallel"
    frame_budget: int = 64
    max_turns: int = 3
    max_parallel: int = 5
    prompt_mode: str = "agentic"
    tool_result: str = "frames"
    crop_fps: float = 1.0
    crop_max_frames: int = 16
    min_pixels: int = 784
    max_pixels: int = 50176
    response_prefix: str = ""
    """The prefix the policy's prompt forces (scored as prompt, not as the policy's text)."""
    protocol: str = "paravt"
    """"release": the released driver's messages and its scoring (``release_score``); see ``EnvConfig``."""
    subtitles: bool = False
    """Show each video's subtitles before the question (Video-MME w/ subs)."""
    video_channel: str = "image_url"
    """Release protocol: "video_url" sends the video as a file:// URL for the server to sample (the release's
    Charades-STA runs)."""

    def env_config(self, subagent: Any = None) -> EnvConfig:
        return EnvConfig(
            dispatch=self.dispatch,
            frame_budget=self.frame_budget,
            max_turns=self.max_turns,
            max_parallel=self.max_parallel,
            prompt_mode=self.prompt_mode,
            tool_result=self.tool_result,
            subagent=subagent,
            force_final_answer=True,
            crop_fps=self.crop_fps,
            crop_max_frames=self.crop_max_frames,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
            response_prefix=self.response_prefix,
            protocol=self.protocol,
            subtitles=self.subtitles,
            video_channel=self.video_channel,
        )


OPTION_KEYS = ("frame_budget", "max_turns", "max_parallel", "crop_fps", "crop_max_frames", "max_pixels",
               "prompt_mode", "tool_result")  # fmt: skip
"""Env options that default to the checkpoint's policy card, then to the paper's values."""


def policy_card(spec: str) -> dict:
    """The policy card of an ``hf:DIR`` checkpoint trained here (``{}`` for anything else)."""
    if not spec.startswith("hf:"):
        return {}
    from learners.policies.card import read_card

    path = Path(spec[3:])
    if not path.exists():
        raise FileNotFoundError(f"checkpoint directory {path} does not exist (policy {spec})")
    return read_card(path)


def eval_options(policy: str, dispatch: str = "parallel", *, protocol: str = "paravt", subtitles: bool = False,
                 video_channel: str = "image_url", **given) -> EvalOptions:  # fmt: skip
    """Options given (None: not given), then the checkpoint's card, then the paper's eval defaults."""
    unknown = sorted(set(given) - set(OPTION_KEYS))
    if unknown:
        raise TypeError(f"unknown eval option(s) {unknown}; known: {list(OPTION_KEYS)}")
    card = policy_card(policy)
    trained = card.get("env", {})
    defaults = EvalOptions()
    pick = {}
    for key in OPTION_KEYS:
        value = given.get(key)
        pick[key] = value if value is not None else trained.get(key, getattr(defaults, key))
    pick["min_pixels"] = min(trained.get("min_pixels", defaults.min_pixels), pick["max_pixels"])
    if protocol == "release" and pick["prompt_mode"] in ("agentic", "agentic_compact"):
        pick["prompt_mode"] = "agentic_general"  # the release's name, so the config says what ran
    return EvalOptions(dispatch=dispatch, response_prefix="<think>\n" if card.get("think_prefix") else "",
                       protocol=protocol, subtitles=subtitles, video_channel=video_channel, **pick)  # fmt: skip


def evaluate_checkpoint(model: str | Path, data: str | Path, out: str | Path, *, dispatch: str = "parallel",
                        limit: int | None = None, frame_budget: int | None = None, max_new_tokens: int = 2048,
                        progress: bool = True) -> dict[str, Any]:  # fmt: skip
    """``paravt eval --policy hf:MODEL --data DATA --out OUT [--dispatch D] [--frame-budget K]``: a checkpoint
    trained here, every other option from its policy card; every sample asked for counts in ``n``."""
    from paravt_env import load_samples

    from .policies import make_agent_factory

    spec = f"hf:{model}"
    # A checkpoint trained under the release protocol is evaluated under it (its card says which).
    protocol = policy_card(spec).get("env", {}).get("protocol", "paravt")
    options = eval_options(spec, dispatch, protocol=protocol, frame_budget=frame_budget)
    samples = load_samples(data, strict=False, keep_missing=True)[: limit or None]
    factory, subagent = make_agent_factory(spec, max_new_tokens=max_new_tokens, tool_result=options.tool_result)
    return evaluate(samples, factory, out, options, progress=progress, subagent=subagent,
                    run_config={"policy": spec, "data": str(data)})  # fmt: skip


def grounding_span(text: str) -> tuple[float, float] | None:
    """A time span in an answer: ``[s, e]`` / ``s, e`` (the reward's form) or ``s - e seconds``."""
    from paravt_env.rewards import parse_span

    span = parse_span(text)
    if span is None:
        m = _DASH_SPAN_RE.search(text)
        span = (float(m.group(1)), float(m.group(2))) if m else None
    return span


def score_prediction(prediction: str, answer: str, question_type: str) -> float:
    """Per-sample score: MCQ letter match, grounding IoU, open-ended token F1 (the reward's accuracy rules,
    with grounding answers also read in the ``X.X - Y.Y seconds`` form of the eval prompt)."""
    from paravt_env.rewards import answer_accuracy

    if question_type == "tvg":
        pred, gt = grounding_span(prediction), grounding_span(answer)
        if pred is None or gt is None:
            return 0.0
        return temporal_iou(f"[{pred[0]}, {pred[1]}]", f"[{gt[0]}, {gt[1]}]")
    if question_type == "mcq":
        if not prediction or not answer:
            return 0.0
        return (
            1.0 if normalize_text(prediction) == normalize_text(answer) else mcq_accuracy(prediction, answer)
        )
    return answer_accuracy(prediction, answer, question_type, "f1")


def release_result(sample: VideoQASample, final_info: dict[str, Any]) -> tuple[float, str, str, bool, dict]:
    """(score, prediction, answer, correct, extra) of an episode under the release protocol, scored as the
    released driver scores: the option letter against its answer, or IoU (``correct``: IoU >= 0.5)."""
    from paravt_env.data.release_questions import release_fields
    from paravt_env.rewards.release_scores import release_score

    fields = release_fields(sample)
    final = final_info.get("final_response", "")
    span = tuple(fields["span"]) if fields.get("span") else None
    extra = {"release_id": fields.get("id"), "final_response": final[:500]}  # the release's id: rows to match
    if final_info.get("error"):  # the driver fails the sample: an error row scoring 0
        return 0.0, "", fields["answer"], False, {**extra, "final_response": ""}
    score, pred = release_score(final, is_mcq=fields["is_mcq"], answer=fields["answer"], span=span)
    correct = score == 1.0 if fields["is_mcq"] else score >= 0.5
    return score, pred, fields["answer"], correct, extra


def is_correct(score: float, question_type: str) -> bool:
    """MCQ: the right letter; grounding: IoU >= 0.5; open-ended: token F1 >= 0.5."""
    return score >= (1.0 if question_type == "mcq" else 0.5)


@dataclass
class SampleResult:
    """One line of ``results.jsonl``."""

    id: str
    question_type: str
    duration: float | None
    prediction: str = ""
    answer: str = ""
    score: float = 0.0
    correct: bool = False
    reward: float = 0.0
    tool_calls: int = 0
    turns: int = 0
    frame_budget: int = 0
    wall_s: float = 0.0
    error: str | None = None
    transient: bool = False
    """The error may not recur (server unreachable, timeout, 5xx): a resumed run retries the sample."""
    extra: dict[str, Any] = field(default_factory=dict)
    episode: dict[str, Any] | None = None
    """What the agent did (``benchmarks.records``, schema ``paravt-episode/1``); rows written before records
    existed have none and still resume."""


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Every complete line of a results file; a line cut short by an interruption is dropped (its sample
    will be run again)."""
    path = Path(path)
    if not path.exists():
        return []
    rows, seen = [], set()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "id" in row and row["id"] not in seen:
            seen.add(row["id"])
            rows.append(row)
    return rows


class ResultsWriter:
    """Appends result lines durably and from several threads."""

    def __init__(self, path: Path, existing: list[dict[str, Any]]) -> None:
        self.path = path
        # Rewrite the file with its complete lines only, so a half-written last line cannot glue itself to
        # the next result.
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in existing), encoding="utf-8")
        os.replace(tmp, path)
        self._lock = threading.Lock()
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, row: dict[str, Any]) -> None:
        line = json.dumps(row) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def _check_config(out: Path, config: dict[str, Any]) -> None:
    path = out / CONFIG
    if path.exists():
        old = json.loads(path.read_text())
        diff = {k: (old.get(k), v) for k, v in config.items() if k != "limit" and old.get(k) != v}
        if diff:
            details = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in sorted(diff.items()))
            raise ValueError(f"{out} holds results of a different evaluation ({details}); use another --out")
    path.write_text(json.dumps(config, indent=2) + "\n")


def evaluate(
    samples: Sequence[VideoQASample],
    make_agent: Callable[[], Any],
    out: str | Path,
    options: EvalOptions | None = None,
    *,
    concurrency: int = 1,
    progress: bool = True,
    run_config: dict[str, Any] | None = None,
    subagent: Any = None,
) -> dict[str, Any]:
    """Run every sample not yet in ``out/results.jsonl``; write the summary, report and chart; return the summary."""
    options = options or EvalOptions()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(out):
        return _evaluate(samples, make_agent, out, options, concurrency=concurrency, progress=progress,
                         run_config=run_config, subagent=subagent)  # fmt: skip


def is_transient(exc: BaseException) -> bool:
    """A failure the same request may not meet again: the server unreachable, a timeout, a 5xx answer."""
    return bool(getattr(exc, "transient", False)) or isinstance(exc, (TimeoutError, ConnectionError))


def exclusive_lock(out: Path):
    """Hold ``out/eval.lock`` while the evaluation runs: two processes appending to one ``results.jsonl``
    would lose rows (``paravt_env.storage.DirectoryLock``)."""
    return storage.exclusive_lock(out, "eval.lock")


def _evaluate(samples, make_agent, out: Path, options: EvalOptions, *, concurrency: int, progress: bool,
              run_config: dict[str, Any] | None, subagent: Any) -> dict[str, Any]:  # fmt: skip
    _check_config(out, {**(run_config or {}), **asdict(options)})
    # Rows that failed for a transient reason (server down, timeout) are run again; the rest are kept.
    existing = [r for r in read_results(out / RESULTS) if not r.get("transient")]
    done = {r["id"] for r in existing}
    todo = [s for s in samples if s.id not in done]
    writer = ResultsWriter(out / RESULTS, existing)
    config = options.env_config(subagent)
    local = threading.local()
    envs: list[VideoToolEnv] = []
    envs_lock = threading.Lock()
    write_failed = threading.Event()  # a full disk: no later episode could be kept, so none is run
    settings: dict[str, Any] = {}  # the policy's sampling settings, read off the first agent (fingerprint)

    def env_for_thread() -> VideoToolEnv:
        if getattr(local, "env", None) is None:
            local.env = VideoToolEnv(list(samples), config)
            with envs_lock:
                envs.append(local.env)
        return local.env

    def run_one(sample: VideoQASample) -> dict[str, Any] | None:
        if write_failed.is_set():
            return None
        t0 = time.perf_counter()
        try:
            agent = make_agent()
            if not settings:
                settings.update(policy_settings(agent))
            ep = play_episode(env_for_thread(), agent, options={"sample": sample})
            if options.protocol == "release":
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
                wall_s=time.perf_counter() - t0, error=ep.final_info.get("error"), extra=extra,
                episode=episode_record(sample, ep, prediction=prediction, score=score, correct=correct,
                                       truth_span=grounding_span(sample.answer) if sample.question_type == "tvg" else None),
            )  # fmt: skip
        except Exception as exc:  # one sample's failure is recorded and counted, never fatal
            row = SampleResult(
                id=sample.id, question_type=sample.question_type, duration=sample.duration, answer=sample.answer,
                wall_s=time.perf_counter() - t0, error=f"{type(exc).__name__}: {exc}", transient=is_transient(exc),
            )  # fmt: skip
        data = asdict(row)
        try:
            writer.write(data)
        except OSError:
            write_failed.set()
            raise
        return data

    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(samples), initial=len(existing), desc="eval", unit="sample")
    scores = [r["score"] for r in existing]
    errors = sum(1 for r in existing if r.get("error"))
    try:
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futures = [pool.submit(run_one, s) for s in todo]
            for fut in as_completed(futures):
                try:
                    row = fut.result()
                except OSError as exc:
                    for f in futures:
                        f.cancel()
                    reason = "the disk is full" if storage.is_disk_full(exc) else str(exc)
                    kept = len(read_results(out / RESULTS))
                    raise OSError(exc.errno, f"could not write {out / RESULTS} ({reason}): the evaluation stopped; "
                                             f"its {kept} results are intact, rerun with the same --out to resume "
                                             "from them") from exc  # fmt: skip
                if row is None:
                    continue
                scores.append(row["score"])
                errors += 1 if row["error"] else 0
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(acc=f"{statistics.fmean(scores):.3f}", errors=errors)
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
        with contextlib.suppress(ValueError, KeyError, TypeError):
            settings.update(json.loads((out / "summary.json").read_text())["fingerprint"]["sampling"])
    config = json.loads((out / CONFIG).read_text())
    summary["fingerprint"] = fingerprint(config, rows, settings)
    write_report(summary, out)
    return summary


def _mean(values) -> float:
    values = list(values)
    return statistics.fmean(values) if values else 0.0


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The paper's numbers from result lines: accuracy (mean score), grounding mIoU and R@0.3/0.5/0.7, tool
    use, and breakdowns by question type and video duration; errors are counted (and score 0)."""
    summary: dict[str, Any] = {
        "n": len(rows),
        "accuracy": _mean(r["score"] for r in rows),
        "correct_rate": _mean(1.0 if r["correct"] else 0.0 for r in rows),
        "avg_tool_calls": _mean(r["tool_calls"] for r in rows),
        "tool_usage_rate": _mean(1.0 if r["tool_calls"] > 0 else 0.0 for r in rows),
        "avg_turns": _mean(r["turns"] for r in rows),
        "errors": sum(1 for r in rows if r.get("error")),
        "failed": [{"id": r["id"], "error": r["error"], "transient": bool(r.get("transient"))} for r in rows if r.get("error")],
        "wall_s": sum(r["wall_s"] for r in rows),
    }
    tvg = [r for r in rows if r["question_type"] == "tvg"]
    if tvg:
        summary["grounding"] = {"n": len(tvg), "mIoU": _mean(r["score"] for r in tvg)}
        for th in IOU_THRESHOLDS:
            summary["grounding"][f"R@{th}"] = _mean(1.0 if r["score"] >= th else 0.0 for r in tvg)
    by_type: dict[str, list] = {}
    for r in rows:
        by_type.setdefault(r["question_type"], []).append(r)
    summary["by_question_type"] = {
        qt: {
            "n": len(rs),
            "accuracy": _mean(r["score"] for r in rs),
            "avg_tool_calls": _mean(r["tool_calls"] for r in rs),
        }
        for qt, rs in sorted(by_type.items())
    }
    by_dur: dict[str, list] = {}
    for r in rows:
        d = r.get("duration")
        label = "unknown" if d is None else next(lab for lo, hi, lab in DURATION_BUCKETS if lo <= d < hi)
        by_dur.setdefault(label, []).append(r)
    order = [lab for _, _, lab in DURATION_BUCKETS] + ["unknown"]
    summary["by_duration"] = {
        lab: {"n": len(by_dur[lab]), "accuracy": _mean(r["score"] for r in by_dur[lab])}
        for lab in order
        if lab in by_dur
    }
    return summary


def to_markdown(summary: dict[str, Any], title: str = "Evaluation") -> str:
    lines = [
        f"# {title}",
        "",
        "| n | accuracy | avg tool calls | tool usage rate | avg turns | errors |",
        "|---|---|---|---|---|---|",
        f"| {summary['n']} | {summary['accuracy']:.3f} | {summary['avg_tool_calls']:.2f} | "
        f"{summary['tool_usage_rate']:.2f} | {summary['avg_turns']:.2f} | {summary['errors']} |",
    ]
    if "grounding" in summary:
        g = summary["grounding"]
        lines += ["", "| grounding n | mIoU | R@0.3 | R@0.5 | R@0.7 |", "|---|---|---|---|---|",
                  f"| {g['n']} | {g['mIoU']:.3f} | {g['R@0.3']:.3f} | {g['R@0.5']:.3f} | {g['R@0.7']:.3f} |"]  # fmt: skip
    for key, head in (("by_question_type", "question type"), ("by_duration", "duration")):
        lines += ["", f"| {head} | n | accuracy |", "|---|---|---|"]
        lines += [f"| {k} | {v['n']} | {v['accuracy']:.3f} |" for k, v in summary[key].items()]
    failed = summary.get("failed", [])
    if failed:  # errors score 0 and stay in n; name them so they can be fixed
        lines += ["", f"Failed samples ({len(failed)}; transient ones are retried when the run is resumed):", ""]
        lines += [f"- `{f['id']}`{' (transient)' if f['transient'] else ''}: {f['error'][:200]}" for f in failed[:20]]
        if len(failed) > 20:
            lines.append(f"- ... and {len(failed) - 20} more (summary.json lists them all)")
    return "\n".join(lines) + "\n"


def write_report(summary: dict[str, Any], out: Path) -> None:
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "report.md").write_text(to_markdown(summary, f"Evaluation: {out.name}"))
    with contextlib.suppress(ImportError):  # matplotlib is the "plot" extra; the JSON and Markdown suffice
        _plot(summary, out / "report.png")


def _plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for ax, key, title in zip(
        axes, ("by_question_type", "by_duration"), ("by question type", "by duration"), strict=True
    ):
        names = list(summary[key])
        bars = ax.bar(names, [summary[key][n]["accuracy"] for n in names], color="#2a9d8f")
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"accuracy {title}")
    fig.suptitle(
        f"n = {summary['n']}, accuracy {summary['accuracy']:.3f}, tool calls {summary['avg_tool_calls']:.2f}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def compare(dirs: Sequence[str | Path]) -> str:
    """A side-by-side Markdown table of several evaluation directories (their ``summary.json``)."""
    rows = []
    for d in dirs:
        path = Path(d) / "summary.json"
        if not path.exists():
            raise FileNotFoundError(f"no summary.json in {d} (run paravt eval --out {d} first)")
        s = json.loads(path.read_text())
        cfg_path = Path(d) / CONFIG
        cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
        rows.append((str(d), cfg, s))
    types = sorted({qt for _, _, s in rows for qt in s.get("by_question_type", {})})
    head = [
        "run",
        "policy",
        "dispatch",
        "K",
        "n",
        "accuracy",
        "avg tool calls",
        "tool usage",
        "avg turns",
        "errors",
    ]
    head += [f"acc {qt}" for qt in types]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d, cfg, s in rows:
        cells = [d, str(cfg.get("policy", "?")), str(cfg.get("dispatch", "?")), str(cfg.get("frame_budget", "?")),
                 str(s["n"]), f"{s['accuracy']:.3f}", f"{s['avg_tool_calls']:.2f}", f"{s['tool_usage_rate']:.2f}",
                 f"{s['avg_turns']:.2f}", str(s["errors"])]  # fmt: skip
        cells += [
            f"{s['by_question_type'][qt]['accuracy']:.3f}" if qt in s["by_question_type"] else "-"
            for qt in types
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
