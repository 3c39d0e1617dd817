"""Env speed: ``reset`` (the K = 64 overview, cold and from the group cache) and the point of ParaVT, one turn
of 5 parallel crops against the same 5 crops over 5 sequential turns — side by side in one run.

    python -m pytest benchmarks/perf/test_bench_env.py --benchmark-only --benchmark-json=runs/bench_env.json
    python -m benchmarks.perf.report runs/bench_env.json

The video is the 5-minute 640x360 30 fps h264 file of ``benchmarks/perf/media.py`` (generated once, cached).
In each group the row named "reference" is the baseline of the speed-up column: the sequential turns for
the crop benchmark, the cold reset for the reset benchmark.
"""

from __future__ import annotations

import json

import pytest

from benchmarks.perf.media import long_video
from paravt_env import EnvConfig, VideoQASample, VideoToolEnv
from paravt_env.video import default_overview_cache

WINDOWS = [(20.0, 36.0), (80.0, 96.0), (140.0, 156.0), (200.0, 216.0), (260.0, 276.0)]
"""Five 16 s windows spread over the video: 16 frames each at 1 fps, in five different GOPs."""


def _call(a: float, b: float) -> str:
    return "<tool_call>" + json.dumps({"name": "crop_video", "arguments": {"start_time": a, "end_time": b}}) + "</tool_call>"


@pytest.fixture(scope="module")
def sample() -> VideoQASample:
    return VideoQASample(
        id="bench-long", video_path=str(long_video()), question="What happens?", answer="A",
        question_type="mcq", options=["a", "b", "c", "d"],
    )  # fmt: skip


def _resetter(env: VideoToolEnv):
    # pedantic() reads a setup's return value as (args, kwargs) for the target: return nothing.
    def setup() -> None:
        env.reset(options={"index": 0})

    return setup


def _env(sample, **options) -> VideoToolEnv:
    return VideoToolEnv([sample], EnvConfig(frame_budget=64, **options))


@pytest.mark.benchmark(group="env reset, K=64")
def test_reset_cold_reference(benchmark, sample):
    env = _env(sample)
    default_overview_cache().clear()
    benchmark.pedantic(
        lambda: env.reset(options={"index": 0}), setup=default_overview_cache().clear, rounds=5, warmup_rounds=1
    )
    env.close()


@pytest.mark.benchmark(group="env reset, K=64")
def test_reset_group_cached(benchmark, sample):
    env = _env(sample)
    env.reset(options={"index": 0})  # the first rollout of a GRPO group decodes; the others hit the cache
    benchmark(lambda: env.reset(options={"index": 0}))
    env.close()


@pytest.mark.benchmark(group="5 crops of 16 frames")
def test_five_crops_parallel_one_turn(benchmark, sample):
    env = _env(sample, dispatch="parallel", max_turns=6)
    action = "<think>Five windows at once.</think>" + "".join(_call(a, b) for a, b in WINDOWS)

    def turn():
        _, _, _, _, info = env.step(action)
        assert info["tool_calls"]["executed"] == 5

    benchmark.pedantic(turn, setup=_resetter(env), rounds=8, warmup_rounds=1)
    env.close()


@pytest.mark.benchmark(group="5 crops of 16 frames")
def test_five_crops_sequential_turns_reference(benchmark, sample):
    env = _env(sample, dispatch="sequential", max_turns=6)
    actions = [f"<think>Window {i}.</think>" + _call(a, b) for i, (a, b) in enumerate(WINDOWS)]

    def turns():
        for action in actions:
            _, _, _, _, info = env.step(action)
            assert info["tool_calls"]["executed"] == 1

    benchmark.pedantic(turns, setup=_resetter(env), rounds=8, warmup_rounds=1)
    env.close()
