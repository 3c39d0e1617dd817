"""ParaVT-Gym's environment layer: video decoding, data, the tool protocol, rewards and the env itself.

``import paravt_env`` registers ``ParaVT/VideoTool-v0`` with gymnasium::

    env = gymnasium.make("ParaVT/VideoTool-v0", samples="runs/synth/samples.jsonl", dispatch="parallel")

Imports with numpy, gymnasium and the video decoders only; never torch (see ../shared/DESIGN.md).
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

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="paravt_env.env:VideoToolEnv")

__all__ = [
    "ENV_ID",
    "FRAME_BUDGETS",
    "EnvConfig",
    "GroupedEnv",
    "RewardBreakdown",
    "RewardConfig",
    "VideoQASample",
    "VideoToolEnv",
    "compute_reward",
    "gated_frame_budget",
    "load_samples",
]
