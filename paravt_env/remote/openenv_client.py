"""``VideoToolEnvClient``: ``paravt serve-env``'s OpenEnv endpoint through OpenEnv's own ``EnvClient``
(``pip install openenv-core``; the protocol is in ``paravt_env.remote.openenv``).

    from paravt_env.remote.openenv_client import VideoToolAction, VideoToolEnvClient

    with VideoToolEnvClient(base_url="http://127.0.0.1:8100/openenv").sync() as env:
        result = env.reset(seed=0, index=3, options={"frame_budget": 16})
        frames = result.observation.frames_array()          # K x H x W x 3 uint8, bit for bit the env's
        result = env.step(VideoToolAction(text='<tool_call>{"name": "crop_video", ...}</tool_call>'))
        result.reward, result.done, result.observation.info["reward_breakdown"]
"""

from __future__ import annotations

from typing import Any

import numpy as np
from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server import Action, Observation, State
from pydantic import Field

from .wire import decode_frames

__all__ = ["VideoToolAction", "VideoToolEnvClient", "VideoToolObservation"]


class VideoToolAction(Action):
    """One turn of the agent: ``crop_video`` calls (several run in parallel), or the answer."""

    text: str


class VideoToolObservation(Observation):
    """What the env shows: text with one ``<image>`` per frame, the frames' times, the frames (wire format), info."""

    text: str = ""
    timestamps: list[float] = Field(default_factory=list)
    frames: dict[str, Any] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)

    def frames_array(self) -> np.ndarray:
        """The frames as an N x H x W x 3 uint8 array."""
        return decode_frames(self.frames, "observation.frames", max_frames=len(self.timestamps))


class VideoToolEnvClient(EnvClient[VideoToolAction, VideoToolObservation, State]):
    """OpenEnv's ``EnvClient`` for ``paravt serve-env``'s ``/openenv``: one WebSocket, one session."""

    def _step_payload(self, action: VideoToolAction) -> dict[str, Any]:
        return {"text": action.text}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[VideoToolObservation]:
        reward, done = payload.get("reward"), bool(payload.get("done", False))
        observation = VideoToolObservation(**payload.get("observation", {}), reward=reward, done=done)
        return StepResult(observation=observation, reward=reward, done=done)

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)
