"""Exact seeking on both backends, on videos whose frames show their own index (B-frames on)."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from paravt_env.data.index_video import decode_index, make_index_video
from paravt_env.video import VideoDecodeError, open_video, sample_overview, sample_window

BACKENDS = ["pyav", "decord"]
FPS = 10
N = 300  # 30 s


@pytest.fixture(scope="module")
def index_video(tmp_path_factory):
    return str(make_index_video(tmp_path_factory.mktemp("v") / "index.mp4", N, fps=FPS, gop=25, bframes=2))


@pytest.fixture(scope="module", params=[(30000 / 1001, 37), (25, 250)], ids=["ntsc-gop37", "25fps-gop250"])
def odd_video(request, tmp_path_factory):
    fps, gop = request.param
    path = tmp_path_factory.mktemp("odd") / "odd.mp4"
    return str(make_index_video(path, 400, fps=fps, gop=gop, bframes=3)), fps


def _indices(frames):
    return [decode_index(img) for img in frames.images]


@pytest.mark.parametrize("backend", BACKENDS)
def test_properties(index_video, backend):
    r = open_video(index_video, backend=backend)
    assert (r.num_frames, r.width, r.height, r.backend) == (N, 128, 96, backend)
    assert r.duration == pytest.approx(N / FPS)
    assert r.fps == pytest.approx(FPS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exact_frames_at_tolerance_zero(index_video, backend):
    r = open_video(index_video, backend=backend)
    rng = np.random.default_rng(0)
    times = np.concatenate([rng.uniform(0, N / FPS, 60), np.arange(0, N) / FPS, [0.0, 29.95, 1e6, -3.0]])
    frames = r.frames_at(times, tolerance=0.0, min_pixels=None, max_pixels=None)
    expected = np.clip(np.floor(np.clip(times, 0, N / FPS) * FPS + 1e-6), 0, N - 1).astype(int)
    assert _indices(frames) == expected.tolist()
    # the reported timestamps are the true times of the frames returned
    np.testing.assert_allclose(frames.timestamps, expected / FPS, atol=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_odd_rates_and_long_gops(odd_video, backend):
    path, fps = odd_video
    r = open_video(path, backend=backend)
    times = np.sort(np.random.default_rng(1).uniform(0, r.duration, 40))
    frames = r.frames_at(times, min_pixels=None, max_pixels=None)
    expected = np.floor(times * fps + 1e-6).astype(int)
    assert _indices(frames) == expected.tolist()


@pytest.mark.parametrize("backend", BACKENDS)
def test_tolerance_returns_true_timestamps_within_bound(index_video, backend):
    r = open_video(index_video, backend=backend)
    times = np.linspace(1, 29, 15)
    frames = r.frames_at(times, tolerance=1.0, min_pixels=None, max_pixels=None)
    got = np.array(_indices(frames))
    np.testing.assert_allclose(frames.timestamps, got / FPS, atol=1e-9)
    assert np.all(np.abs(frames.timestamps - times) <= 1.0 + 1e-6)
    # with a 2.5 s GOP and +-1 s, most picks are keyframes (every 25th frame), the cheapest frames
    assert np.mean(got % 25 == 0) >= 0.5
    assert np.all(r.index.keyframe[got] == (got % 25 == 0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_overview_timestamps_match_frames(index_video, backend):
    r = open_video(index_video, backend=backend)
    for k in (4, 8, 16, 64):
        ov = sample_overview(r, k, cache=False, min_pixels=None, max_pixels=None)
        assert len(ov) == k
        np.testing.assert_allclose(ov.timestamps, np.array(_indices(ov)) / FPS, atol=1e-9)
        # each frame comes from its own segment of the video
        seg = N / FPS / k
        assert np.all(np.abs(ov.timestamps - (np.arange(k) + 0.5) * seg) <= seg / 2 + 1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_window_frames_inside_and_exact(index_video, backend):
    r = open_video(index_video, backend=backend)
    w = sample_window(r, 10.05, 17.3, fps=1.0, max_frames=16, min_pixels=None, max_pixels=None)
    assert len(w) == 7
    assert np.all((w.timestamps >= 10.05) & (w.timestamps <= 17.3))
    np.testing.assert_allclose(w.timestamps, np.array(_indices(w)) / FPS, atol=1e-9)
    capped = sample_window(r, 0, 30, fps=2.0, max_frames=16)
    assert len(capped) == 16
    # clamped and swapped windows are never an error
    assert len(sample_window(r, 1e9, -5, fps=1.0)) == 16


def test_qwen_resize_applied(index_video):
    r = open_video(index_video)
    f = r.frames_at([1.0])  # 128x96 -> smart_resize under [784, 50176]
    assert f.images.shape == (1, 84, 140, 3) and f.images.dtype == np.uint8  # round(96/28), round(128/28)
    assert decode_index(f.images[0]) == 10


def test_backends_agree(index_video):
    times = np.linspace(0, 29.9, 37)
    a = open_video(index_video, backend="pyav").frames_at(times, min_pixels=None, max_pixels=None)
    b = open_video(index_video, backend="decord").frames_at(times, min_pixels=None, max_pixels=None)
    assert _indices(a) == _indices(b)
    np.testing.assert_allclose(a.timestamps, b.timestamps)


@pytest.mark.parametrize("backend", BACKENDS)
def test_thread_safe_concurrent_crops(index_video, backend):
    r = open_video(index_video, backend=backend)
    windows = [(s, s + 4.0) for s in np.linspace(0, 25, 20)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda w: sample_window(r, *w, fps=2.0, min_pixels=None, max_pixels=None), windows))
    for (start, end), frames in zip(windows, results, strict=True):
        idx = np.array(_indices(frames))
        np.testing.assert_allclose(frames.timestamps, idx / FPS, atol=1e-9)
        assert np.all((frames.timestamps >= start - 1e-6) & (frames.timestamps <= end + 1e-6))


def test_overview_cache_decodes_once(index_video):
    from paravt_env.video import OverviewCache

    cache = OverviewCache()
    r = open_video(index_video)
    a = sample_overview(r, 8, cache=cache)
    b = sample_overview(r, 8, cache=cache)
    assert a is b and (cache.misses, cache.hits) == (1, 1)
    assert sample_overview(r, 16, cache=cache) is not a


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_and_corrupt_files_are_named(tmp_path, backend):
    missing = tmp_path / "nope.mp4"
    with pytest.raises(FileNotFoundError, match="nope.mp4"):
        open_video(missing, backend=backend)
    corrupt = tmp_path / "corrupt.mp4"
    corrupt.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 20)
    with pytest.raises(VideoDecodeError, match="corrupt.mp4"):
        open_video(corrupt, backend=backend)
    with pytest.raises(ValueError, match="unknown video backend"):
        open_video(corrupt, backend="opencv")


def test_truncated_video_still_serves_its_frames(index_video, tmp_path):
    data = Path(index_video).read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) * 2 // 3])
    try:
        r = open_video(cut)
    except VideoDecodeError as exc:  # a cut before the index is a clean, named error too
        assert "cut.mp4" in str(exc)
        return
    f = r.frames_at([0.5], min_pixels=None, max_pixels=None)
    assert decode_index(f.images[0]) == 5
