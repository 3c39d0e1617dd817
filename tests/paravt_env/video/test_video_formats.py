"""Exact frames from real-world containers: MPEG-TS (a seek to the first pts is not the start), rotated
phone video (display matrix), and decord refused wherever it cannot be trusted. Every check is against the
frame number each frame shows (``decode_index``) or a full sequential decode."""

import av
import numpy as np
import pytest

from paravt_env.data.index_video import decode_index, index_image, make_index_video
from paravt_env.video import VideoDecodeError, decord_backend, open_video, pyav_backend

N, FPS = 120, 10


@pytest.fixture(scope="module")
def ts_video(tmp_path_factory):
    return str(make_index_video(tmp_path_factory.mktemp("ts") / "index.ts", N, fps=FPS, gop=30, bframes=2))


def test_mpegts_every_frame_exact_including_the_first_gop(ts_video):
    r = open_video(ts_video, backend="pyav")
    assert r.num_frames == N
    first_gop = list(range(0, 30))
    rng = np.random.default_rng(0)
    for picks in (first_gop, rng.choice(N, 25, replace=False).tolist(), [0], [N - 1], [1, 2, 3]):
        got = r.frames_by_index(picks, min_pixels=None, max_pixels=None)
        assert [decode_index(img) for img in got.images] == list(picks)
    r.close()


def test_decord_refuses_mpegts_with_the_reason(ts_video):
    with pytest.raises(VideoDecodeError, match="decord does not seek mpegts exactly; use backend='pyav'"):
        open_video(ts_video, backend="decord")


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_rotated_video_comes_back_as_a_player_shows_it(tmp_path, rotation):
    plain = make_index_video(tmp_path / "plain.mp4", 20, fps=FPS, gop=10, size=(96, 128))
    turned = make_index_video(tmp_path / f"rot{rotation}.mp4", 20, fps=FPS, gop=10, size=(96, 128), rotation=rotation)
    a, b = open_video(plain, backend="pyav"), open_video(turned, backend="pyav")
    assert b.rotation == rotation and a.rotation == 0
    assert (b.width, b.height) == ((96, 128) if rotation in (90, 270) else (128, 96))
    picks = [0, 7, 19]
    native = a.frames_by_index(picks, min_pixels=None, max_pixels=None).images
    shown = b.frames_by_index(picks, min_pixels=None, max_pixels=None).images
    for x, y in zip(native, shown, strict=True):
        expected = np.rot90(x, rotation // 90)  # counterclockwise, as the display matrix says
        assert y.shape == expected.shape and np.abs(y.astype(int) - expected.astype(int)).mean() < 3
    # resized frames keep the displayed orientation (taller than wide for 90 / 270)
    small = b.frames_by_index([0]).images[0]
    assert (small.shape[0] > small.shape[1]) == (rotation in (90, 270))
    with pytest.raises(VideoDecodeError, match="decord ignores the display rotation"):
        open_video(turned, backend="decord")


class _WrongFrames:
    """A decord reader that lands one frame late after every seek (what decord did on open GOPs)."""

    def __init__(self, path):
        import decord

        self._vr = decord.VideoReader(path, num_threads=1)

    def __len__(self):
        return len(self._vr)

    def get_batch(self, indices):
        return self._vr.get_batch([min(i + 1, len(self._vr) - 1) for i in indices])


def test_decord_verification_refuses_a_file_it_misreads(tmp_path):
    pytest.importorskip("decord")
    path = str(make_index_video(tmp_path / "v.mp4", 60, fps=FPS, gop=12, bframes=2))
    index, props = pyav_backend.build_index(path)
    import decord

    decord_backend.verify(path, index, decord.VideoReader(path, num_threads=1), props)  # exact here: accepted
    with pytest.raises(VideoDecodeError, match=r"decord returns frames other than those asked for .* use backend='pyav'"):
        decord_backend.verify(path, index, _WrongFrames(path), props)


def test_full_sequential_decode_agrees_on_mpegts(ts_video):
    with av.open(ts_video) as c:
        sequential = [decode_index(f.to_ndarray(format="rgb24")) for f in c.decode(video=0)]
    assert sequential == list(range(N))


@pytest.mark.parametrize("kind", ["open_gop_h264", "mpeg4_bframes"])
def test_streams_decord_misreads_are_exact_on_pyav_and_refused_by_decord(tmp_path, kind):
    pytest.importorskip("decord")
    if kind == "open_gop_h264":
        path = make_index_video(tmp_path / "open.mp4", 150, fps=FPS, gop=40, bframes=3, open_gop=True)
        reason = "open GOPs"
    else:
        path = make_index_video(tmp_path / "m4v.mp4", 150, fps=FPS, gop=40, bframes=2, codec="mpeg4")
        reason = "reordered"
    r = open_video(path, backend="pyav")
    picks = np.random.default_rng(3).choice(150, 40, replace=False).tolist() + [0, 39, 40, 41, 149]
    got = r.frames_by_index(picks, min_pixels=None, max_pixels=None)
    assert [decode_index(img) for img in got.images] == picks
    with pytest.raises(VideoDecodeError, match=reason):
        open_video(path, backend="decord")


def test_variable_frame_rate_frames_are_the_ones_on_screen(tmp_path):
    """Irregular frame durations (screen recordings, phones): the frame shown at t is the last one whose
    presentation time is <= t, with its true timestamp, on both backends where accepted."""
    from fractions import Fraction

    from paravt_env.data.index_video import index_image

    path = tmp_path / "vfr.mp4"
    rng = np.random.default_rng(5)
    times_ms = np.cumsum(rng.integers(20, 400, size=80))  # 20-400 ms per frame
    times_ms -= times_ms[0]
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 128, 96, "yuv420p"
        stream.time_base = stream.codec_context.time_base = Fraction(1, 1000)
        stream.options = {"x264-params": "scenecut=0", "bf": "0"}
        for i, t in enumerate(times_ms):
            frame = av.VideoFrame.from_ndarray(index_image(i, 96, 128), format="rgb24")
            frame.pts, frame.time_base = int(t), Fraction(1, 1000)
            for p in stream.encode(frame):
                out.mux(p)
        for p in stream.encode():
            out.mux(p)
    with av.open(str(path)) as c:
        truth = [(float(f.time), decode_index(f.to_ndarray(format="rgb24"))) for f in c.decode(video=0)]
    shown = np.array([t for t, _ in truth])
    queries = np.sort(rng.uniform(0, shown[-1], 40))
    expected = [truth[int(np.searchsorted(shown, q, side="right")) - 1][1] for q in queries]
    r = open_video(path, backend="pyav")
    got = r.frames_at(queries, min_pixels=None, max_pixels=None)
    assert [decode_index(img) for img in got.images] == expected
    np.testing.assert_allclose(got.timestamps, [shown[e] for e in expected], atol=1e-3)


def _two_track_mkv(path, *, thumb_first=True):
    """An MKV with a 2 s 64x48 preview track and an 8 s 128x96 main track (frames numbered), in that order."""
    container = av.open(str(path), "w")
    tracks = []
    for seconds, (w, h) in ([(2, (64, 48)), (8, (128, 96))] if thumb_first else [(8, (128, 96)), (2, (64, 48))]):
        s = container.add_stream("mpeg4", rate=FPS)
        s.width, s.height, s.pix_fmt = w, h, "yuv420p"
        tracks.append((s, seconds, w, h))
    for s, seconds, w, h in tracks:
        for i in range(seconds * FPS):
            frame = av.VideoFrame.from_ndarray(index_image(i, h, w), format="rgb24")
            frame.pts = i
            for packet in s.encode(frame):
                container.mux(packet)
        for packet in s.encode():
            container.mux(packet)
    container.close()
    return str(path)


@pytest.mark.parametrize("thumb_first", [True, False])
def test_the_stream_a_player_shows_is_read_not_a_preview_track(tmp_path, thumb_first):
    path = _two_track_mkv(tmp_path / "two.mkv", thumb_first=thumb_first)
    r = open_video(path, backend="pyav")
    assert (r.width, r.height) == (128, 96) and r.duration == pytest.approx(8.0, abs=0.2)
    got = r.frames_by_index([0, 45, 79], min_pixels=None, max_pixels=None)
    assert [decode_index(img) for img in got.images] == [0, 45, 79] and got.images.shape[1:3] == (96, 128)
    other = 0 if thumb_first else 1  # picking the preview track by its index is still possible
    preview = open_video(path, backend="pyav", stream=other)
    assert (preview.width, preview.height) == (64, 48) and preview.duration == pytest.approx(2.0, abs=0.2)
    with pytest.raises(VideoDecodeError, match=r"no video stream with index 7 \(its video streams: \[0, 1\]\)"):
        open_video(path, backend="pyav", stream=7)
    with pytest.raises(VideoDecodeError, match="decord cannot choose among its 2 video streams"):
        open_video(path, backend="decord")
