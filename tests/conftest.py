"""Shared test fixtures. Nothing here downloads anything: videos are generated, models built locally."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Test helpers shared by several test modules (tests/scripted_openai.py) import by name under importlib mode.
if str(Path(__file__).parent) not in sys.path:
    sys.path.append(str(Path(__file__).parent))


@pytest.fixture(scope="session", autouse=True)
def _model_device():
    """``PARAVT_TEST_DEVICE=cuda``: every model the suite loads in-process through ``HFPolicy.from_pretrained`` (the
    policy tests, the trainer, the cold start, the learners' updates) lands on that device instead of the CPU,
    so the model-dependent tests run on a GPU. Unset (CI, the default): nothing changes. Models loaded in a
    subprocess (the CLI's kill-and-resume tests) stay on the CPU."""
    target = os.environ.get("PARAVT_TEST_DEVICE")
    if not target or target == "cpu":
        yield
        return
    from paravt.policies.hf import HFPolicy

    original = HFPolicy.__dict__["from_pretrained"]

    def from_pretrained(cls, path, *, device: str = "cpu", **kwargs):  # noqa: ANN001, ANN202
        return original.__func__(cls, path, device=target if device == "cpu" else device, **kwargs)

    HFPolicy.from_pretrained = classmethod(from_pretrained)
    try:
        yield
    finally:
        HFPolicy.from_pretrained = original


@pytest.fixture
def tvshim_on_path():
    """Put benchmarks/tvshim (the repository's torchvision stand-in) on sys.path so qwen-vl-utils imports, for one
    test only: transformers would otherwise take the stand-in for torchvision in every later test."""
    shim = REPO / "benchmarks" / "tvshim"
    added = str(shim) not in sys.path
    if added:
        sys.path.insert(0, str(shim))
    yield shim
    if added:
        sys.path.remove(str(shim))
    for name in [m for m in sys.modules if m.split(".")[0] in ("torchvision", "qwen_vl_utils")]:
        del sys.modules[name]


@pytest.fixture(scope="session")
def synth_small(tmp_path_factory):
    """Eight short synthetic videos (40-150 s) with one question each, generated once per test session."""
    from paravt_env.data.synth_plan import SynthConfig
    from paravt_env.data.synthetic import generate_dataset

    out = tmp_path_factory.mktemp("synth_small")
    samples = generate_dataset(out, SynthConfig(n=8, seed=5, min_duration=40, max_duration=150), progress=False)
    return out, samples


@pytest.fixture(scope="session")
def synth_two_colours(tmp_path_factory):
    """Ten videos of the multi-event family ``two_colours`` (30-150 s, 112 px, the main job's sizes), once per
    test session."""
    from paravt_env.data.synth_plan import SynthConfig, task_settings
    from paravt_env.data.synthetic import generate_dataset

    out = tmp_path_factory.mktemp("synth_two_colours")
    config = SynthConfig(n=10, seed=11, min_duration=30, max_duration=150, size=112, min_event_seconds=2,
                         max_event_seconds=4, event_scale_min=0.6, event_scale_max=0.85, distractors=1,
                         **task_settings("two_colours"))  # fmt: skip
    return out, generate_dataset(out, config, progress=False)


@pytest.fixture(scope="session")
def tiny_qwen3(tmp_path_factory):
    """A tiny random-weight Qwen3-VL checkpoint built locally (no hub), once per test session."""
    pytest.importorskip("torch")
    from paravt.policies.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_qwen3_vl") / "model", arch="qwen3_vl", seed=0)


@pytest.fixture
def start_env_server():
    """``start(samples, **limits)``: a real ``EnvServer`` (``paravt serve-env``) on a free loopback port, in a
    thread; every server started is shut down after the test."""
    import threading

    from paravt_env.remote.server import EnvServer, EnvServerLimits

    servers = []

    def start(samples, **limits):
        server = EnvServer(("127.0.0.1", 0), list(samples), EnvServerLimits(**limits))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
