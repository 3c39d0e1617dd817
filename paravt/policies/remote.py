"""Policies behind an HTTP server.

- ``OpenAIPolicy(base_url, model)``: any OpenAI-compatible chat server — sglang
  (``python -m sglang.launch_server --model-path Qwen/Qwen3-VL-8B-Instruct --port 30000``, then
  ``base_url="http://localhost:30000/v1"``), vLLM (``vllm serve Qwen/Qwen3-VL-8B-Instruct --port 8000``),
  or ``paravt serve --model DIR`` (this project's CPU server for local checkpoints). Frames go as PNG data
  URLs (JPEG 85 with ``image_format="jpeg"``, as the released driver sends them), each at its ``<image>``
  placeholder; the conversations of a batch are sent concurrently.
- ``SGLangPolicy(base_url)``: sglang's native ``/generate`` with the rendered prompt, ``image_data`` and
  ``return_logprob``, for RL rollouts that need the generated token ids and their log-probabilities.

Both retry what may pass (connection errors, timeouts, HTTP 408 / 425 / 429 and 5xx) with exponential
backoff, honouring ``Retry-After``; give every request one deadline (``timeout``: the whole exchange, not
each socket read); refuse answers above ``max_response_bytes``; and raise ``ServerError`` naming the server and
quoting what it answered. The HTTP client is httpx (pooled connections, timeouts per phase).
"""

from __future__ import annotations

import email.utils
import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from paravt.policies.base import Conversation, Generation
from paravt.policies.images import to_base64_png, to_data_url
from paravt_env.bounded_read import ReplyTooLarge, ReplyTooSlow, read_bounded
from paravt_env.messages import Message

TRANSIENT_STATUS = frozenset({408, 425, 429})
"""4xx answers that say "later" (request timeout, too early, too many requests), retried like 5xx."""

MAX_RESPONSE_BYTES = 64 * 2**20
"""Default cap on one answer: a chat completion is kilobytes; a server sending more is broken or hostile."""

MAX_RETRY_AFTER = 60.0
"""Longest ``Retry-After`` wait honoured, seconds (a server asking for an hour is treated as failing)."""


class ServerError(RuntimeError):
    """A policy server failed (after retries); the message names the server and its answer. ``transient``:
    the server could not be reached or asked to be retried (connection, timeout, 408/425/429, 5xx): the same
    request may succeed later, so ``paravt eval`` retries such samples on resume; a rejected request (other
    4xx, an answer too large or not UTF-8) is not."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def check_reachable(base_url: str, timeout: float = 5.0) -> None:
    """Raise ``ConnectionError`` naming ``base_url`` when nothing answers there (any HTTP answer will do):
    run before an evaluation, so that a server that is not up fails the run at once instead of every sample."""
    try:
        httpx.get(base_url.rstrip("/") + "/models", timeout=timeout)
    except httpx.HTTPError as exc:
        raise ConnectionError(f"cannot reach the policy server at {base_url} ({exc}): is it running?") from None


class _Retry(Exception):
    def __init__(self, last: str, wait: float | None = None) -> None:
        self.last, self.wait = last, wait


def retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


_SHARED: httpx.Client | None = None
_SHARED_LOCK = threading.Lock()


def shared_client() -> httpx.Client:
    """One pooled client for callers that bring none (httpx's ``Client`` is thread-safe; its pool keeps
    connections alive between requests)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = httpx.Client(limits=httpx.Limits(max_connections=64, max_keepalive_connections=32))
        return _SHARED


def _post_once(url: str, data: bytes, headers: dict[str, str], timeout: float, max_bytes: int,
               client: httpx.Client | None = None) -> dict:  # fmt: skip
    """One request under one deadline on ``client``'s pooled connections: each phase's timeout is what is left
    of it, and the body is read in chunks with the deadline and the size cap checked after each (a server
    trickling one byte a second cannot hold a request past ``timeout``)."""
    deadline = time.monotonic() + timeout

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Retry(f"no complete answer within the {timeout:g} s deadline")
        return remaining

    try:
        with (client or shared_client()).stream("POST", url, content=data, headers=headers,
                                                 timeout=httpx.Timeout(left())) as response:  # fmt: skip
            try:
                body = read_bounded(response, max_bytes, deadline)
            except ReplyTooLarge as exc:
                if exc.declared:
                    raise ServerError(f"{url} answered {exc.size} bytes, above the {max_bytes}-byte cap") from None
                raise ServerError(f"{url} answered more than {max_bytes} bytes (the cap): refused") from None
            except ReplyTooSlow:
                raise _Retry(f"no complete answer within the {timeout:g} s deadline") from None
            status = response.status_code
            wait = retry_after(response.headers.get("retry-after"))
    except httpx.TimeoutException:
        raise _Retry(f"no complete answer within the {timeout:g} s deadline") from None
    except httpx.TransportError as exc:
        raise _Retry(f"{type(exc).__name__}: {exc}") from None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ServerError(f"{url} answered bytes that are not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if status >= 400:
        last = f"HTTP {status}: {text[:300]}"
        if status in TRANSIENT_STATUS or status >= 500:
            raise _Retry(last, wait)
        raise ServerError(f"{url} rejected the request ({last})", transient=False)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Retry(f"an answer that is not JSON ({exc.msg}): {text[:120]!r}") from None


def post_json(url: str, body: dict[str, Any], *, timeout: float, retries: int, backoff: float, api_key: str | None = None,
              max_bytes: int = MAX_RESPONSE_BYTES, client: httpx.Client | None = None) -> dict:  # fmt: skip
    """POST ``body`` as JSON and return the JSON answer; ``timeout`` bounds each attempt as a whole; ``client``:
    the pooled connections to use (default: ``shared_client()``)."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    data = json.dumps(body).encode()
    last = ""
    for attempt in range(retries + 1):
        try:
            return _post_once(url, data, headers, timeout, max_bytes, client)
        except _Retry as exc:
            last = exc.last
            wait = backoff * 2**attempt if exc.wait is None else exc.wait
        if attempt < retries:
            if wait > MAX_RETRY_AFTER:
                break
            time.sleep(wait)
    raise ServerError(f"{url} failed after {attempt + 1} attempts (last: {last})", transient=True)


def openai_messages(conversation: Conversation, image_format: str = "png") -> list[dict[str, Any]]:
    out = []
    for m in conversation:
        if not m.images and not m.as_parts and m.video_url is None:
            out.append({"role": m.role, "content": m.text})
            continue
        parts: list[dict[str, Any]] = []
        if m.video_url is not None:
            parts.append({"type": "video_url", "video_url": {"url": m.video_url}})
        frames = iter(m.images)
        for part in m.parts():
            if part["type"] == "text":
                parts.append({"type": "text", "text": part["text"]})
            else:
                parts.append({"type": "image_url", "image_url": {"url": to_data_url(next(frames), image_format)}})
        out.append({"role": m.role, "content": parts})
    return out


class OpenAIPolicy:
    """Chat completions from an OpenAI-compatible server (text only: no token ids or log-probs)."""

    def __init__(
        self,
        base_url: str,
        model: str = "default",
        *,
        max_new_tokens: int = 2048,
        temperature: float = 0.0,
        top_p: float = 1.0,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 1.0,
        concurrency: int = 8,
        api_key: str | None = None,
        image_format: str = "png",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.image_format = image_format
        self.model, self.max_new_tokens, self.temperature, self.top_p = model, max_new_tokens, temperature, top_p
        self.timeout, self.retries, self.backoff, self.api_key = timeout, retries, backoff, api_key
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="openai-policy")
        self._http = httpx.Client(limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency))

    def _one(self, conversation: Conversation, max_new_tokens: int | None = None) -> Generation:
        body = {"model": self.model, "messages": openai_messages(conversation, self.image_format),
                "max_tokens": max_new_tokens or self.max_new_tokens, "temperature": self.temperature}  # fmt: skip
        if self.top_p != 1.0:  # 1.0 is every server's default: the request stays the one the release sends
            body["top_p"] = self.top_p
        reply = post_json(f"{self.base_url}/chat/completions", body, timeout=self.timeout, retries=self.retries,
                          backoff=self.backoff, api_key=self.api_key, client=self._http)  # fmt: skip
        try:
            choice = reply["choices"][0]
            text = choice["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"{self.base_url} answered without a completion: {json.dumps(reply)[:300]}") from None
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        return Generation(text=text, token_ids=[], logprobs=[], finish_reason=finish,
                          prompt_tokens=token_count(usage.get("prompt_tokens")),
                          completion_tokens=token_count(usage.get("completion_tokens")))  # fmt: skip

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int | None = None) -> list[Generation]:
        return list(self._pool.map(lambda c: self._one(c, max_new_tokens), conversations))


def token_count(value: Any) -> int | None:
    """A token count a server reported, if it is one (a non-negative integer below 10^9), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**9 else None


class SGLangPolicy:
    """sglang's native ``/generate``: the prompt rendered with the model's chat template (one image pad per
    frame: the server expands it), frames as ``image_data``, and the sampled ids with their log-probs."""

    def __init__(self, base_url: str, tokenizer: Any, *, max_new_tokens: int = 2048, temperature: float = 0.7,
                 timeout: float = 300.0, retries: int = 3, backoff: float = 1.0, concurrency: int = 8) -> None:  # fmt: skip
        self.base_url = base_url.rstrip("/")
        self.tokenizer = tokenizer
        self.max_new_tokens, self.temperature = max_new_tokens, temperature
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="sglang-policy")
        self._http = httpx.Client(limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency))

    def render(self, conversation: Conversation) -> str:
        chat = [{"role": m.role, "content": m.parts()} for m in conversation]
        return self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)

    def _one(self, conversation: Conversation, max_new_tokens: int | None = None) -> Generation:
        body = {
            "text": self.render(conversation),
            "image_data": [to_base64_png(f) for m in conversation for f in m.images] or None,
            "sampling_params": {"temperature": self.temperature, "max_new_tokens": max_new_tokens or self.max_new_tokens},
            "return_logprob": True,
        }
        reply = post_json(f"{self.base_url}/generate", body, timeout=self.timeout, retries=self.retries, backoff=self.backoff,
                          client=self._http)  # fmt: skip
        try:
            meta = reply["meta_info"]
            pairs = meta["output_token_logprobs"]
            ids = [int(p[1]) for p in pairs]
            logprobs = [float(p[0]) for p in pairs]
            finish = meta.get("finish_reason") or {}
        except (KeyError, TypeError, IndexError, ValueError):
            raise ServerError(f"{self.base_url}/generate answered without token log-probs: {json.dumps(reply)[:300]}") from None
        kind = finish.get("type") if isinstance(finish, dict) else str(finish)
        return Generation(text=reply.get("text", ""), token_ids=ids, logprobs=logprobs,
                          finish_reason="length" if kind == "length" else "stop",
                          prompt_tokens=token_count(meta.get("prompt_tokens")))  # fmt: skip

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int | None = None) -> list[Generation]:
        return list(self._pool.map(lambda c: self._one(c, max_new_tokens), conversations))


__all__ = ["Message", "OpenAIPolicy", "SGLangPolicy", "ServerError"]
