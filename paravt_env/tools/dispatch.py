"""Run the tool calls of one turn: all of them concurrently ("parallel"), or one per turn ("sequential").

Parallel dispatch is the point of ParaVT: the crops of one turn decode side by side in a thread pool (FFmpeg
releases the GIL), and in "subagent" mode their summaries are generated concurrently too. Sequential dispatch
is the baseline it is measured against: one crop per turn, the rest rejected with feedback saying so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from ..video import VideoReader
from .crop import CropRequest, CropResult, CropSettings, ToolCallLike, execute_crop, validate_crop
from .subagent import BatchSubAgent, SubAgent, SubAgentRequest, clean_summary

DISPATCH_MODES = ("parallel", "sequential")
TOOL_RESULT_MODES = ("frames", "subagent")


@dataclass
class TurnToolReport:
    """Everything one turn's tool phase did, in call order."""

    results: list[CropResult]
    decode_s: float = 0.0
    subagent_s: float = 0.0
    wall_s: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)


def _plan(
    calls: Sequence[ToolCallLike], mode: str, max_parallel: int, duration: float, video_path: str,
    budget: tuple[int, int] | None = None,
) -> list[CropResult]:
    """Decide, per call, whether it runs: the dispatch mode's limit, validation, then the episode's crop budget
    (``(total, spent)``: a valid call past it is refused, in both modes alike)."""
    limit = 1 if mode == "sequential" else max_parallel
    left = None if budget is None else budget[0] - budget[1]
    results = []
    for i, call in enumerate(calls):
        if i >= limit:
            reason = (
                "not executed: sequential dispatch runs one crop per turn; request it again in your next turn"
                if mode == "sequential"
                else f"not executed: at most {max_parallel} crops run per turn"
            )
            results.append(CropResult(call_index=i, request=None, error=reason, status="rejected"))
            continue
        checked = validate_crop(call, duration, video_path)
        if isinstance(checked, CropRequest) and left is not None and left <= 0:
            results.append(CropResult(call_index=i, request=None, status="rejected",
                                      error=f"not executed: the episode's crop budget of {budget[0]} crops is spent"))  # fmt: skip
        elif isinstance(checked, CropRequest):
            if left is not None:
                left -= 1
            results.append(CropResult(call_index=i, request=checked))
        else:
            results.append(CropResult(call_index=i, request=None, error=checked, status="rejected"))
    return results


def run_tool_calls(
    calls: Sequence[ToolCallLike],
    *,
    reader: VideoReader,
    video_path: str,
    settings: CropSettings,
    pool: Executor,
    mode: str = "parallel",
    max_parallel: int = 5,
    tool_result: str = "frames",
    subagent: SubAgent | BatchSubAgent | None = None,
    question: str = "",
    subagent_timeout: float | None = None,
    budget: tuple[int, int] | None = None,
) -> TurnToolReport:
    """Validate and execute one turn's calls (``budget``: the episode's crop budget and the crops it has run).
    Never raises for a bad call: it becomes a result with an error."""
    if mode not in DISPATCH_MODES:
        raise ValueError(f"dispatch must be one of {DISPATCH_MODES}, got {mode!r}")
    if tool_result not in TOOL_RESULT_MODES:
        raise ValueError(f"tool_result must be one of {TOOL_RESULT_MODES}, got {tool_result!r}")
    if tool_result == "subagent" and subagent is None:
        raise ValueError('tool_result="subagent" needs a sub-agent callable (EnvConfig.subagent)')
    t0 = time.perf_counter()
    results = _plan(calls, mode, max_parallel, reader.duration, video_path, budget)
    runnable = [r for r in results if r.status == "executed"]

    def decode(result: CropResult) -> None:
        try:
            result.frames, result.decode_s = execute_crop(reader, result.request, settings)
        except Exception as exc:  # a decode failure is feedback for the agent, not a crash
            result.status, result.error = "failed", f"decoding failed: {exc}"

    # list() waits for every crop and re-raises nothing (decode() catches what a crop can throw).
    list(pool.map(decode, runnable))
    decode_s = sum(r.decode_s for r in runnable)

    subagent_s = 0.0
    if tool_result == "subagent":
        done = [r for r in runnable if r.status == "executed"]
        requests = [SubAgentRequest(question, r.request.start, r.request.end, r.frames) for r in done]
        t_sub = time.perf_counter()
        _summarise(subagent, requests, done, subagent_timeout)
        subagent_s = time.perf_counter() - t_sub
    return TurnToolReport(results, decode_s=decode_s, subagent_s=subagent_s, wall_s=time.perf_counter() - t0)


def call_with_timeout(fn, timeout: float | None):
    """``fn()`` in a daemon thread, waited for at most ``timeout`` seconds: a hung sub-agent (a dead server, a
    deadlocked model) costs one abandoned thread, never the rollout."""
    if timeout is None:
        return fn()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name="subagent")
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"no reply within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def subagent_replies(
    subagent: SubAgent | BatchSubAgent, requests: list[SubAgentRequest], timeout: float | None,
    convert: Callable[[Any], Any] = lambda reply: reply,
) -> list[tuple[Any, BaseException | None, float]]:
    """(``convert(reply)``, error, seconds) per request: one batched call for a ``BatchSubAgent`` (a reply
    ``convert`` refuses fails the whole batch, as the call does), else one thread per request so the replies
    are generated concurrently. Whatever a sub-agent does (raises, hangs past ``timeout``, returns the wrong
    number of replies or replies ``convert`` refuses), it becomes an error here, never an exception."""
    if not requests:
        return []
    if isinstance(subagent, BatchSubAgent):
        t = time.perf_counter()
        try:
            replies = list(call_with_timeout(lambda: subagent.batch(requests), timeout))
            if len(replies) != len(requests):
                raise ValueError(f"sub-agent returned {len(replies)} summaries for {len(requests)} crops")
            converted = [convert(reply) for reply in replies]
        except Exception as exc:
            return [(None, exc, time.perf_counter() - t)] * len(requests)
        return [(reply, None, time.perf_counter() - t) for reply in converted]

    out: list[tuple[Any, BaseException | None, float]] = [(None, None, 0.0)] * len(requests)

    def one(i: int) -> None:
        t = time.perf_counter()
        try:
            out[i] = (convert(call_with_timeout(lambda: subagent(requests[i]), timeout)), None, time.perf_counter() - t)
        except Exception as exc:  # one failing sub-agent must not sink the turn
            out[i] = (None, exc, time.perf_counter() - t)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(requests))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return out


def _summarise(
    subagent: SubAgent | BatchSubAgent, requests: list[SubAgentRequest], done: list[CropResult], timeout: float | None
) -> None:
    """Each executed crop's summary, or the crop marked failed with the reason: the turn always goes on."""
    replies = subagent_replies(subagent, requests, timeout, convert=clean_summary)
    for result, (summary, error, seconds) in zip(done, replies, strict=True):
        if error is None:
            result.summary = summary
        else:
            result.status, result.error = "failed", f"sub-agent failed: {error}"
        result.subagent_s = seconds
