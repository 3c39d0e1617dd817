"""crop_video validation: every bad argument becomes a reason, never an exception."""

import math
from dataclasses import dataclass, field

import pytest

from paravt_env.tools import CropRequest, validate_crop


@dataclass
class Call:
    start_time: object = None
    end_time: object = None
    name: str = "crop_video"
    arguments: dict = field(default_factory=dict)


VIDEO = "/data/videos/sample.mp4"


def test_valid_window_passes_unchanged():
    req = validate_crop(Call(10, 20), duration=60.0, video_path=VIDEO)
    assert req == CropRequest(10.0, 20.0, ())


@pytest.mark.parametrize(
    "call, reason",
    [
        (Call(None, 20), "missing"),
        (Call(10, None), "end_time"),
        (Call("ten", 20), "non-numeric"),
        (Call(True, 20), "non-numeric"),
        (Call(math.nan, 20), "NaN"),
        (Call(20, 10), "smaller than"),
        (Call(5, 5), "smaller than"),
        (Call(70, 80), "less than"),
        (Call(-20, -10), "less than"),
        (Call(10, 20, name="zoom"), "unknown tool 'zoom'"),
    ],
)
def test_rejections_say_why(call, reason):
    out = validate_crop(call, duration=60.0, video_path=VIDEO)
    assert isinstance(out, str) and reason in out


def test_clamping_is_noted():
    req = validate_crop(Call(-5, 1e12), duration=60.0, video_path=VIDEO)
    assert (req.start, req.end) == (0.0, 60.0)
    assert any("clamped" in n for n in req.notes)
    req = validate_crop(Call(50, math.inf), duration=60.0, video_path=VIDEO)
    assert (req.start, req.end) == (50.0, 60.0)


def test_foreign_video_path_is_ignored_and_mentioned():
    req = validate_crop(Call(1, 5, arguments={"video_path": "/etc/passwd"}), duration=60.0, video_path=VIDEO)
    assert isinstance(req, CropRequest)
    assert any("ignored" in n and "/etc/passwd" in n for n in req.notes)
    same = validate_crop(Call(1, 5, arguments={"video_path": "sample.mp4"}), duration=60.0, video_path=VIDEO)
    assert same.notes == ()
