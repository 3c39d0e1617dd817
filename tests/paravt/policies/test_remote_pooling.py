"""The remote policies keep their connections: one policy, many requests, as many TCP connections as it runs
requests at once (a new client per request opened a connection each time)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("torch")

from paravt.policies.remote import OpenAIPolicy  # noqa: E402
from paravt_env.messages import Message  # noqa: E402


class KeepAliveModel:
    """An HTTP/1.1 chat-completions server that counts the connections it accepted."""

    def __init__(self) -> None:
        self.connections = 0
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                model.connections += 1
                super().setup()

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                data = json.dumps({"choices": [{"message": {"content": "<answer>A</answer>"}, "finish_reason": "stop"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_one_policy_reuses_its_connections():
    model = KeepAliveModel()
    try:
        policy = OpenAIPolicy(model.url, model="m", concurrency=1)
        conversation = [Message("user", "Which colour?")]
        out = policy.generate([conversation] * 6)
        assert [g.text for g in out] == ["<answer>A</answer>"] * 6
        assert model.connections == 1
    finally:
        model.close()
