import math

import numpy as np
import pytest

from paravt_env.remote.wire import (
    WireError,
    decode_frames,
    decode_observation,
    encode_frames,
    encode_observation,
    jsonable,
)
from paravt_env.timing import StepTiming


@pytest.mark.parametrize("encoding", ["raw", "png"])
def test_frames_round_trip_bit_for_bit(encoding):
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, size=(3, 28, 56, 3), dtype=np.uint8)
    back = decode_frames(encode_frames(frames, encoding))
    assert back.dtype == np.uint8 and np.array_equal(back, frames)
    empty = decode_frames(encode_frames(np.zeros((0, 0, 0, 3), np.uint8), encoding))
    assert empty.shape == (0, 0, 0, 3)


def test_observation_timestamps_are_exact_float64():
    stamps = np.array([0.1, 1 / 3, 123.456789012345678, 1e-9])
    obs = {"text": "x", "frames": np.zeros((4, 28, 28, 3), np.uint8), "timestamps": stamps}
    back = decode_observation(encode_observation(obs, "raw"))
    assert back["timestamps"].dtype == np.float64 and back["timestamps"].tobytes() == stamps.tobytes()


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"encoding": "jpeg", "shape": [1, 2, 2, 3], "data": ""}, "encoding"),
        ({"encoding": "raw", "shape": [1, 2, 2], "data": ""}, "shape"),
        ({"encoding": "raw", "shape": [1, 2, 2, 3], "data": "AAAA"}, "needs 12"),
        ({"encoding": "raw", "shape": [1, 2, 2, 3], "data": "not base64!"}, "base64"),
        ({"encoding": "png", "shape": [1, 2, 2, 3], "data": ["AAAA"]}, "PNG"),
        ({"encoding": "png", "shape": [2, 2, 2, 3], "data": []}, "list of 2"),
    ],
)
def test_bad_frames_name_the_field(payload, message):
    with pytest.raises(WireError, match=message):
        decode_frames(payload)


def test_jsonable_info():
    info = {"timing": StepTiming(decode_s=0.5), "k": np.int64(3), "t": (1, 2), "nan": math.nan, "a": np.arange(2)}
    assert jsonable(info) == {"timing": {"decode_s": 0.5, "subagent_s": 0.0, "tool_wall_s": 0.0, "total_s": 0.0},
                              "k": 3, "t": [1, 2], "nan": None, "a": [0, 1]}  # fmt: skip
