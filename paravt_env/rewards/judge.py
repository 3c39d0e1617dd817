"""LLM-as-judge accuracy for open-ended answers (``RewardConfig.mode == "llm"``).

Any OpenAI-compatible chat endpoint, configured from the environment so that keys never enter a recipe:

- ``LLM_JUDGE_BASE_URL`` (e.g. ``http://localhost:30000/v1``; unset → the judge is off and F1 is used),
- ``LLM_JUDGE_API_KEY`` (optional), ``LLM_JUDGE_MODEL`` (default ``gpt-4o-mini``),
- ``LLM_JUDGE_TIMEOUT`` seconds (default 10).

The judge replies 1.0 / 0.5 / 0.0. Any failure (no endpoint, timeout, HTTP error, a reply without a number)
falls back to token F1, so a flaky judge can never block or crash training; failures are counted in
``JUDGE_STATS``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time

import httpx

from ..bounded_read import ReplyTooLarge, ReplyTooSlow, read_bounded
from .metrics import token_f1

logger = logging.getLogger(__name__)

_NUMBER_RE = re.compile(r"[\d.]+")


class JudgeStats:
    """Thread-safe counters of judge calls (rewards are computed from many rollout threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.failures = 0

    def record(self, ok: bool) -> None:
        with self._lock:
            self.calls += 1
            self.failures += 0 if ok else 1


JUDGE_STATS = JudgeStats()


def judge_prompt(question: str, prediction: str, ground_truth: str) -> str:
    return (
        f"Question: {question}\n"
        f"Ground truth answer: {ground_truth}\n"
        f"Model prediction: {prediction}\n\n"
        "Is the prediction semantically equivalent to the ground truth? "
        "Reply with a single number: 1.0 if correct, 0.5 if partially correct, 0.0 if wrong."
    )


MAX_JUDGE_REPLY_BYTES = 1 << 20
_CLIENT: httpx.Client | None = None
_CLIENT_LOCK = threading.Lock()


def _client() -> httpx.Client:
    """One pooled client for every judge call (the reward runs in many threads; httpx's client is thread-safe)."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is None:
            _CLIENT = httpx.Client(limits=httpx.Limits(max_connections=32, max_keepalive_connections=16))
        return _CLIENT


def _ask(base_url: str, question: str, prediction: str, ground_truth: str) -> float:
    body = {
        "model": os.environ.get("LLM_JUDGE_MODEL", "gpt-4o-mini"),
        "messages": [{"role": "user", "content": judge_prompt(question, prediction, ground_truth)}],
        "max_tokens": 8,
        "temperature": 0,
    }
    headers = {"Content-Type": "application/json"}
    if os.environ.get("LLM_JUDGE_API_KEY"):
        headers["Authorization"] = f"Bearer {os.environ['LLM_JUDGE_API_KEY']}"
    timeout = float(os.environ.get("LLM_JUDGE_TIMEOUT", "10"))
    deadline = time.monotonic() + timeout
    with _client().stream("POST", base_url.rstrip("/") + "/chat/completions", json=body, headers=headers,
                          timeout=httpx.Timeout(timeout)) as response:  # fmt: skip
        try:  # a judge answers a few bytes: cap it, and the whole call's time
            raw = read_bounded(response, MAX_JUDGE_REPLY_BYTES, deadline)
        except (ReplyTooLarge, ReplyTooSlow):
            raise ValueError(f"judge reply passed {MAX_JUDGE_REPLY_BYTES} bytes or {timeout:g} s") from None
        response.raise_for_status()
    reply = json.loads(raw.decode("utf-8"))
    text = reply["choices"][0]["message"]["content"].strip()
    m = _NUMBER_RE.search(text)
    if m is None:
        raise ValueError(f"judge reply has no number: {text[:80]!r}")
    return min(max(float(m.group()), 0.0), 1.0)


def llm_judge(question: str, prediction: str, ground_truth: str) -> float:
    """The judge's score in [0, 1], or token F1 if the judge is unavailable or answers nonsense."""
    base_url = os.environ.get("LLM_JUDGE_BASE_URL")
    if not base_url:
        return token_f1(prediction, ground_truth)
    try:
        score = _ask(base_url, question, prediction, ground_truth)
    except Exception as exc:  # a judge failure must never stop training
        JUDGE_STATS.record(ok=False)
        logger.warning("LLM judge at %s failed (%s); falling back to token F1", base_url, exc)
        return token_f1(prediction, ground_truth)
    JUDGE_STATS.record(ok=True)
    return score
