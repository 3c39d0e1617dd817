"""The sessions of ``paravt serve-env``: one ``VideoToolEnv`` per client session, their limits, idle expiry,
and the env calls with every bad field refused as an ``ApiError`` (HTTP status, message naming the field)."""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, fields
from pathlib import PurePath
from typing import Any

from ..config import EnvConfig
from ..data import VideoQASample
from ..env import VideoToolEnv
from ..video import VideoDecodeError
from .wire import FRAME_ENCODINGS, encode_frames, encode_observation, jsonable

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
    """An idle keep-alive connection is dropped after this long."""
    write_timeout_s: float = 120.0
    """A reply (or an OpenEnv message) must drain to its client within this long; a client that does not read it
    loses the connection, and the server the unsent reply (``paravt_env.remote.asgi.RequestBounds``)."""
    max_unread_bytes: int = 256 * 2**20
    """What the replies clients have not read yet may hold at once, all connections together; past it the connection
    whose unread reply waited longest is dropped first (``paravt_env.remote.asgi.UnreadReplies``)."""
    workers: int = field(default_factory=lambda: max(2, 2 * (os.cpu_count() or 1)))
    """Env calls (decode, crop, encode) running at once; the rest queue in order. Two per core: on 2 cores, 4
    gave 13 % more calls/s than one thread per request, half the p95 latency and 13 % less memory."""
    body_timeout_s: float = 30.0
    """A request's whole body must arrive within this long (408 otherwise); only then does it count in flight."""
    # Ceilings on what a session may ask of the server: every option that scales its memory or work.
    max_frame_budget: int = 256
    """Overview frames K (``frame_budget``, each of ``gating_choices``, a reset's ``frame_budget``)."""
    max_pixels: int = 200704
    """Pixels of one frame (``max_pixels``, ``min_pixels``): 448 x 448."""
    max_crop_frames: int = 64
    """Frames of one crop (``crop_max_frames``)."""
    max_crop_fps: float = 8.0
    """Crop sampling rate (``crop_fps``)."""
    max_parallel: int = 16
    """Crops of one turn (``max_parallel``)."""
    max_turns: int = 16
    """Turns of an episode (``max_turns``)."""
    max_action_chars: int = 262144
    """Characters of a turn the env reads (``max_action_chars``)."""

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


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def effective_options(config: EnvConfig) -> dict[str, Any]:
    """The values of ``config`` the server's ceilings bound, defaults included (a client that names nothing gets the
    env's defaults, which can be above an operator's ceiling: 64 overview frames under gating, 5 crops a turn)."""
    values = {key: getattr(config, key) for key in ("frame_budget", "max_pixels", "min_pixels", "crop_max_frames",
                                                     "crop_fps", "max_parallel", "max_turns", "max_action_chars")}  # fmt: skip
    if config.crop_budget is not None:  # a crop budget sets the episode's turns (EnvConfig.turn_limit)
        values["crop_budget"] = config.crop_budget
    if config.nframes_gating:
        values["gating_choices"] = list(config.gating_choices)
    return values


def check_bounds(options: dict[str, Any], limits: EnvServerLimits, named: dict[str, Any] | None = None) -> None:
    """Refuse (400, naming the option and the ceiling) any option above what ``limits`` lets one session ask.
    ``named``: the options the client sent (a value it did not send is called the env's default)."""
    def source(key: str) -> str:
        return "" if named is None or key in named else " (the env's default: ask for less)"

    ceilings = {"frame_budget": limits.max_frame_budget, "max_pixels": limits.max_pixels, "min_pixels": limits.max_pixels,
                "crop_max_frames": limits.max_crop_frames, "crop_fps": limits.max_crop_fps,
                "max_parallel": limits.max_parallel, "max_turns": limits.max_turns,
                "crop_budget": limits.max_turns - 1, "max_action_chars": limits.max_action_chars}  # fmt: skip
    for key, ceiling in ceilings.items():
        value = options.get(key)
        if _number(value) and value > ceiling:
            raise ApiError(400, f"option {key!r} = {value}{source(key)} is above this server's limit of {ceiling:g} "
                                "(GET /health lists the limits)", "ValueError")  # fmt: skip
    choices = options.get("gating_choices")
    if isinstance(choices, (list, tuple)):
        if len(choices) > 64:
            raise ApiError(400, f"option 'gating_choices' has {len(choices)} entries, above 64", "ValueError")
        for c in choices:
            if _number(c) and c > limits.max_frame_budget:
                raise ApiError(400, f"option 'gating_choices' holds {c}{source('gating_choices')}, above this server's "
                                    f"frame budget limit of {limits.max_frame_budget}", "ValueError")  # fmt: skip


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
        self.turn = 0  # steps of the current episode
        self.last_step: tuple[int, dict[str, Any]] | None = None  # (its turn, its reply): for a retry whose reply was lost


class SessionStore:
    """The open sessions over one list of samples; thread-safe (the HTTP server calls it from many threads)."""

    def __init__(self, samples: list[VideoQASample], limits: EnvServerLimits) -> None:
        if not samples:
            raise ValueError("paravt serve-env needs at least one sample")
        self.samples, self.limits = samples, limits
        self.index_of: dict[str, int] = {}
        for i, s in enumerate(samples):
            self.index_of.setdefault(s.id, i)
        self.sessions: dict[str, Session] = {}
        self.expired: OrderedDict[str, float] = OrderedDict()  # recent idle-closed ids: a 410 that says why
        self.lock = threading.Lock()
        self.steps_served = 0

    def open_session(self, body: dict[str, Any]) -> Session:
        unknown = sorted(set(body) - {"options", "frame_encoding", "render_mode"})
        if unknown:
            raise ApiError(400, f"unknown field(s) {unknown} in a new session; known: frame_encoding, options, render_mode")
        encoding = body.get("frame_encoding", "raw")
        if encoding not in FRAME_ENCODINGS:
            raise ApiError(400, f"'frame_encoding' must be one of {list(FRAME_ENCODINGS)}, got {encoding!r}")
        options = _env_options(body.get("options", {}))
        check_bounds(options, self.limits)
        try:
            config = EnvConfig.from_kwargs(**options)
        except (TypeError, ValueError) as exc:
            raise ApiError(400, str(exc), type(exc).__name__) from None
        check_bounds(effective_options(config), self.limits, named=options)  # what the env will use, defaults too
        try:
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

    def close_all(self) -> None:
        with self.lock:
            sessions, self.sessions = list(self.sessions.values()), {}
        for s in sessions:
            s.env.close()

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
        if isinstance(options.get("epoch"), int) and not 0 <= options["epoch"] < 2**63:
            raise ApiError(400, f"reset option 'epoch' must be in [0, 2**63), got {options['epoch']}", "ValueError")
        check_bounds({"frame_budget": options.get("frame_budget")}, self.limits)
        try:
            obs, info = session.env.reset(seed=seed, options=options)
        except (TypeError, ValueError, IndexError) as exc:
            raise ApiError(400, str(exc), type(exc).__name__) from None
        except (VideoDecodeError, FileNotFoundError, OSError) as exc:
            # the server's log has the path; the client learns which sample, never where the server keeps it
            sample = self.samples[options["index"]].id if isinstance(options.get("index"), int) and 0 <= options["index"] < len(self.samples) else "?"
            logger.warning("session %s: cannot read the video of sample %s: %s", session.id, sample, exc)
            raise ApiError(422, f"the server cannot read the video of sample {sample!r} ({type(exc).__name__}); "
                                "its operator has the details in the server log", type(exc).__name__) from None  # fmt: skip
        session.turn, session.last_step = 0, None
        return {"observation": encode_observation(obs, session.encoding), "info": jsonable(info),
                "sample": public_sample(session.env.sample)}  # fmt: skip

    def step(self, session: Session, body: dict[str, Any]) -> dict[str, Any]:
        """One turn. With ``turn`` (the turns the client has stepped in this episode), a retry of the last step,
        whose reply the client never got (a dropped connection), is answered with that reply again instead of
        being played as a second turn; a ``turn`` that is neither is a 409 naming both. The reply kept for it is
        one per session, freed by the next step or reset."""
        unknown = sorted(set(body) - {"action", "turn"})
        if unknown:
            raise ApiError(400, f"unknown field(s) {unknown} in a step; known: action, turn")
        turn = body.get("turn")
        if turn is not None:
            if session.last_step is not None and turn == session.last_step[0] == session.turn - 1:
                return session.last_step[1]  # the retry of a step already played: its reply, not another turn
            if turn != session.turn:
                raise ApiError(409, f"step 'turn' {turn}, but this episode has played {session.turn} turn(s)",
                               "TurnMismatch")  # fmt: skip
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
        reply = {"observation": encode_observation(obs, session.encoding), "reward": float(reward),
                 "terminated": bool(terminated), "truncated": bool(truncated), "info": jsonable(info)}  # fmt: skip
        session.last_step = (session.turn, reply)
        session.turn += 1
        return reply

    def render(self, session: Session) -> dict[str, Any]:
        image = session.env.render()
        if image is None:
            raise ApiError(409, "this session was opened without render_mode='rgb_array'")
        return {"frame": encode_frames(image[None], session.encoding)}
