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
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import PurePath
from typing import Any

from ..config import EnvConfig
from ..data import VideoQASample
from ..env import VideoToolEnv
from ..video import VideoDecodeError
from .wire import FRAME_ENCODINGS, WireError, encode_frames, encode_observation, jsonable

logger = logging.getLogger(__name__)

API = "/v1"

# Options a remote client may not set: the server owns the data, and a sub-agent is a model in the client's
# process (open a session with tool_result="frames", or run the sub-agent server-side in your own process).
SERVER_OWNED = {
    "samples": "the server owns its data (paravt serve-env --data); pick a sample with reset option "
               "'index' or 'sample_id'",
    "video_root": "the server owns its data (paravt serve-env --video-root)",
    "subagent": "a sub-agent is a model and cannot travel as JSON; remote sessions run tool_result='frames'",
}  # fmt: skip
RESET_KEYS = frozenset({"index", "sample_id", "epoch", "frame_budget"})


@dataclass
class EnvServerLimits:
    """What ``paravt serve-env`` lets its clients hold."""

    max_sessions: int = 64
    """Open sessions (one env each, each with its own decoders); a new one beyond it gets 503."""
    idle_timeout_s: float = 600.0
    """A session untouched this long is closed (its env and decoders freed); using it then answers 410."""
    max_body_bytes: int = 1 << 20
    """Largest request body (413 above it, refused before it is read). An action is text: 1 MiB is 30x the
    env's default ``max_action_chars``."""
    max_inflight: int = 256
    """Requests being served at once; beyond it 503 (a thread per request is cheap, unboundedly many are not)."""
    socket_timeout_s: float = 120.0
    """A connection silent this long (mid-request or idle keep-alive) is dropped, freeing its thread."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
                raise ValueError(f"EnvServerLimits.{f.name} must be a positive number, got {value!r}")


class ApiError(Exception):
    """A request the server refuses: HTTP status, message naming the field, and the kind of error."""

    def __init__(self, status: int, message: str, kind: str = "BadRequest", headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.kind, self.headers = status, kind, headers or {}


def public_sample(sample: VideoQASample) -> dict[str, Any]:
    """The sample as a client sees it: everything but the server's file paths (the video by its file name)."""
    row = sample.to_dict()
    row["video_path"] = PurePath(sample.video_path).name
    row["extra"] = {k: v for k, v in row["extra"].items() if not (isinstance(v, str) and ("/" in v or "\\" in v))}
    return jsonable(row)


def _env_options(options: Any) -> dict[str, Any]:
    if not isinstance(options, dict):
        raise ApiError(400, f"'options' must be an object of env options, got {type(options).__name__}")
    for key, why in SERVER_OWNED.items():
        if key in options:
            raise ApiError(400, f"option {key!r} cannot be set by a client: {why}")
    if options.get("tool_result") == "subagent":
        raise ApiError(400, f"option tool_result='subagent' needs a sub-agent: {SERVER_OWNED['subagent']}")
    options = dict(options)
    if isinstance(options.get("gating_choices"), list):
        options["gating_choices"] = tuple(options["gating_choices"])
    return options


class Session:
    """One client's env. ``lock`` makes a second request on a busy session a 409, not a race."""

    def __init__(self, sid: str, env: VideoToolEnv, encoding: str) -> None:
        self.id, self.env, self.encoding = sid, env, encoding
        self.lock = threading.Lock()
        self.last_used = time.monotonic()
        self.steps = 0


class EnvServer(ThreadingHTTPServer):
    """The HTTP server holding the sessions. ``reap()`` closes idle ones (a thread calls it periodically)."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], samples: list[VideoQASample], limits: EnvServerLimits | None = None):
        if not samples:
            raise ValueError("paravt serve-env needs at least one sample")
        self.samples = samples
        self.limits = limits or EnvServerLimits()
        self.index_of: dict[str, int] = {}
        for i, s in enumerate(samples):
            self.index_of.setdefault(s.id, i)
        self.sessions: dict[str, Session] = {}
        self.expired: OrderedDict[str, float] = OrderedDict()  # recent idle-closed ids: a 410 that says why
        self.lock = threading.Lock()
        self.inflight = 0
        self.started = time.monotonic()
        self.steps_served = 0
        super().__init__(address, _Handler)
        self._stop = threading.Event()
        self._reaper = threading.Thread(target=self._reap_loop, name="serve-env-reaper", daemon=True)
        self._reaper.start()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    # --- sessions ---------------------------------------------------------------------------------------
    def open_session(self, body: dict[str, Any]) -> Session:
        unknown = sorted(set(body) - {"options", "frame_encoding", "render_mode"})
        if unknown:
            raise ApiError(400, f"unknown field(s) {unknown} in a new session; known: frame_encoding, options, render_mode")
        encoding = body.get("frame_encoding", "raw")
        if encoding not in FRAME_ENCODINGS:
            raise ApiError(400, f"'frame_encoding' must be one of {list(FRAME_ENCODINGS)}, got {encoding!r}")
        options = _env_options(body.get("options", {}))
        try:
            config = EnvConfig.from_kwargs(**options)
            env = VideoToolEnv(self.samples, config, render_mode=body.get("render_mode"))
        except (TypeError, ValueError) as exc:
            raise ApiError(400, str(exc), type(exc).__name__) from None
        self.reap()
        with self.lock:
            if len(self.sessions) >= self.limits.max_sessions:
                env.close()
                raise ApiError(503, f"all {self.limits.max_sessions} sessions are taken; close one or retry later",
                               "ServerBusy", {"Retry-After": "5"})  # fmt: skip
            sid = secrets.token_hex(16)  # 128 random bits: ids never collide, across restarts too
            session = self.sessions[sid] = Session(sid, env, encoding)
        return session

    def session(self, sid: str) -> Session:
        with self.lock:
            session = self.sessions.get(sid)
            if session is None:
                if sid in self.expired:
                    raise ApiError(410, f"session {sid} was closed after {self.limits.idle_timeout_s:g} s idle; open a new one",
                                   "SessionExpired")  # fmt: skip
                raise ApiError(404, f"no session {sid!r} (closed, or never opened on this server)", "NoSuchSession")
            session.last_used = time.monotonic()
            return session

    def close_session(self, sid: str) -> None:
        with self.lock:
            session = self.sessions.pop(sid, None)
        if session is None:
            self.session(sid)  # raises 404 / 410
            return
        with session.lock:  # a request still running on it finishes first
            session.env.close()

    def reap(self) -> int:
        """Close sessions idle past the limit; returns how many."""
        now = time.monotonic()
        with self.lock:
            stale = [s for s in self.sessions.values()
                     if now - s.last_used > self.limits.idle_timeout_s and not s.lock.locked()]  # fmt: skip
            for s in stale:
                del self.sessions[s.id]
                self.expired[s.id] = now
            while len(self.expired) > 4096:
                self.expired.popitem(last=False)
        for s in stale:
            logger.info("closing session %s after %.0f s idle", s.id, now - s.last_used)
            with s.lock:
                s.env.close()
        return len(stale)

    def _reap_loop(self) -> None:
        period = min(5.0, self.limits.idle_timeout_s / 4)
        while not self._stop.wait(period):
            try:
                self.reap()
            except Exception:  # the reaper must outlive one bad close
                logger.exception("reaping idle sessions failed")

    def server_close(self) -> None:
        self._stop.set()
        super().server_close()
        with self.lock:
            sessions, self.sessions = list(self.sessions.values()), {}
        for s in sessions:
            s.env.close()

    def admit(self) -> bool:
        with self.lock:
            if self.inflight >= self.limits.max_inflight:
                return False
            self.inflight += 1
            return True

    def leave(self) -> None:
        with self.lock:
            self.inflight -= 1

    # --- env calls --------------------------------------------------------------------------------------
    def reset(self, session: Session, body: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(body) - {"seed", "options"})
        if unknown:
            raise ApiError(400, f"unknown field(s) {unknown} in a reset; known: options, seed")
        seed = body.get("seed")
        if seed is not None and not (isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0):
            raise ApiError(400, f"'seed' must be a non-negative integer or null, got {seed!r}", "TypeError")
        options = body.get("options") or {}
        if not isinstance(options, dict):
            raise ApiError(400, f"'options' must be an object, got {type(options).__name__}")
        if "sample" in options:
            raise ApiError(400, "reset option 'sample' names a server file; pick one with 'index' or 'sample_id'")
        unknown = sorted(set(options) - RESET_KEYS)
        if unknown:
            raise ApiError(400, f"unknown reset option(s) {unknown}; known: {sorted(RESET_KEYS)}", "ValueError")
        options = dict(options)
        if "sample_id" in options:
            sid = options.pop("sample_id")
            if "index" in options:
                raise ApiError(400, "give reset option 'index' or 'sample_id', not both")
            if str(sid) not in self.index_of:
                raise ApiError(400, f"no sample with id {sid!r} on this server (GET {API}/samples lists them)", "KeyError")
            options["index"] = self.index_of[str(sid)]
        for key in ("index", "epoch", "frame_budget"):
            if key in options and options[key] is not None and not (isinstance(options[key], int) and not isinstance(options[key], bool)):
                raise ApiError(400, f"reset option {key!r} must be an integer, got {options[key]!r}", "TypeError")
        try:
            obs, info = session.env.reset(seed=seed, options=options)
        except (TypeError, ValueError, IndexError) as exc:
            raise ApiError(400, str(exc), type(exc).__name__) from None
        except (VideoDecodeError, FileNotFoundError) as exc:
            raise ApiError(422, f"the server cannot read this sample's video: {exc}", type(exc).__name__) from None
        return {"observation": encode_observation(obs, session.encoding), "info": jsonable(info),
                "sample": public_sample(session.env.sample)}  # fmt: skip

    def step(self, session: Session, body: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(body) - {"action"})
        if unknown:
            raise ApiError(400, f"unknown field(s) {unknown} in a step; known: action")
        if "action" not in body:
            raise ApiError(400, "a step needs 'action' (the agent's whole turn as a string)")
        action = body["action"]
        if not isinstance(action, str):  # the env coerces anything to str in process; JSON strings only here
            raise ApiError(400, f"'action' must be a string, got {type(action).__name__}", "TypeError")
        try:
            obs, reward, terminated, truncated, info = session.env.step(action)
        except RuntimeError as exc:  # step after the end (VideoToolEnv's only raise on a step)
            raise ApiError(409, str(exc), "RuntimeError") from None
        session.steps += 1
        with self.lock:
            self.steps_served += 1
        return {"observation": encode_observation(obs, session.encoding), "reward": float(reward),
                "terminated": bool(terminated), "truncated": bool(truncated), "info": jsonable(info)}  # fmt: skip

    def render(self, session: Session) -> dict[str, Any]:
        image = session.env.render()
        if image is None:
            raise ApiError(409, "this session was opened without render_mode='rgb_array'")
        return {"frame": encode_frames(image[None], session.encoding)}

    def health(self) -> dict[str, Any]:
        with self.lock:
            n = len(self.sessions)
        return {"status": "ok", "sessions": n, "max_sessions": self.limits.max_sessions, "samples": len(self.samples),
                "steps_served": self.steps_served, "uptime_s": round(time.monotonic() - self.started, 3)}  # fmt: skip


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
        srv = self.server
        parts = path.split("/")
        table: dict[tuple[str, str], Any] = {
            ("GET", "/health"): (lambda: srv.health(), 200),
            ("GET", f"{API}/samples"): (lambda: {"samples": [
                {"index": i, "id": s.id, "question_type": s.question_type, "duration": s.duration}
                for i, s in enumerate(srv.samples)]}, 200),  # fmt: skip
            ("POST", f"{API}/sessions"): (lambda: self._opened(srv.open_session(self._body())), 201),
        }
        if (method, path) in table:
            return table[(method, path)]
        if path.startswith(f"{API}/sessions/") and len(parts) in (4, 5):
            sid, action = parts[3], (parts[4] if len(parts) == 5 else "")
            routes = {
                ("POST", "reset"): lambda s: srv.reset(s, self._body()),
                ("POST", "step"): lambda s: srv.step(s, self._body()),
                ("GET", "render"): lambda s: srv.render(s),
            }
            if (method, action) in routes:
                return (lambda: self._locked(sid, routes[(method, action)]), 200)
            if (method, action) in (("DELETE", ""), ("POST", "close")):
                return (lambda: (srv.close_session(sid), {"closed": sid})[1], 200)
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
        session = self.server.session(sid)
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
