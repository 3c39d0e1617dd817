"""What the network costs: one episode in process against the same episode through ``paravt serve-env`` on
loopback (raw and PNG frames), side by side in one run.

    python -m pytest benchmarks/perf/test_bench_remote.py --benchmark-only --benchmark-json=runs/bench_remote.json
    python -m benchmarks.perf.report runs/bench_remote.json

The episode: reset with K = 16 overview frames, one turn of 3 parallel crops of 8 s (24 frames), an answer:
3 calls, 40 frames of the 5-minute 640x360 video of ``benchmarks/perf/media.py`` (resized to the 50,176-px budget).
The server is a separate process (as in use); the group's "reference" row is the in-process env. Overhead per
call = (remote - in process) / 3.
"""

from __future__ import annotations

import json

import pytest

from benchmarks.perf.media import long_video
from benchmarks.perf.remote_env import start_serve_env
from paravt_env import VideoQASample, VideoToolEnv
from paravt_env.remote import RemoteVideoToolEnv

OPTIONS = {"frame_budget": 16}
TURN = "<think>three at once</think>" + "".join(
    "<tool_call>" + json.dumps({"name": "crop_video", "arguments": {"start_time": a, "end_time": a + 8}}) + "</tool_call>"
    for a in (30.0, 120.0, 210.0)
)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    sample = VideoQASample(id="bench-long", video_path=str(long_video()), question="What happens?", answer="A",
                           question_type="mcq", options=["a", "b", "c", "d"])  # fmt: skip
    out = tmp_path_factory.mktemp("remote") / "samples.jsonl"
    out.write_text(sample.to_json() + "\n")
    return out, sample


@pytest.fixture(scope="module")
def server(data):
    proc, url = start_serve_env(data[0])
    yield url
    proc.terminate()
    proc.wait(timeout=20)


def _episode(env) -> None:
    env.reset(options={"index": 0})
    _, _, _, _, info = env.step(TURN)
    assert info["tool_calls"]["executed"] == 3
    _, _, terminated, _, _ = env.step("<answer>A</answer>")
    assert terminated


@pytest.mark.benchmark(group="episode: reset K=16 + 3 crops + answer")
def test_episode_in_process_reference(benchmark, data):
    env = VideoToolEnv([data[1]], **OPTIONS)
    _episode(env)  # warm: index built, overview cached, as a served env is after its first episode
    benchmark.pedantic(_episode, args=(env,), rounds=10, warmup_rounds=1)
    env.close()


@pytest.mark.parametrize("encoding", ["raw", "png"])
@pytest.mark.benchmark(group="episode: reset K=16 + 3 crops + answer")
def test_episode_remote_loopback(benchmark, server, encoding):
    env = RemoteVideoToolEnv(server, frame_encoding=encoding, **OPTIONS)
    _episode(env)
    benchmark.pedantic(_episode, args=(env,), rounds=10, warmup_rounds=1)
    env.close()
