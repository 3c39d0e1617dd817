"""A scripted model behind a real OpenAI-compatible HTTP server: it records every request body and answers
from a script indexed by how many assistant turns the request already holds (so two clients that send the
same conversation get the same replies). Used to compare what two drivers send, request by request."""

from __future__ import annotations

import base64
import io
import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from paravt_env.data.index_video import decode_index


class ScriptedModel:
    def __init__(self, replies: Sequence[str], name: str = "scripted") -> None:
        self.replies, self.name = list(replies), name
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # /v1/models
                self._send({"object": "list", "data": [{"id": model.name, "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with model._lock:
                    model.requests.append(body)
                turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
                text = model.replies[min(turn, len(model.replies) - 1)]
                self._send({"id": "x", "object": "chat.completion", "created": 0, "model": model.name,
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": text}}],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})  # fmt: skip

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedModel:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def image_of(url: str) -> tuple[str, np.ndarray]:
    """(format, RGB array) of a data URL."""
    from PIL import Image

    head, data = url.split(",", 1)
    with Image.open(io.BytesIO(base64.b64decode(data))) as img:
        return head.removeprefix("data:image/").removesuffix(";base64"), np.asarray(img.convert("RGB"))


def summarize_request(body: dict) -> dict:
    """A request with each image replaced by (format, height, width, frame number of the index video) and each
    video part by its URL."""
    messages = []
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, list):
            parts = []
            for p in content:
                if p["type"] == "text":
                    parts.append(("text", p["text"]))
                elif p["type"] == "video_url":
                    parts.append(("video", p["video_url"]["url"]))
                else:
                    fmt, img = image_of(p["image_url"]["url"])
                    parts.append(("image", fmt, img.shape[0], img.shape[1], decode_index(img)))
            content = parts
        messages.append((m["role"], content))
    return {"messages": messages, "max_tokens": body.get("max_tokens"), "temperature": body.get("temperature"),
            "model": body.get("model")}  # fmt: skip
