"""``RemoteVideoToolEnv``: a ``gymnasium.Env`` whose episodes run in a ``paravt serve-env`` server.

    env = RemoteVideoToolEnv("http://gpu-box:8100", frame_budget=16, dispatch="parallel")
    obs, info = env.reset(seed=0, options={"sample_id": "synth-0003"})
    obs, reward, terminated, truncated, info = env.step('<tool_call>{"name": "crop_video", ...}</tool_call>')

Options are ``gymnasium.make("ParaVT/VideoTool-v0", ...)``'s (minus the data, which the server owns, and a
sub-agent). Observations, rewards and ``info`` are the in-process env's: the same arrays bit for bit, the
same dicts (``info["timing"]`` a ``StepTiming``). An error the in-process env would raise is raised here with
the same type (TypeError, ValueError, IndexError, RuntimeError) and the server's message; a server that
cannot be reached or refuses for its own reasons raises ``RemoteEnvError``.

The client bounds what it accepts: a reply larger than ``max_reply_bytes`` or slower than ``timeout`` in total
(not per read: a server trickling a byte a second is cut at the deadline) is abandoned; every frame is checked
against the observation space before it is decoded (a PNG by the size its header declares); a reply of the
wrong shape raises ``RemoteEnvError`` naming what was wrong.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from typing import Any

import gymnasium as gym
import httpx
import numpy as np
from gymnasium import spaces

from ..bounded_read import ReplyTooLarge, ReplyTooSlow, read_bounded
from ..config import EnvConfig
from ..data import VideoQASample
from ..spaces import AnyText, FrameBatch, Timestamps
from ..timing import StepTiming
from .wire import FRAME_ENCODINGS, WireError, decode_frames, decode_observation, jsonable

# Exceptions the in-process env raises, raised again client-side with the server's message.
_SAME_TYPE = {"TypeError": TypeError, "ValueError": ValueError, "IndexError": IndexError, "KeyError": KeyError,
              "RuntimeError": RuntimeError}  # fmt: skip


class RemoteEnvError(RuntimeError):
    """The server could not be reached, or refused for its own reasons (busy, expired session, its data)."""

    def __init__(self, message: str, status: int | None = None, kind: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


def _options_payload(options: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in options.items():
        if dataclasses.is_dataclass(value) and not isinstance(value, type):  # RewardConfig -> its fields
            value = dataclasses.asdict(value)
        out[key] = jsonable(value)
    return out


def observation_reply_bytes(max_frames: int, max_pixels: int, max_text_chars: int) -> int:
    """The most a reset or step reply of a session with these spaces can hold: every frame raw in base64 (PNG is
    never larger than that plus its headers), the text JSON-escaped (up to 6 bytes a character, twice: the observation
    and the info's messages), 1 MiB for the rest. A reply above it cannot be an observation: it is cut there instead
    of being read to ``max_reply_bytes``."""
    frames = max_frames * (max_pixels * 3 * 4 // 3 + 4096)
    return frames + 12 * max_text_chars + (1 << 20)


class RemoteVideoToolEnv(gym.Env[dict, str]):
    """``VideoToolEnv`` served by ``paravt serve-env`` at ``url`` (spaces, observations and rewards as there).

    Args:
        url: the server, e.g. ``http://127.0.0.1:8100``.
        frame_encoding: ``"raw"`` (base64 bytes, cheapest on loopback) or ``"png"`` (lossless, about half the
            bytes of natural frames: for slow links).
        timeout: seconds one request may take in total, reply included (a reset decodes an overview, a step
            runs crops).
        max_reply_bytes: largest reply accepted (default 512 MiB: 64 raw frames of 2.6 MP with base64 and room).
        render_mode: ``"rgb_array"`` for ``render()`` (the server draws the contact sheet).
        **options: the env's options (``EnvConfig`` fields).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 1}

    def __init__(self, url: str, *, frame_encoding: str = "raw", timeout: float = 300.0, max_reply_bytes: int = 512 << 20,
                 render_mode: str | None = None, **options: Any) -> None:  # fmt: skip
        if frame_encoding not in FRAME_ENCODINGS:
            raise ValueError(f"frame_encoding must be one of {FRAME_ENCODINGS}, got {frame_encoding!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.url = url.rstrip("/")
        self.render_mode = render_mode
        self.frame_encoding = frame_encoding
        self.timeout, self.max_reply_bytes = float(timeout), int(max_reply_bytes)
        self._http = httpx.Client(base_url=self.url, timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)))
        self._session: str | None = None
        try:
            opened = self._call("POST", "/v1/sessions", {"options": _options_payload(options),
                                                         "frame_encoding": frame_encoding, "render_mode": render_mode})  # fmt: skip
        except BaseException:  # refused (bad option, server full, unreachable): no connection left open
            self._http.close()
            raise
        try:
            self._session = str(opened["session_id"])
            cfg = dict(opened["config"])
            cfg["gating_choices"] = tuple(cfg["gating_choices"])
            self.config = EnvConfig(**cfg)
            bounds = {k: int(opened["spaces"][k]) for k in ("max_frames", "max_pixels", "max_text_chars")}
        except (KeyError, TypeError, ValueError) as exc:
            self._http.close()
            raise RemoteEnvError(f"serve-env at {self.url}: its new-session reply is malformed ({type(exc).__name__}: {exc})") from None
        self._bounds = bounds
        self._observation_cap = min(self.max_reply_bytes, observation_reply_bytes(**bounds))
        self.observation_space = spaces.Dict(
            {
                "text": AnyText(bounds["max_text_chars"]),
                "frames": FrameBatch(bounds["max_frames"], bounds["max_pixels"]),
                "timestamps": Timestamps(bounds["max_frames"]),
            }
        )
        self.action_space = AnyText(bounds["max_text_chars"])
        self._sample: VideoQASample | None = None
        self._turn_texts: list[str] = []

    @property
    def session_id(self) -> str | None:
        return self._session

    def _receive(self, method: str, path: str, body: dict[str, Any] | None, cap: int | None = None) -> tuple[int, bytes]:
        """The reply's status and body, read within the total deadline and the size cap (``cap``, else
        ``max_reply_bytes``)."""
        cap = self.max_reply_bytes if cap is None else cap
        deadline = time.monotonic() + self.timeout
        where = f"serve-env at {self.url}: {method} {path}"
        try:
            with self._http.stream(method, path, json=body, timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0))) as r:
                try:
                    return r.status_code, read_bounded(r, cap, deadline)
                except ReplyTooLarge as exc:
                    what = f"is {exc.size} bytes, above" if exc.declared else "passed"
                    limit = (f"max_reply_bytes={cap}" if cap == self.max_reply_bytes else
                             f"{cap} bytes, the most an observation of this session's spaces can take")  # fmt: skip
                    raise RemoteEnvError(f"{where}: the reply {what} {limit}; abandoned", r.status_code) from None
                except ReplyTooSlow:
                    raise RemoteEnvError(f"{where}: the reply did not finish within timeout={self.timeout:g} s; abandoned", r.status_code) from None
        except httpx.HTTPError as exc:
            raise RemoteEnvError(f"{where} failed: {type(exc).__name__}: {exc}") from None

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, cap: int | None = None) -> dict[str, Any]:
        status, raw = self._receive(method, path, body, cap)
        try:
            payload = json.loads(raw)
        except (ValueError, RecursionError):
            raise RemoteEnvError(f"serve-env at {self.url}: {method} {path} answered {status} "
                                 f"with a body that is not JSON", status) from None  # fmt: skip
        if status >= 400:
            error = payload.get("error") if isinstance(payload, dict) else None
            error = error if isinstance(error, dict) else {}
            message, kind = str(error.get("message", payload))[:2000], error.get("type")
            if status in (400, 409) and kind in _SAME_TYPE:
                raise _SAME_TYPE[kind](message)
            raise RemoteEnvError(f"serve-env at {self.url}: {message} (HTTP {status})",
                                 status, kind)  # fmt: skip
        if not isinstance(payload, dict):
            raise RemoteEnvError(f"serve-env at {self.url}: {method} {path} answered a JSON {type(payload).__name__}, not an object", status)
        return payload

    def _observation(self, out: dict[str, Any], what: str, keys: tuple[str, ...] = ()) -> dict[str, Any]:
        """The reply's observation, checked against the observation space; every field in ``keys`` present."""
        missing = [k for k in ("observation", "info", *keys) if k not in out]
        if missing:
            raise RemoteEnvError(f"serve-env at {self.url}: its {what} reply has no {missing}")
        if not isinstance(out["info"], dict):
            raise RemoteEnvError(f"serve-env at {self.url}: its {what} reply's 'info' is not an object")
        try:
            return decode_observation(out["observation"], **self._bounds)
        except WireError as exc:
            raise RemoteEnvError(f"serve-env at {self.url}: its {what} reply is malformed: {exc}") from None

    def _path(self, action: str = "") -> str:
        if self._session is None:
            raise RuntimeError("this RemoteVideoToolEnv is closed")
        return f"/v1/sessions/{self._session}" + (f"/{action}" if action else "")

    # --- gymnasium API ----------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """As ``VideoToolEnv.reset``; ``options`` may name a sample by ``index`` or ``sample_id`` (not ``sample``)."""
        super().reset(seed=seed)
        opts = dict(options or {})
        if isinstance(opts.get("sample"), VideoQASample):  # our own rollouts pass samples they listed from the server
            opts["sample_id"] = opts.pop("sample").id
        out = self._call("POST", self._path("reset"), {"seed": seed, "options": jsonable(opts)}, self._observation_cap)
        obs = self._observation(out, "reset", ("sample",))
        try:
            self._sample = VideoQASample.from_dict(out["sample"])
        except (TypeError, ValueError, KeyError) as exc:
            raise RemoteEnvError(f"serve-env at {self.url}: its reset reply's 'sample' is malformed: {exc}") from None
        self._turn_texts = []
        return obs, _info(out["info"])

    def step(self, action: str) -> tuple[dict, float, bool, bool, dict]:
        text = action if isinstance(action, str) else action.decode("utf-8", "replace") if isinstance(action, bytes) else str(action)
        body = {"action": text, "turn": len(self._turn_texts)}
        try:
            out = self._call("POST", self._path("step"), body, self._observation_cap)
        except RemoteEnvError as exc:
            if exc.status is not None:  # the server answered: a refusal, not a lost reply
                raise
            # the connection failed (the reply may have been lost after the turn was played): asked again with the
            # same turn, the server answers with that turn's reply instead of playing the action twice
            out = self._call("POST", self._path("step"), body, self._observation_cap)
        obs = self._observation(out, "step", ("reward", "terminated", "truncated"))
        if not isinstance(out["reward"], (int, float)) or isinstance(out["reward"], bool) or not all(
                isinstance(out[k], bool) for k in ("terminated", "truncated")):  # fmt: skip
            raise RemoteEnvError(f"serve-env at {self.url}: its step reply's reward / terminated / truncated have the wrong types")
        self._turn_texts.append(text[: self.config.max_action_chars])
        return obs, float(out["reward"]), out["terminated"], out["truncated"], _info(out["info"])

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        out = self._call("GET", self._path("render"))
        try:
            return decode_frames(out.get("frame"), "frame", max_frames=1)[0]
        except WireError as exc:
            raise RemoteEnvError(f"serve-env at {self.url}: its render reply is malformed: {exc}") from None

    def close(self) -> None:
        """Close the server-side session (its env and decoders) and the connection; safe to call twice."""
        if self._session is not None:
            with contextlib.suppress(RemoteEnvError):  # already expired or the server is gone: nothing to free
                self._call("DELETE", self._path())
            self._session = None
        self._http.close()
        super().close()

    # --- what VideoToolEnv also exposes -----------------------------------------------------------------
    @property
    def sample(self) -> VideoQASample | None:
        """The current episode's sample as the server shows it (its video by file name only)."""
        return self._sample

    @property
    def agent_text(self) -> str:
        return "".join(self._turn_texts)

    def generated_text(self) -> str:
        prefix = self.config.response_prefix
        return "".join(t[len(prefix) :] if prefix and t.startswith(prefix) else t for t in self._turn_texts)

    def samples(self) -> list[dict[str, Any]]:
        """The server's samples: ``index``, ``id``, ``question_type``, ``duration``."""
        return self._call("GET", "/v1/samples")["samples"]


def _info(info: dict[str, Any]) -> dict[str, Any]:
    if isinstance(info.get("timing"), dict):
        info["timing"] = StepTiming(**info["timing"])
    return info
