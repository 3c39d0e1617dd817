"""``paravt serve-env``: ``VideoToolEnv`` over HTTP, one env per session, many sessions at once, on FastAPI with
uvicorn.

The server owns its data (``--data``): a client picks a sample by ``index`` or ``sample_id``, never by a path.
Routes (JSON in and out; the wire format of observations is ``paravt_env.remote.wire``; the OpenAPI schema of every
request and reply at ``/docs`` and ``/openapi.json``):

- ``GET /health``: ``{"status": "ok", "sessions", "max_sessions", "samples", "steps_served", "uptime_s", "limits"}``
- ``GET /v1/samples``: ``{"samples": [{"index", "id", "question_type", "duration"}, ...]}``
- ``POST /v1/sessions`` ``{"options": {...}, "frame_encoding": "raw" | "png", "render_mode": null | "rgb_array"}``:
  a new env with the options ``gymnasium.make("ParaVT/VideoTool-v0", ...)`` takes, within the server's bounds
  (201, ``session_id``, the spaces' bounds, the full config)
- ``POST /v1/sessions/{id}/reset`` ``{"seed": int | null, "options": {"index" | "sample_id", "epoch", "frame_budget"}}``:
  ``{"observation", "info", "sample"}``
- ``POST /v1/sessions/{id}/step`` ``{"action": str}``: ``{"observation", "reward", "terminated", "truncated", "info"}``
- ``GET /v1/sessions/{id}/render``: ``{"frame": FRAMES}`` (the contact sheet; sessions opened with ``rgb_array``)
- ``DELETE /v1/sessions/{id}`` (or ``POST .../close``): closes the env
- ``/openenv/...``: the same env in OpenEnv's protocol (``paravt_env.remote.openenv``)
- ``/create_session``, ``/create``, ``/videotool/...``: the same env in the Open Reward Standard, when ``openreward``
  is installed (``paravt_env.remote.ors``; else these answer 501)

Errors are ``{"error": {"message", "type", "code"}}`` with a 4xx naming the field at fault: 400 bad field, option
or body (``type`` is the exception the in-process env raised: TypeError, ValueError, IndexError), 404 no such
route or session, 405 wrong method, 408 a body not received within ``body_timeout_s``, 409 step after the episode
ended or while the session is busy, 410 a session closed for idling, 411 / 413 missing or too large a body, 422
the server cannot decode the asked sample's video (the sample named, never the server's path), 503 (with
``Retry-After``) all sessions taken or too many requests in flight.

What a client can hold is bounded (``EnvServerLimits``): a request is admitted (counted in flight) only once its
whole body has arrived within ``body_timeout_s``, so slow senders hold a connection, not a slot; every option that
scales memory or work (pixels, frames, crops, parallel calls, turns, action length) has a ceiling, reported by
``/health``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import asdict, fields
from typing import Any, Literal

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from ..data import VideoQASample
from .asgi import BoundedRequests, RequestBounds, UvicornServer, error_response, route_errors
from .ors import with_ors
from .sessions import API, ApiError, EnvServerLimits, Session, SessionStore
from .wire import WireError, jsonable

logger = logging.getLogger(__name__)

__all__ = ["ApiError", "EnvServer", "EnvServerLimits", "create_app", "serve_env"]

SEED_MAX = 2**64 - 1  # numpy's seed range: a 4,400-digit seed is a 400, not a 500


# --- the requests and replies (pydantic: validation, and the OpenAPI schema at /docs) ---------------------------
class _Strict(BaseModel):
    # strict: a string seed ("1") is refused, not coerced (a client's type error is the client's to see)
    model_config = ConfigDict(extra="forbid", strict=True)


class SessionRequest(_Strict):
    options: dict[str, Any] = Field(default_factory=dict, description="EnvConfig fields, within the server's bounds")
    frame_encoding: Literal["raw", "png"] = "raw"
    render_mode: Literal["rgb_array"] | None = None


class ResetRequest(_Strict):
    seed: int | None = Field(None, ge=0, le=SEED_MAX)
    options: dict[str, Any] | None = Field(None, description="index or sample_id, epoch, frame_budget")


class StepRequest(_Strict):
    action: str = Field(description="the agent's whole turn")
    turn: int | None = Field(None, ge=0, le=SEED_MAX, description="the turns this client has stepped in the episode: "
                             "a retry of a step whose reply was lost gets that reply again, not a second turn")


class Health(BaseModel):
    status: str
    sessions: int
    max_sessions: int
    samples: int
    steps_served: int
    uptime_s: float
    limits: dict[str, float]


class SessionOpened(BaseModel):
    session_id: str
    frame_encoding: str
    spaces: dict[str, int]
    config: dict[str, Any]


class ResetReply(BaseModel):
    observation: dict[str, Any]
    info: dict[str, Any]
    sample: dict[str, Any]


class StepReply(BaseModel):
    observation: dict[str, Any]
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


# --- the app --------------------------------------------------------------------------------------------------
def create_app(server: EnvServer) -> FastAPI:
    """The FastAPI app of ``server`` (its store, limits and thread limiter)."""
    store = server.store
    app = FastAPI(title="paravt serve-env", version="1",
                  description="VideoToolEnv sessions over HTTP (ParaVT-Gym). Errors: {error: {message, type, code}}.")  # fmt: skip

    async def in_thread(fn: Any, *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args, limiter=server.limiter)

    @app.exception_handler(ApiError)
    async def _apierror_response(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, str(exc), exc.kind, exc.headers)

    @app.exception_handler(WireError)
    async def _wireerror_response(request: Request, exc: WireError) -> JSONResponse:
        return error_response(400, str(exc), "ValueError")

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for e in exc.errors():
            loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body")
            if e.get("type") == "extra_forbidden":
                problems.append(f"unknown field {loc!r}")
            else:
                problems.append(f"{loc or 'body'}: {e.get('msg')}")
        kind = "TypeError" if any("type" in str(e.get("type")) for e in exc.errors()) else "ValueError"
        return error_response(400, "; ".join(problems) or "invalid request", kind)

    route_errors(app)

    @app.exception_handler(Exception)
    async def _fault(request: Request, exc: Exception) -> JSONResponse:  # answered, never a dropped connection
        logger.exception("%s %s failed", request.method, request.url.path)
        return error_response(500, f"the server failed on this request ({type(exc).__name__})", "ServerError")

    @app.get("/health", response_model=Health)
    async def health() -> dict[str, Any]:
        return server.health()

    @app.get(f"{API}/samples")
    async def samples() -> dict[str, Any]:
        return {"samples": [{"index": i, "id": s.id, "question_type": s.question_type, "duration": s.duration}
                            for i, s in enumerate(store.samples)]}  # fmt: skip

    @app.post(f"{API}/sessions", status_code=201, response_model=SessionOpened)
    async def open_session(body: SessionRequest) -> dict[str, Any]:
        session = await in_thread(store.open_session, body.model_dump())
        return server.opened(session)

    # Replies carrying frames are encoded to JSON in the worker thread, as bytes (the models document them at
    # /docs): running megabytes of base64 through pydantic and json on the event loop held every other request.
    async def encoded(call: Any) -> Response:
        return Response(await in_thread(lambda: json.dumps(call(), allow_nan=False).encode()), media_type="application/json")

    @app.post(f"{API}/sessions/{{sid}}/reset", response_model=ResetReply)
    async def reset(sid: str, body: ResetRequest) -> Response:
        return await encoded(lambda: server.locked(sid, lambda s: store.reset(s, body.model_dump(exclude_none=False))))

    @app.post(f"{API}/sessions/{{sid}}/step", response_model=StepReply)
    async def step(sid: str, body: StepRequest, request: Request) -> Response:
        if await request.is_disconnected():  # gone before its turn was played: not played (nobody would get it)
            raise ApiError(499, "the client disconnected before the step ran", "ClientClosedRequest")
        return await encoded(lambda: server.locked(sid, lambda s: store.step(s, body.model_dump(exclude_none=True))))

    @app.get(f"{API}/sessions/{{sid}}/render")
    async def render(sid: str) -> Response:
        return await encoded(lambda: server.locked(sid, store.render))

    @app.delete(f"{API}/sessions/{{sid}}")
    @app.post(f"{API}/sessions/{{sid}}/close")
    async def close(sid: str) -> dict[str, Any]:
        await in_thread(store.close_session, sid)
        return {"closed": sid}

    from .openenv import mount_openenv

    mount_openenv(app, server)
    return app


class EnvServer:
    """``paravt serve-env``'s server: a ``SessionStore`` behind the FastAPI app, served by uvicorn on a socket
    bound at construction (a busy port fails here, as an ``OSError``). ``serve_forever`` blocks; ``shutdown``
    (from another thread) stops it; ``server_close`` closes every session. A thread reaps idle sessions."""

    def __init__(self, address: tuple[str, int], samples: list[VideoQASample], limits: EnvServerLimits | None = None):
        self.limits = limits or EnvServerLimits()
        self.store = SessionStore(samples, self.limits)
        self.started = time.monotonic()
        self.limiter = anyio.CapacityLimiter(self.limits.workers)
        lim = self.limits
        self.bounded = BoundedRequests(with_ors(create_app(self), self), RequestBounds(lim.max_body_bytes, lim.body_timeout_s, lim.max_inflight,
                                                                       lim.write_timeout_s, lim.max_unread_bytes))  # fmt: skip
        try:
            self.http = UvicornServer(self.bounded, address, keep_alive_s=lim.socket_timeout_s)
        except OSError:
            self.store.close_all()
            raise
        self.server_address = self.http.address
        self._stop = threading.Event()
        self._reaper = threading.Thread(target=self._reap_loop, name="serve-env-reaper", daemon=True)
        self._reaper.start()

    @property
    def url(self) -> str:
        return self.http.url

    @property
    def sessions(self) -> dict[str, Session]:
        return self.store.sessions

    @property
    def inflight(self) -> int:
        return self.bounded.inflight

    def serve_forever(self) -> None:
        self.http.serve_forever()

    def shutdown(self, timeout: float = 10.0) -> None:
        self.http.shutdown(timeout)

    def server_close(self) -> None:
        self._stop.set()
        self.http.close()
        self.store.close_all()

    def _reap_loop(self) -> None:
        period = min(5.0, self.limits.idle_timeout_s / 4)
        while not self._stop.wait(period):
            try:
                self.store.reap()
            except Exception:  # the reaper must outlive one bad close
                logger.exception("reaping idle sessions failed")

    def health(self) -> dict[str, Any]:
        store = self.store
        with store.lock:
            n, steps = len(store.sessions), store.steps_served
        return {"status": "ok", "sessions": n, "max_sessions": self.limits.max_sessions, "samples": len(store.samples),
                "steps_served": steps, "uptime_s": round(time.monotonic() - self.started, 3),
                "limits": {k: float(v) for k, v in asdict(self.limits).items()}}  # fmt: skip

    def opened(self, session: Session) -> dict[str, Any]:
        env = session.env
        return {
            "session_id": session.id,
            "frame_encoding": session.encoding,
            "spaces": {"max_frames": env.observation_space["frames"].max_frames,
                       "max_pixels": env.observation_space["frames"].max_pixels,
                       "max_text_chars": env.action_space.max_length},  # fmt: skip
            "config": jsonable({f.name: getattr(env.config, f.name) for f in fields(env.config) if f.name != "subagent"}),
        }

    def locked(self, sid: str, call: Any) -> dict[str, Any]:
        session = self.store.session(sid)
        if not session.lock.acquire(blocking=False):
            raise ApiError(409, f"session {sid} is busy with another request: an env takes one call at a time", "SessionBusy")
        try:
            return call(session)
        finally:
            session.last_used = time.monotonic()
            session.lock.release()


def serve_env(data: str, host: str = "127.0.0.1", port: int = 8100, *, video_root: str | None = None,
              limits: EnvServerLimits | None = None, ready=print) -> None:  # fmt: skip
    """Load ``data`` (anything ``load_samples`` reads) and serve it until interrupted."""
    from ..data import load_samples

    # serve-env logs warnings and errors; ORS's server (read when its loggers are made) logs three lines a request
    os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")
    samples = load_samples(data, video_root=video_root)
    server = EnvServer((host, port), samples, limits)
    lim = server.limits
    from .ors import ENV_NAME, available

    ors = f"the Open Reward Standard at the root ({ENV_NAME!r})" if available() else "no Open Reward Standard (openreward is not installed)"
    ready(f"paravt serve-env: {len(samples)} samples from {data} at {server.url} "
          f"(at most {lim.max_sessions} sessions, closed after {lim.idle_timeout_s:g} s idle; API docs at {server.url}/docs; "
          f"OpenEnv at /openenv; {ors})")  # fmt: skip
    try:
        server.serve_forever()
    finally:
        server.server_close()
