"""``paravt serve``: a local checkpoint behind an OpenAI-compatible and an sglang-style HTTP API, on CPU.

For development and tests where sglang / vLLM (GPU stacks) are not installed: the same requests
``OpenAIPolicy`` and ``SGLangPolicy`` send to those servers, served by ``HFPolicy`` from the standard
library's threading HTTP server. Endpoints: ``GET /v1/models``, ``GET /health``,
``POST /v1/chat/completions`` (string or text / ``image_url`` parts with data URLs; ``max_tokens``,
``temperature``) and ``POST /generate`` (``text`` rendered with the chat template, one image pad per entry of
``image_data``; returns ``meta_info.output_token_logprobs``). Requests are served one generation at a time.
"""

from __future__ import annotations

import json
import logging
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from paravt_env.protocol import IMAGE_PLACEHOLDER

from .base import Message
from .hf import HFPolicy
from .images import from_base64

logger = logging.getLogger(__name__)


class BadRequest(ValueError):
    pass


def conversation_from_openai(messages: Any) -> list[Message]:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m:
            raise BadRequest(f"messages[{i}] must be an object with a 'role'")
        content = m.get("content") or ""
        if isinstance(content, str):
            out.append(Message(m["role"], content.replace(IMAGE_PLACEHOLDER, "")))
            continue
        text, images = [], []
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                text.append(str(part.get("text", "")).replace(IMAGE_PLACEHOLDER, ""))
            elif kind == "image_url":
                url = (part.get("image_url") or {}).get("url", "")
                if not url.startswith("data:"):
                    raise BadRequest(f"messages[{i}].content[{j}]: only data: URLs are served here (no downloads)")
                images.append(from_base64(url))
                text.append(IMAGE_PLACEHOLDER)
            else:
                raise BadRequest(f"messages[{i}].content[{j}] has unsupported type {kind!r}")
        out.append(Message(m["role"], "".join(text), images))
    return out


class PolicyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], policy: HFPolicy, model_name: str) -> None:
        super().__init__(address, _Handler)
        self.policy, self.model_name = policy, model_name


class _Handler(BaseHTTPRequestHandler):
    server: PolicyServer

    def log_message(self, fmt: str, *args: Any) -> None:
        logger.debug("%s " + fmt, self.address_string(), *args)

    def _send(self, code: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, {"status": "ok"})
        elif self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.server.model_name, "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path == "/v1/chat/completions":
                self._send(200, self._chat(body))
            elif self.path == "/generate":
                self._send(200, self._generate(body))
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})
        except (BadRequest, ValueError, KeyError, TypeError) as exc:
            self._send(400, {"error": {"message": f"{type(exc).__name__}: {exc}"}})
        except Exception as exc:  # a server error is answered, not a dropped connection
            logger.exception("request failed")
            self._send(500, {"error": {"message": f"{type(exc).__name__}: {exc}"}})

    def _chat(self, body: dict) -> dict:
        policy = self.server.policy
        conversation = conversation_from_openai(body.get("messages"))
        [gen] = policy.generate_encoded([policy.encode(conversation)], temperature=body.get("temperature"),
                                        max_new_tokens=body.get("max_tokens"))  # fmt: skip
        return {
            "id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion", "created": int(time.time()),
            "model": self.server.model_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": gen.text},
                         "finish_reason": gen.finish_reason}],
            "usage": {"completion_tokens": len(gen.token_ids)},
        }  # fmt: skip

    def _generate(self, body: dict) -> dict:
        policy = self.server.policy
        text = body.get("text")
        if not isinstance(text, str):
            raise BadRequest("'text' (the rendered prompt) is required")
        images = [from_base64(x) for x in (body.get("image_data") or [])]
        params = body.get("sampling_params") or {}
        encoded = policy._encode_text(text, images)
        [gen] = policy.generate_encoded([encoded], temperature=params.get("temperature"),
                                        max_new_tokens=params.get("max_new_tokens"))  # fmt: skip
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


def serve(model: str, host: str = "127.0.0.1", port: int = 8000, ready=print) -> None:
    from .card import trained_pixels

    # A checkpoint trained here is served at its trained pixel budget (its card); others at their own.
    policy = HFPolicy.from_pretrained(model, device="auto", temperature=0.0, **trained_pixels(model))
    server = PolicyServer((host, port), policy, model)
    ready(f"paravt serve: {model} listening on http://{server.server_address[0]}:{server.server_address[1]}")
    try:
        server.serve_forever()
    finally:
        server.server_close()
