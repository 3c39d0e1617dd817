"""The HTTP client of the remote policies against a real local server that misbehaves on purpose: transient
codes retried (Retry-After honoured), one deadline per request, a cap on the answer, bytes that are not UTF-8."""

import http.server
import json
import threading
import time

import pytest

from paravt.policies.remote import ServerError, post_json, retry_after


class _Handler(http.server.BaseHTTPRequestHandler):
    hits: dict[str, int] = {}

    def log_message(self, *args):  # quiet
        pass

    def _send(self, code, body: bytes, headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        if not any(k.lower() == "content-length" for k, _ in headers):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        n = _Handler.hits[self.path] = _Handler.hits.get(self.path, 0) + 1
        ok = json.dumps({"ok": True, "attempt": n}).encode()
        if self.path in ("/429", "/408", "/425", "/503"):
            if n == 1:
                self._send(int(self.path[1:]), b"later", [("Retry-After", "0.2")])
            else:
                self._send(200, ok)
        elif self.path == "/always408":
            self._send(408, b"timeout")
        elif self.path == "/400":
            self._send(400, b"bad field 'temperature'")
        elif self.path == "/trickle":  # a byte a second: per-read timeouts never fire
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            for _ in range(100):
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.25)
        elif self.path == "/big-declared":
            self._send(200, b"{}", [("Content-Length", str(50 * 2**20))])
        elif self.path == "/big-chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"x" * 65536
            try:
                for _ in range(64):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                return
        elif self.path == "/latin1":
            self._send(200, b'{"text": "caf\xe9"}')


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.mark.parametrize("code", ["429", "408", "425", "503"])
def test_transient_codes_are_retried_after_the_wait_the_server_asks_for(server, code):
    t0 = time.monotonic()
    assert post_json(f"{server}/{code}", {}, timeout=5, retries=2, backoff=30) == {"ok": True, "attempt": 2}
    assert 0.2 <= time.monotonic() - t0 < 10  # Retry-After 0.2 s, not the 30 s backoff


def test_a_server_that_keeps_asking_for_later_is_a_transient_failure(server):
    with pytest.raises(ServerError, match=r"always408 failed after 3 attempts \(last: HTTP 408: timeout\)") as err:
        post_json(f"{server}/always408", {}, timeout=5, retries=2, backoff=0)
    assert err.value.transient  # paravt eval reruns such a sample on resume


def test_a_rejected_request_is_not_retried_and_names_the_answer(server):
    with pytest.raises(ServerError, match=r"/400 rejected the request \(HTTP 400: bad field 'temperature'\)") as err:
        post_json(f"{server}/400", {}, timeout=5, retries=3, backoff=0)
    assert not err.value.transient and _Handler.hits["/400"] == 1


def test_one_deadline_per_request_not_per_socket_read(server):
    t0 = time.monotonic()
    with pytest.raises(ServerError, match=r"within the 1 s deadline") as err:
        post_json(f"{server}/trickle", {}, timeout=1, retries=0, backoff=0)
    assert time.monotonic() - t0 < 5 and err.value.transient  # the server would take 25 s


@pytest.mark.parametrize("path", ["/big-declared", "/big-chunked"])
def test_answers_above_the_cap_are_refused(server, path):
    with pytest.raises(ServerError, match=r"above the 1048576-byte cap|more than 1048576 bytes") as err:
        post_json(f"{server}{path}", {}, timeout=10, retries=2, backoff=0, max_bytes=2**20)
    assert not err.value.transient


def test_an_answer_that_is_not_utf8_names_the_server(server):
    with pytest.raises(ServerError, match=r"127\.0\.0\.1:\d+/latin1 answered bytes that are not UTF-8"):
        post_json(f"{server}/latin1", {}, timeout=5, retries=0, backoff=0)


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after("3") == 3.0 and retry_after(None) is None and retry_after("soon") is None
    import email.utils

    assert 8 < retry_after(email.utils.formatdate(time.time() + 10, usegmt=True)) <= 10
