"""``paravt serve-env``: ``VideoToolEnv`` over HTTP, one env per session, many sessions at once.

The server owns its data (``--data``): a client picks a sample by ``index`` or ``sample_id``, never by a path.
Routes (JSON in and out; the wire format of observations is ``paravt_env.remote.wire``):

- ``GET /health``: ``{"status": "ok", "sessions", "max_sessions", "samples", "uptime_s"}``
- ``GET /v1/samples``: ``{"samples": [{"index", "id", "question_type", "duration"}, ...]}``
- ``POST /v1/sessions`` ``{"options": {...}, "frame_encoding": "raw" | "png", "render_mode": null | "rgb_array"}``:
  a new env with the options ``gymnasium.make("ParaVT/VideoTool-v0", ...)`` takes (201, ``session_id``, the
  spaces' bounds, the full config)
- ``POST /v1/sessions/{id}/reset`` ``{"seed": int | null, "options": {"index" | "sample_id", "epoch", "frame_budget"}}``:
  ``{"observation", "info", "sample"}``
- ``POST /v1/sessions/{id}/step`` ``{"action": str}``: ``{"observation", "reward", "terminated", "truncated", "info"}``
- ``GET /v1/sessions/{id}/render``: ``{"frame": FRAMES}`` (the contact sheet; sessions opened with ``rgb_array``)
- ``DELETE /v1/sessions/{id}`` (or ``POST .../close``): closes the env

Errors are ``{"error": {"message", "type", "code"}}`` with a 4xx naming the field at fault: 400 bad field or
option (``type`` is the exception the in-process env raised: TypeError, ValueError, IndexError), 404 no such
route or session, 405 wrong method, 409 step after the episode ended or while the session is busy, 410 a
session closed for idling, 411 / 413 missing or too large a body, 422 the server's own video of the asked
sample cannot be decoded, 503 (with ``Retry-After``) all sessions taken or too many requests in flight.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from dataclasses import fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..data import VideoQASample
from .sessions import API, ApiError, EnvServerLimits, Session, SessionStore
from .wire import WireError, jsonable

logger = logging.getLogger(__name__)

__all__ = ["ApiError", "EnvServer", "EnvServerLimits", "serve_env"]


class EnvServer(ThreadingHTTPServer):
    """The HTTP server of a ``SessionStore``; a thread reaps idle sessions, ``max_inflight`` bounds requests."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], samples: list[VideoQASample], limits: EnvServerLimits | None = None):
        self.limits = limits or EnvServerLimits()
        self.store = SessionStore(samples, self.limits)
        self.inflight = 0
        self._inflight_lock = threading.Lock()
        self.started = time.monotonic()
        super().__init__(address, _Handler)
        self._stop = threading.Event()
        self._reaper = threading.Thread(target=self._reap_loop, name="serve-env-reaper", daemon=True)
        self._reaper.start()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def sessions(self) -> dict[str, Session]:
        return self.store.sessions

    def _reap_loop(self) -> None:
        period = min(5.0, self.limits.idle_timeout_s / 4)
        while not self._stop.wait(period):
            try:
                self.store.reap()
            except Exception:  # the reaper must outlive one bad close
                logger.exception("reaping idle sessions failed")

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that drops its connection (reset, broken pipe) is not a server fault: no traceback on stderr.
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            logger.debug("client %s went away: %s", client_address, exc)
            return
        logger.exception("request from %s failed", client_address)

    def server_close(self) -> None:
        self._stop.set()
        super().server_close()
        self.store.close_all()

    def admit(self) -> bool:
        with self._inflight_lock:
            if self.inflight >= self.limits.max_inflight:
                return False
            self.inflight += 1
            return True

    def leave(self) -> None:
        with self._inflight_lock:
            self.inflight -= 1

    def health(self) -> dict[str, Any]:
        store = self.store
        with store.lock:
            n, steps = len(store.sessions), store.steps_served
        return {"status": "ok", "sessions": n, "max_sessions": self.limits.max_sessions, "samples": len(store.samples),
                "steps_served": steps, "uptime_s": round(time.monotonic() - self.started, 3)}  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    server: EnvServer
    protocol_version = "HTTP/1.1"  # keep-alive: a step is one round trip, not a TCP handshake

    def setup(self) -> None:
        self.timeout = self.server.limits.socket_timeout_s
        super().setup()

    def log_message(self, fmt: str, *args: Any) -> None:
        logger.debug("%s " + fmt, self.address_string(), *args)

    def _send(self, code: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload, allow_nan=False).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        try:
            self.wfile.write(data)
        except OSError:
            self.close_connection = True

    def _body(self) -> dict[str, Any]:
        declared = self.headers.get("Content-Length")
        if declared is None:
            raise ApiError(411, "a Content-Length header is required")
        try:
            size = int(declared)
        except ValueError:
            raise ApiError(400, f"Content-Length {declared!r} is not an integer") from None
        if size < 0:
            raise ApiError(400, f"Content-Length {size} is negative")
        if size > self.server.limits.max_body_bytes:
            raise ApiError(413, f"the body is {size} bytes, above the limit of {self.server.limits.max_body_bytes}")
        raw = self.rfile.read(size)
        self._body_read = True
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except UnicodeDecodeError:
            raise ApiError(400, "the body is not UTF-8") from None
        except json.JSONDecodeError as exc:
            raise ApiError(400, f"the body is not JSON ({exc.msg} at position {exc.pos})") from None
        if not isinstance(body, dict):
            raise ApiError(400, f"the body must be a JSON object, got {type(body).__name__}")
        return body

    def _route(self, method: str) -> tuple[Any, int]:
        """The handler of this request and the status it answers with."""
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        srv, store = self.server, self.server.store
        parts = path.split("/")
        table: dict[tuple[str, str], Any] = {
            ("GET", "/health"): (lambda: srv.health(), 200),
            ("GET", f"{API}/samples"): (lambda: {"samples": [
                {"index": i, "id": s.id, "question_type": s.question_type, "duration": s.duration}
                for i, s in enumerate(store.samples)]}, 200),  # fmt: skip
            ("POST", f"{API}/sessions"): (lambda: self._opened(store.open_session(self._body())), 201),
        }
        if (method, path) in table:
            return table[(method, path)]
        if path.startswith(f"{API}/sessions/") and len(parts) in (4, 5):
            sid, action = parts[3], (parts[4] if len(parts) == 5 else "")
            routes = {
                ("POST", "reset"): lambda s: store.reset(s, self._body()),
                ("POST", "step"): lambda s: store.step(s, self._body()),
                ("GET", "render"): lambda s: store.render(s),
            }
            if (method, action) in routes:
                return (lambda: self._locked(sid, routes[(method, action)]), 200)
            if (method, action) in (("DELETE", ""), ("POST", "close")):
                return (lambda: (store.close_session(sid), {"closed": sid})[1], 200)
            if action in ("reset", "step", "render", "close", ""):
                raise ApiError(405, f"{method} is not allowed on {path}", "MethodNotAllowed")
        if any(p == path for (_, p) in table):
            raise ApiError(405, f"{method} is not allowed on {path}", "MethodNotAllowed")
        raise ApiError(404, f"no route {method} {path}", "NoSuchRoute")

    def _opened(self, session: Session) -> dict[str, Any]:
        env = session.env
        return {
            "session_id": session.id,
            "frame_encoding": session.encoding,
            "spaces": {"max_frames": env.observation_space["frames"].max_frames,
                       "max_pixels": env.observation_space["frames"].max_pixels,
                       "max_text_chars": env.action_space.max_length},  # fmt: skip
            "config": jsonable({f.name: getattr(env.config, f.name) for f in fields(env.config) if f.name != "subagent"}),
        }

    def _locked(self, sid: str, call: Any) -> dict[str, Any]:
        session = self.server.store.session(sid)
        if not session.lock.acquire(blocking=False):
            raise ApiError(409, f"session {sid} is busy with another request: an env takes one call at a time", "SessionBusy")
        try:
            return call(session)
        finally:
            session.last_used = time.monotonic()
            session.lock.release()

    def _handle(self, method: str) -> None:
        if not self.server.admit():
            self.close_connection = True
            self._send(503, {"error": {"message": f"{self.server.limits.max_inflight} requests in flight; retry later",
                                       "type": "ServerBusy", "code": 503}}, {"Retry-After": "1"})  # fmt: skip
            return
        self._body_read = False
        try:
            call, status = self._route(method)
            self._send(status, call())
        except ApiError as exc:
            # A request refused before its body was read leaves the stream out of step: close the connection.
            if not self._body_read and self.headers.get("Content-Length", "0").strip() not in ("", "0"):
                self.close_connection = True
            self._send(exc.status, {"error": {"message": str(exc), "type": exc.kind, "code": exc.status}}, exc.headers)
        except WireError as exc:
            self._send(400, {"error": {"message": str(exc), "type": "ValueError", "code": 400}})
        except Exception as exc:  # a server fault is answered (500), not a dropped connection
            logger.exception("%s %s failed", method, self.path)
            self._send(500, {"error": {"message": f"{type(exc).__name__}: {exc}", "type": "ServerError", "code": 500}})
        finally:
            self.server.leave()

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PUT(self) -> None:
        self._handle("PUT")


def serve_env(data: str, host: str = "127.0.0.1", port: int = 8100, *, video_root: str | None = None,
              limits: EnvServerLimits | None = None, ready=print) -> None:  # fmt: skip
    """Load ``data`` (anything ``load_samples`` reads) and serve it until interrupted."""
    from ..data import load_samples

    samples = load_samples(data, video_root=video_root)
    server = EnvServer((host, port), samples, limits)
    lim = server.limits
    ready(f"paravt serve-env: {len(samples)} samples from {data} at {server.url} "
          f"(at most {lim.max_sessions} sessions, closed after {lim.idle_timeout_s:g} s idle)")  # fmt: skip
    try:
        server.serve_forever()
    finally:
        server.server_close()
