"""ParaVT-Gym's environment layer: video decoding, data, the tool protocol, rewards and the env itself.

``import paravt_env`` registers ``ParaVT/VideoTool-v0`` with gymnasium::

    env = gymnasium.make("ParaVT/VideoTool-v0", samples="runs/synth/samples.jsonl", dispatch="parallel")

Imports with numpy, gymnasium and the video decoders only; never torch (docs/reference.md#the-light-import-rule).
"""

import gymnasium

from .config import EnvConfig
from .data import VideoQASample, load_samples
from .env import VideoToolEnv
from .gating import FRAME_BUDGETS, gated_frame_budget
from .rewards import RewardBreakdown, RewardConfig, compute_reward
from .vector import GroupedEnv

__version__ = "0.1.0"

ENV_ID = "ParaVT/VideoTool-v0"
REMOTE_ENV_ID = "ParaVT/RemoteVideoTool-v0"
"""``gymnasium.make(REMOTE_ENV_ID, url="http://host:8100", **options)``: the env served by ``paravt serve-env``."""

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="paravt_env.env:VideoToolEnv")
if REMOTE_ENV_ID not in gymnasium.registry:
    gymnasium.register(id=REMOTE_ENV_ID, entry_point="paravt_env.remote.client:RemoteVideoToolEnv")


def __getattr__(name: str):
    # The client imports httpx: only when asked for.
    if name == "RemoteVideoToolEnv":
        from .remote import RemoteVideoToolEnv

        return RemoteVideoToolEnv
    raise AttributeError(f"module 'paravt_env' has no attribute {name!r}")

__all__ = [
    "ENV_ID",
    "FRAME_BUDGETS",
    "EnvConfig",
    "GroupedEnv",
    "RewardBreakdown",
    "REMOTE_ENV_ID",
    "RemoteVideoToolEnv",
    "RewardConfig",
    "VideoQASample",
    "VideoToolEnv",
    "compute_reward",
    "gated_frame_budget",
    "load_samples",
]
