"""``paravt serve``: a local checkpoint behind an OpenAI-compatible and an sglang-style HTTP API, on CPU.

For development and tests where sglang / vLLM (GPU stacks) are not installed: the same requests
``OpenAIPolicy`` and ``SGLangPolicy`` send to those servers, served by ``HFPolicy`` from the standard
FastAPI with uvicorn (``paravt_env.remote.asgi``, the transport ``paravt serve-env`` uses). Endpoints: ``GET /v1/models``, ``GET /health``,
``POST /v1/chat/completions`` (string or text / ``image_url`` parts with data URLs; ``max_tokens``,
``temperature``) and ``POST /generate`` (``text`` rendered with the chat template, one image pad per entry of
``image_data``; returns ``meta_info.output_token_logprobs``).

Bounded (``ServeLimits``): a body above ``max_body_bytes`` is refused before it is read (413), an image above
``max_image_pixels`` before it is decoded, a prompt above ``max_prompt_tokens`` before the model sees it, and
at most ``max_pending`` requests are admitted (running or queued; one generation runs at a time): beyond that
503 with ``Retry-After``. Every field is validated and a bad one answered 4xx naming it.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

import anyio
import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from paravt.policies.hf import HFPolicy
from paravt_env.messages import Message
from paravt_env.protocol import IMAGE_PLACEHOLDER
from paravt_env.remote.asgi import error_response, route_errors

logger = logging.getLogger(__name__)


@dataclass
class ServeLimits:
    """What one request may cost ``paravt serve``."""

    max_body_bytes: int = 32 * 2**20
    """Largest request body read (413 above it, before reading)."""
    max_images: int = 512
    """Images per request."""
    max_image_pixels: int = 4096 * 4096
    """Pixels of one image, read from its header before it is decoded (a 12000 x 12000 PNG is 585 KB)."""
    max_request_pixels: int = 4 * 4096 * 4096
    """Pixels of all the images of one request together, each counted from its header before it is decoded: 80
    one-bit 4096 x 4096 PNGs are 224 KiB on the wire and 3.8 GB decoded. 67 M pixels (about 200 MB of RGB) holds
    the paper's largest turn (64 overview frames and 5 crops of 16 frames at 50,176 pixels: 7.2 M) nine times over.
    Requests decode one at a time (``PolicyServer.work``), so this also bounds what the server holds decoded."""
    max_prompt_tokens: int | None = None
    """Prompt tokens after the chat template; None: the model's context length."""
    max_new_tokens: int = 8192
    """Largest ``max_tokens`` / ``max_new_tokens`` accepted."""
    max_pending: int = 64
    """Requests admitted at once, running or queued (one generation runs at a time); 503 beyond."""
    body_timeout_s: float = 60.0
    """A request's whole body must arrive within this long (408 otherwise); only then is it admitted."""
    write_timeout_s: float = 120.0
    """A reply must drain to its client within this long; a client that does not read it loses the connection."""
    max_unread_bytes: int = 256 * 2**20
    """What the replies clients have not read yet may hold at once, all connections together; past it the connection
    whose unread reply waited longest is dropped first (``paravt_env.remote.asgi.UnreadReplies``)."""


ROLES = frozenset({"system", "user", "assistant", "tool"})


class BadRequest(ValueError):
    """A request the server refuses, with the HTTP status to answer (4xx) and a message naming the field."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class PixelTally:
    """The pixels a request's images add up to, checked against ``max_request_pixels`` before each is decoded."""

    def __init__(self, limits: ServeLimits) -> None:
        self.limit, self.pixels = limits.max_request_pixels, 0

    def add(self, pixels: int, where: str) -> None:
        if self.pixels + pixels > self.limit:
            raise BadRequest(f"{where} would bring the request's images to {self.pixels + pixels} pixels, above the "
                             f"limit of {self.limit} for one request", 413)  # fmt: skip
        self.pixels += pixels


def decode_image(data: Any, where: str, limits: ServeLimits, tally: PixelTally | None = None) -> np.ndarray:
    """An RGB array from base64 bytes or a ``data:image/...;base64,`` URL; its size is checked from the header
    before the pixels are decoded, alone and (``tally``) with the request's other images."""
    from PIL import Image, UnidentifiedImageError

    if not isinstance(data, str):
        raise BadRequest(f"{where} must be a base64 string or data URL, got {type(data).__name__}")
    if data.startswith("data:"):
        data = data.split(",", 1)[-1]
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest(f"{where} is not valid base64") from None
    try:
        with Image.open(io.BytesIO(raw)) as img:
            w, h = img.size
            if w * h > limits.max_image_pixels:
                raise BadRequest(f"{where} is {w}x{h} pixels, above the limit of {limits.max_image_pixels}", 413)
            if tally is not None:
                tally.add(w * h, where)
            return np.asarray(img.convert("RGB"))
    except (UnidentifiedImageError, OSError, SyntaxError, Image.DecompressionBombError) as exc:
        raise BadRequest(f"{where} is not a readable image ({type(exc).__name__})") from None


def number(body: dict, key: str, lo: float, hi: float, *, integer: bool = False) -> Any:
    """``body[key]`` if absent (None) or a finite number in [lo, hi] (an integer with ``integer``); else 400."""
    value = body.get(key)
    if value is None:
        return None
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise BadRequest(f"field {key!r} must be {kind}, got {value!r}")
    if not math.isfinite(value) or not lo <= value <= hi:
        raise BadRequest(f"field {key!r} must be {kind} in [{lo:g}, {hi:g}], got {value!r}")
    return value


def conversation_from_openai(messages: Any, limits: ServeLimits | None = None) -> list[Message]:
    limits = limits or ServeLimits()
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    out, n_images, tally = [], 0, PixelTally(limits)
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise BadRequest(f"messages[{i}] must be an object with a 'role' in {sorted(ROLES)}")
        content = m.get("content") or ""
        if isinstance(content, str):
            out.append(Message(m["role"], content.replace(IMAGE_PLACEHOLDER, "")))
            continue
        if not isinstance(content, list):
            raise BadRequest(f"messages[{i}].content must be a string or a list of parts")
        text, images = [], []
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                if not isinstance(part.get("text", ""), str):
                    raise BadRequest(f"messages[{i}].content[{j}].text must be a string")
                text.append(part.get("text", "").replace(IMAGE_PLACEHOLDER, ""))
            elif kind == "image_url":
                ref = part.get("image_url")
                url = ref.get("url") if isinstance(ref, dict) else None
                if not isinstance(url, str):
                    raise BadRequest(f"messages[{i}].content[{j}].image_url must be an object with a 'url' string")
                if not url.startswith("data:"):
                    raise BadRequest(f"messages[{i}].content[{j}]: only data: URLs are served here (no downloads)")
                n_images += 1
                if n_images > limits.max_images:
                    raise BadRequest(f"more than {limits.max_images} images in one request", 413)
                images.append(decode_image(url, f"messages[{i}].content[{j}]", limits, tally))
                text.append(IMAGE_PLACEHOLDER)
            else:
                raise BadRequest(f"messages[{i}].content[{j}] has unsupported type {kind!r}")
        out.append(Message(m["role"], "".join(text), images))
    return out


class PolicyServer:
    """``policy`` behind the routes of the module docstring, on FastAPI with uvicorn (``paravt_env.remote.asgi``:
    bodies read under a size cap and a deadline before they count, at most ``max_pending`` admitted). One request
    decodes, encodes and generates at a time (``work``): memory stays flat. ``serve_forever`` blocks;
    ``shutdown`` (from another thread) stops it."""

    def __init__(self, address: tuple[str, int], policy: HFPolicy, model_name: str, limits: ServeLimits | None = None) -> None:
        from paravt_env.remote.asgi import BoundedRequests, RequestBounds, UvicornServer

        self.policy, self.model_name = policy, model_name
        self.limits = limits or ServeLimits()
        if self.limits.max_prompt_tokens is None:
            self.limits.max_prompt_tokens = int(getattr(policy.model.config, "max_position_embeddings", 0)
                                                or getattr(getattr(policy.model.config, "text_config", None), "max_position_embeddings", 32768))  # fmt: skip
        self.work = threading.Lock()
        lim = self.limits
        self.bounded = BoundedRequests(self._app(), RequestBounds(lim.max_body_bytes, lim.body_timeout_s, lim.max_pending,
                                                                  lim.write_timeout_s, lim.max_unread_bytes))  # fmt: skip
        self.http = UvicornServer(self.bounded, address)
        self.server_address = self.http.address

    @property
    def url(self) -> str:
        return self.http.url

    def serve_forever(self) -> None:
        self.http.serve_forever()

    def shutdown(self) -> None:
        self.http.shutdown()

    def server_close(self) -> None:
        self.http.close()

    def _app(self) -> Any:
        app = FastAPI(title="paravt serve", description="A checkpoint behind OpenAI-compatible and sglang-style routes.")
        limiter = anyio.CapacityLimiter(max(2, min(self.limits.max_pending, 64)))

        @app.exception_handler(BadRequest)
        async def _bad(request: Request, exc: BadRequest) -> JSONResponse:
            return error_response(exc.status, str(exc), "BadRequest")

        route_errors(app)

        @app.exception_handler(Exception)
        async def _fault(request: Request, exc: Exception) -> JSONResponse:  # answered, not a dropped connection
            logger.exception("request failed")
            return error_response(500, f"{type(exc).__name__}: {exc}", "ServerError")

        async def run(handler: Any, request: Request) -> dict:
            raw = await request.body()  # already bounded and checked to be a JSON object by BoundedRequests
            if not raw:
                raise BadRequest("the body must be a JSON object")
            body = json.loads(raw)

            def locked() -> dict:
                with self.work:
                    return handler(body)

            return await anyio.to_thread.run_sync(locked, limiter=limiter)

        @app.get("/health")
        async def health() -> dict:
            return {"status": "ok"}

        @app.get("/v1/models")
        async def models() -> dict:
            return {"object": "list", "data": [{"id": self.model_name, "object": "model"}]}

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> dict:
            return await run(self._chat, request)

        @app.post("/generate")
        async def generate(request: Request) -> dict:
            return await run(self._generate, request)

        return app

    def _sampling(self, params: dict, tokens_key: str) -> tuple[float | None, int | None]:
        if not isinstance(params, dict):
            raise BadRequest("'sampling_params' must be an object")
        temperature = number(params, "temperature", 0.0, 2.0)
        number(params, "top_p", 0.0, 1.0)
        max_new = number(params, tokens_key, 1, self.limits.max_new_tokens, integer=True)
        return temperature, max_new

    def _check_prompt(self, n_tokens: int) -> None:
        cap = self.limits.max_prompt_tokens
        if cap and n_tokens > cap:
            raise BadRequest(f"the prompt is {n_tokens} tokens, above the limit of {cap}", 413)

    def _check_text(self, text: str, where: str) -> None:
        # A cheap bound before tokenising: no token of these tokenizers spans more than 64 characters.
        cap = self.limits.max_prompt_tokens
        if cap and len(text) > 64 * cap:
            raise BadRequest(f"{where} is {len(text)} characters, longer than any prompt of {cap} tokens", 413)

    def _chat(self, body: dict) -> dict:
        policy = self.policy
        temperature, max_new = self._sampling(body, "max_tokens")
        conversation = conversation_from_openai(body.get("messages"), self.limits)
        self._check_text("".join(m.text for m in conversation), "the text of 'messages'")
        encoded = policy.encode(conversation)
        self._check_prompt(len(encoded.input_ids))
        [gen] = policy.generate_encoded([encoded], temperature=temperature, max_new_tokens=max_new)
        return {
            "id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion", "created": int(time.time()),
            "model": self.model_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": gen.text},
                         "finish_reason": gen.finish_reason}],
            "usage": {"completion_tokens": len(gen.token_ids)},
        }  # fmt: skip

    def _generate(self, body: dict) -> dict:
        policy = self.policy
        text = body.get("text")
        if not isinstance(text, str):
            raise BadRequest("'text' (the rendered prompt) is required")
        self._check_text(text, "'text'")
        data = body.get("image_data") or []
        if not isinstance(data, list):
            raise BadRequest("'image_data' must be a list")
        if len(data) > self.limits.max_images:
            raise BadRequest(f"{len(data)} images in one request, above the limit of {self.limits.max_images}", 413)
        tally = PixelTally(self.limits)
        images = [decode_image(x, f"image_data[{i}]", self.limits, tally) for i, x in enumerate(data)]
        temperature, max_new = self._sampling(body.get("sampling_params") or {}, "max_new_tokens")
        encoded = policy._encode_text(text, images)
        self._check_prompt(len(encoded.input_ids))
        [gen] = policy.generate_encoded([encoded], temperature=temperature, max_new_tokens=max_new)
        text_out = policy.tokenizer.decode([t for t in gen.token_ids if t not in policy.eos_ids])
        return {
            "text": text_out,
            "meta_info": {
                "output_token_logprobs": [[lp, tid, None] for lp, tid in zip(gen.logprobs, gen.token_ids, strict=True)],
                "finish_reason": {"type": gen.finish_reason},
                "prompt_tokens": len(encoded.input_ids),
                "completion_tokens": len(gen.token_ids),
            },
        }


def serve(model: str, host: str = "127.0.0.1", port: int = 8000, ready=print, limits: ServeLimits | None = None) -> None:
    from paravt.policies.card import trained_pixels

    # A checkpoint trained here is served at its trained pixel budget (its card); others at their own.
    policy = HFPolicy.from_pretrained(model, device="auto", temperature=0.0, **trained_pixels(model))
    server = PolicyServer((host, port), policy, model, limits)
    ready(f"paravt serve: {model} listening on {server.url} (API docs at {server.url}/docs)")
    try:
        server.serve_forever()
    finally:
        server.server_close()
