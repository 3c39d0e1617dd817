"""Frame sampling speed: our two backends against the reference ParaVT path (qwen-vl-utils' fetch_video,
decord), side by side on one 5-minute 640x360 h264 video; and the release protocol's overview (the same frames
and sizes as the reference request) against that request.

    python -m pytest benchmarks/perf/test_bench_video.py --benchmark-only --benchmark-json=runs/bench_video.json
    python -m benchmarks.perf.report runs/bench_video.json

The reference is importable with the repository's torchvision stand-in, benchmarks/tvshim (its README says
why); without it the reference rows are skipped and only our backends are timed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from benchmarks.perf.media import long_video
from paravt_env.video import open_video, sample_overview, sample_window


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


HAS_DECORD = _importable("decord")
# decord has no wheel for every platform and Python (none for 3.12, the GPU machine's): there its rows are skipped,
# saying why, and the PyAV rows still run.
BACKENDS = ["pyav", pytest.param("decord", marks=pytest.mark.skipif(not HAS_DECORD, reason="decord is not installed"))]

OVERVIEW_K = 64
CROP = (100.0, 120.0)  # a 20 s window: 16 frames at 1 fps, capped at 16 (ParaVT's crop settings)
BUDGET = {"min_pixels": 784, "max_pixels": 50176}


def _reference_fetch_video():
    if not HAS_DECORD:  # the reference decodes with decord (FORCE_QWENVL_VIDEO_READER below)
        pytest.skip("the qwen-vl-utils reference decodes with decord, which is not installed")
    shim = Path(__file__).resolve().parents[1] / "tvshim"  # benchmarks/tvshim: the repository's stand-in
    if str(shim) not in sys.path:
        sys.path.insert(0, str(shim))
    os.environ.setdefault("FORCE_QWENVL_VIDEO_READER", "decord")
    try:
        from qwen_vl_utils import fetch_video
    except Exception as exc:  # ImportError, or torchvision failing to load its operators
        pytest.skip(f"qwen-vl-utils reference not importable here: {exc}")
    return fetch_video


@pytest.fixture(scope="module")
def video() -> str:
    return str(long_video())


@pytest.mark.benchmark(group="overview-64")
@pytest.mark.parametrize("backend", BACKENDS)
def test_overview(benchmark, video, backend):
    reader = open_video(video, backend=backend)
    frames = benchmark(lambda: sample_overview(reader, OVERVIEW_K, cache=False, **BUDGET))
    assert len(frames) == OVERVIEW_K


@pytest.mark.benchmark(group="overview-64")
def test_overview_reference(benchmark, video):
    fetch_video = _reference_fetch_video()
    out = benchmark(lambda: fetch_video({"video": video, "nframes": OVERVIEW_K, **BUDGET}))
    assert out.shape[0] == OVERVIEW_K


@pytest.mark.benchmark(group="crop-20s")
@pytest.mark.parametrize("backend", BACKENDS)
def test_crop(benchmark, video, backend):
    reader = open_video(video, backend=backend)
    frames = benchmark(lambda: sample_window(reader, *CROP, fps=1.0, max_frames=16, **BUDGET))
    assert len(frames) == 16


@pytest.mark.benchmark(group="crop-20s")
def test_crop_reference(benchmark, video):
    fetch_video = _reference_fetch_video()
    element = {"video": video, "video_start": CROP[0], "video_end": CROP[1], "fps": 1.0, "max_frames": 16}
    out = benchmark(lambda: fetch_video({**element, **BUDGET}))
    assert out.shape[0] == 16


@pytest.mark.benchmark(group="release-overview-64")
@pytest.mark.parametrize("backend", BACKENDS)
def test_release_overview(benchmark, video, backend):
    """protocol="release": the same indices and sizes as fetch_video's default-budget overview, our decode."""
    from paravt_env.video.qwen_frames import release_overview

    reader = open_video(video, backend=backend)
    frames = benchmark(lambda: release_overview(reader, OVERVIEW_K))
    assert len(frames) == OVERVIEW_K


@pytest.mark.benchmark(group="release-overview-64")
def test_release_overview_reference(benchmark, video):
    """What the released eval driver runs for its overview (``utils.get_frames``: nframes only)."""
    fetch_video = _reference_fetch_video()
    out = benchmark(lambda: fetch_video({"video": video, "nframes": OVERVIEW_K}))
    assert out.shape[0] == OVERVIEW_K


@pytest.mark.benchmark(group="open")
@pytest.mark.parametrize("backend", BACKENDS)
def test_open_uncached(benchmark, video, backend):
    """Indexing cost of a video never seen before (the index cache is cleared each round)."""
    from paravt_env.video import reader as reader_module

    def run():
        reader_module._INDEX_CACHE.clear()
        return open_video(video, backend=backend)

    assert benchmark(run).num_frames > 0


@pytest.mark.benchmark(group="overview-64-exact")
@pytest.mark.parametrize("backend", BACKENDS)
def test_overview_exact(benchmark, video, backend):
    """tolerance=0: exact segment centres, the same frames the reference decodes."""
    reader = open_video(video, backend=backend)
    frames = benchmark(lambda: sample_overview(reader, OVERVIEW_K, tolerance=0.0, cache=False, **BUDGET))
    assert len(frames) == OVERVIEW_K


def _decode_and_resize(video: str, resize) -> list:
    """60 frames decoded anew and resized (frames reused across rounds would time only the first round's contexts)."""
    import av

    container = av.open(video)
    try:
        out = []
        for frame in container.decode(container.streams.video[0]):
            out.append(resize(frame))
            if len(out) == 60:
                break
        return out
    finally:
        container.close()


@pytest.mark.benchmark(group="decode-and-resize-60-frames")
def test_resize_reference(benchmark, video):
    """``VideoFrame.reformat``: a new swscale context for every frame (a handle without its kept reformatter)."""
    from paravt_env.video.resize import resize_frame

    benchmark(lambda: _decode_and_resize(video, lambda f: resize_frame(f, 168, 280)))


@pytest.mark.benchmark(group="decode-and-resize-60-frames")
def test_resize_kept_reformatter(benchmark, video):
    """One reformatter for the 60 frames, as a decoding handle keeps one (``PyAVHandle._reformatter``)."""
    from av.video.reformatter import VideoReformatter

    from paravt_env.video.resize import resize_frame

    def run():
        kept = VideoReformatter()
        return _decode_and_resize(video, lambda f: resize_frame(f, 168, 280, kept))

    benchmark(run)
