"""The LLM judge against a real local HTTP server speaking the OpenAI chat-completions protocol."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from paravt_env.rewards import JUDGE_STATS, RewardConfig, compute_reward, llm_judge


class _Judge(BaseHTTPRequestHandler):
    reply = "1.0"
    seen: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append((self.path, self.headers.get("Authorization"), body))
        if type(self).reply is None:
            self.send_response(500)
            self.end_headers()
            return
        data = json.dumps({"choices": [{"message": {"content": type(self).reply}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def judge_server(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("LLM_JUDGE_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
    monkeypatch.setenv("LLM_JUDGE_API_KEY", "sk-test")
    monkeypatch.setenv("LLM_JUDGE_MODEL", "judge-model")
    _Judge.seen = []
    yield _Judge
    server.shutdown()


def test_judge_score_is_used(judge_server):
    judge_server.reply = "0.5"
    assert llm_judge("What shape?", "a round thing", "circle") == 0.5
    path, auth, body = judge_server.seen[-1]
    assert path == "/v1/chat/completions" and auth == "Bearer sk-test"
    assert body["model"] == "judge-model" and body["temperature"] == 0
    assert "Ground truth answer: circle" in body["messages"][0]["content"]


def test_judge_through_compute_reward_in_llm_mode(judge_server):
    judge_server.reply = " 1.0\n"
    r = compute_reward(
        "<answer>a round thing</answer>", "circle", "oe", RewardConfig(True, 0.5, 1.0, "llm"), question="Q?"
    )
    assert r.accuracy == 1.0
    assert "Question: Q?" in judge_server.seen[-1][2]["messages"][0]["content"]


@pytest.mark.parametrize("reply", ["maybe", None, "."])
def test_judge_failures_fall_back_to_f1(judge_server, reply):
    judge_server.reply = reply
    failures = JUDGE_STATS.failures
    assert llm_judge("Q", "a red square", "red circle") == pytest.approx(0.5)
    assert JUDGE_STATS.failures == failures + 1


def test_unreachable_judge_falls_back_quickly(monkeypatch):
    monkeypatch.setenv("LLM_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")  # discard port: connection refused
    monkeypatch.setenv("LLM_JUDGE_TIMEOUT", "2")
    assert llm_judge("Q", "red circle", "red circle") == 1.0


def test_judge_scores_are_clamped(judge_server):
    judge_server.reply = "7"
    assert llm_judge("Q", "x", "y") == 1.0
