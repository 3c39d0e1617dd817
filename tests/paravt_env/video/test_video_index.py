"""Frame selection on hand-built indexes: no file needed, every rule checked by value."""

import numpy as np

from paravt_env.video import FrameIndex


def _index(n=20, fps=2.0, gop=5):
    # Decode order == presentation order (no B-frames): keyframes every `gop` frames.
    pts = np.arange(n)
    key = pts % gop == 0
    return FrameIndex.from_decode_order(pts, key, time_base=1.0 / fps, end_pts=None)


def test_from_decode_order_with_reordering():
    # Decode order I P B B (pts 0 3 1 2): presentation order sorts by pts.
    idx = FrameIndex.from_decode_order([0, 3, 1, 2, 4, 7, 5, 6], [1, 0, 0, 0, 1, 0, 0, 0], 0.5, end_pts=8)
    assert idx.times.tolist() == [0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]
    assert idx.keyframe.tolist() == [1, 0, 0, 0, 1, 0, 0, 0]
    # cost counts decode-order steps from the keyframe: pts 3 is decoded 2nd (cost 1), pts 1 3rd (cost 2)
    assert idx.cost.tolist() == [0, 2, 3, 1, 0, 2, 3, 1]
    assert idx.duration == 4.0


def test_displayed_at_is_the_last_frame_not_after_t():
    idx = _index()
    assert idx.displayed_at(np.array([0.0, 0.49, 0.5, 0.51, 9.99])).tolist() == [0, 0, 1, 1, 19]
    # clamped: before the start, after the end, NaN
    assert idx.displayed_at(np.array([-3.0, 1e9, np.nan])).tolist() == [0, 19, 0]


def test_frame_time_rounding_slack():
    # pts * time_base can land a hair above i / fps in floating point; asking for i / fps gives frame i
    idx = FrameIndex.from_decode_order(np.arange(100) * 512, np.ones(100, bool), 1 / 15360, None)
    asked = np.arange(100) / 30.0
    assert idx.displayed_at(asked).tolist() == list(range(100))


def test_tolerance_prefers_cheap_frames_then_near_ones():
    idx = _index()  # keyframes at 0, 2.5, 5.0, 7.5 s
    assert idx.select(np.array([2.1]), tolerance=0.5).tolist() == [5]  # keyframe at 2.5 s
    assert idx.select(np.array([2.1]), tolerance=0.0).tolist() == [4]
    # no keyframe within +-0.3 s of 1.2 s: frames 2 (1.0 s, cost 2) and 3 (1.5 s, cost 3); cost wins
    assert idx.select(np.array([1.2]), tolerance=0.3).tolist() == [2]


def test_in_window_holds_frames_inside_only():
    idx = _index()
    assert idx.in_window(1.0, 2.0).tolist() == [2, 3, 4]
    assert idx.in_window(1.1, 1.4).tolist() == []


def test_overview_frames_are_distinct_when_windows_touch(tmp_path):
    """Neighbouring overview segments share a boundary; a keyframe on it must not be returned twice."""
    from paravt_env.data.synth_plan import SynthConfig
    from paravt_env.data.synthetic import generate_dataset
    from paravt_env.video import open_video, sample_overview

    [s] = generate_dataset(tmp_path, SynthConfig(n=1, seed=7, min_duration=30, max_duration=40), progress=False)
    reader = open_video(s.video_path)
    for k in (16, 32, 48, 64):
        frames = sample_overview(reader, k, cache=False)
        assert len(set(frames.indices.tolist())) == k
        assert np.all(np.diff(frames.timestamps) > 0)
