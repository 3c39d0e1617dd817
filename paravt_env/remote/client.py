"""``RemoteVideoToolEnv``: a ``gymnasium.Env`` whose episodes run in a ``paravt serve-env`` server.

    env = RemoteVideoToolEnv("http://gpu-box:8100", frame_budget=16, dispatch="parallel")
    obs, info = env.reset(seed=0, options={"sample_id": "synth-0003"})
    obs, reward, terminated, truncated, info = env.step('<tool_call>{"name": "crop_video", ...}</tool_call>')

Options are ``gymnasium.make("ParaVT/VideoTool-v0", ...)``'s (minus the data, which the server owns, and a
sub-agent). Observations, rewards and ``info`` are the in-process env's: the same arrays bit for bit, the
same dicts (``info["timing"]`` a ``StepTiming``). An error the in-process env would raise is raised here with
the same type (TypeError, ValueError, IndexError, RuntimeError) and the server's message; a server that
cannot be reached or refuses for its own reasons raises ``RemoteEnvError``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import gymnasium as gym
import httpx
import numpy as np
from gymnasium import spaces

from ..config import EnvConfig
from ..data import VideoQASample
from ..spaces import AnyText, FrameBatch, Timestamps
from ..timing import StepTiming
from .wire import FRAME_ENCODINGS, decode_frames, decode_observation, jsonable

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


class RemoteVideoToolEnv(gym.Env[dict, str]):
    """``VideoToolEnv`` served by ``paravt serve-env`` at ``url`` (spaces, observations and rewards as there).

    Args:
        url: the server, e.g. ``http://127.0.0.1:8100``.
        frame_encoding: ``"raw"`` (base64 bytes, cheapest on loopback) or ``"png"`` (lossless, about half the
            bytes of natural frames: for slow links).
        timeout: seconds one request may take (a reset decodes an overview, a step runs crops).
        render_mode: ``"rgb_array"`` for ``render()`` (the server draws the contact sheet).
        **options: the env's options (``EnvConfig`` fields).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 1}

    def __init__(self, url: str, *, frame_encoding: str = "raw", timeout: float = 300.0,
                 render_mode: str | None = None, **options: Any) -> None:  # fmt: skip
        if frame_encoding not in FRAME_ENCODINGS:
            raise ValueError(f"frame_encoding must be one of {FRAME_ENCODINGS}, got {frame_encoding!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.url = url.rstrip("/")
        self.render_mode = render_mode
        self.frame_encoding = frame_encoding
        self._http = httpx.Client(base_url=self.url, timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)))
        self._session: str | None = None
        try:
            opened = self._call("POST", "/v1/sessions", {"options": _options_payload(options),
                                                         "frame_encoding": frame_encoding, "render_mode": render_mode})  # fmt: skip
        except BaseException:  # refused (bad option, server full, unreachable): no connection left open
            self._http.close()
            raise
        self._session = opened["session_id"]
        cfg = dict(opened["config"])
        cfg["gating_choices"] = tuple(cfg["gating_choices"])
        self.config = EnvConfig(**cfg)
        bounds = opened["spaces"]
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

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            response = self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise RemoteEnvError(f"serve-env at {self.url}: {method} {path} failed: {type(exc).__name__}: {exc}") from None
        try:
            payload = response.json()
        except ValueError:
            raise RemoteEnvError(f"serve-env at {self.url}: {method} {path} answered {response.status_code} "
                                 f"with a body that is not JSON", response.status_code) from None  # fmt: skip
        if response.status_code >= 400:
            error = payload.get("error", {}) if isinstance(payload, dict) else {}
            message, kind = str(error.get("message", payload)), error.get("type")
            if response.status_code in (400, 409) and kind in _SAME_TYPE:
                raise _SAME_TYPE[kind](message)
            raise RemoteEnvError(f"serve-env at {self.url}: {message} (HTTP {response.status_code})",
                                 response.status_code, kind)  # fmt: skip
        return payload

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
        out = self._call("POST", self._path("reset"), {"seed": seed, "options": jsonable(opts)})
        self._sample = VideoQASample.from_dict(out["sample"])
        self._turn_texts = []
        return decode_observation(out["observation"]), _info(out["info"])

    def step(self, action: str) -> tuple[dict, float, bool, bool, dict]:
        text = action if isinstance(action, str) else action.decode("utf-8", "replace") if isinstance(action, bytes) else str(action)
        out = self._call("POST", self._path("step"), {"action": text})
        self._turn_texts.append(text[: self.config.max_action_chars])
        return (decode_observation(out["observation"]), float(out["reward"]), bool(out["terminated"]),
                bool(out["truncated"]), _info(out["info"]))  # fmt: skip

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return decode_frames(self._call("GET", self._path("render"))["frame"], "frame")[0]

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
