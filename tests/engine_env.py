"""Engine imports for the adapter tests: skipped where the engine is not installed (the default test environment),
required in the engine's own environment (``nox -s engines`` sets ``PARAVT_ENGINE``), where a skip would hide
exactly what that environment exists to check."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def engine_import(engine: str, module: str) -> ModuleType:
    """``module`` of ``engine``: imported (a failure fails) in that engine's environment, else importorskip."""
    if os.environ.get("PARAVT_ENGINE") == engine:
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{engine} is tested in its own environment: nox -s \"engine(name='{engine}')\"")


def in_engine_env(engine: str) -> bool:
    return os.environ.get("PARAVT_ENGINE") == engine


# One PARA-GRPO episode, scripted identically for every engine: the released recipe (nFrames Gating, the think
# prefix, the released reward with its sequence-level anchor bonus) at CPU size; a turn of two parallel crops,
# then an answer. Each engine's tests play it through the engine and compare with ``local_episode``.
PARA_GRPO_CPU = ["para.gating_choices=[4,8]", "env.max_pixels=12544", "env.max_parallel=2", "env.crop_max_frames=4"]
SCRIPT = [  # what the policy writes after the forced "<think>\n"
    'Two windows at once.</think><tool_call>{"name": "crop_video", "arguments": {"start_time": 3, "end_time": 13}}</tool_call>'
    '<tool_call>{"name": "crop_video", "arguments": {"start_time": 25, "end_time": 35}}</tool_call>',
    "I saw enough.</think><answer>red</answer>",
]


def local_episode(samples, index: int, overrides=(), subagent=None) -> dict:
    """``SCRIPT`` in the local trainer's env (``run_setup.env_config`` of the PARA-GRPO recipe): reward, breakdown,
    K and the frames each observation showed (``subagent``: a reply for sub-agent mode; the reward does not read
    it)."""
    import dataclasses

    from paravt.learners.config import load_recipe
    from paravt.learners.run_setup import env_config
    from paravt_env import VideoToolEnv

    cfg = env_config(load_recipe("paragrpo_qwen3vl_8b", [*PARA_GRPO_CPU, *overrides]))
    env = VideoToolEnv(samples, dataclasses.replace(cfg, subagent=subagent) if subagent else cfg)
    obs, info = env.reset(options={"index": index})
    frames = [obs["frames"]]
    for turn in SCRIPT:
        obs, reward, terminated, truncated, final = env.step(cfg.response_prefix + turn)
        if terminated or truncated:
            return {"reward": reward, "breakdown": final["reward_breakdown"], "K": info["frame_budget"], "frames": frames}
        frames.append(obs["frames"])
    raise AssertionError("the script did not end the episode")
