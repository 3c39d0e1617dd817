"""``paravt_env.messages``: the one path from an observation to chat messages."""

from __future__ import annotations

import numpy as np
import pytest

from paravt_env.messages import Message, observation_messages


def frames(n: int) -> np.ndarray:
    return np.stack([np.full((4, 4, 3), i, dtype=np.uint8) for i in range(n)]) if n else np.zeros((0, 4, 4, 3), np.uint8)


def test_each_message_takes_its_share_of_the_frames_in_order():
    info = {"messages": [{"role": "system", "text": "sys", "frames": 0, "parts": False},
                         {"role": "user", "text": "<image><image>two", "frames": 2, "parts": True},
                         {"role": "user", "text": "one<image>", "frames": 1, "parts": True, "video_url": None}]}  # fmt: skip
    out = observation_messages({"frames": frames(3)}, info)
    assert [m.role for m in out] == ["system", "user", "user"]
    assert [[int(f[0, 0, 0]) for f in m.images] for m in out] == [[], [0, 1], [2]]
    assert [m.as_parts for m in out] == [False, True, True]


@pytest.mark.parametrize(("listed", "n", "match"), [(1, 2, "takes 1 frames but the observation holds 2"),
                                                    (2, 1, "placeholders but 1 images")])  # fmt: skip
def test_a_listing_that_disagrees_with_the_frames_is_an_error(listed, n, match):
    info = {"messages": [{"role": "user", "text": "<image>" * listed, "frames": listed}]}
    with pytest.raises(ValueError, match=match):
        observation_messages({"frames": frames(n)}, info)


def test_an_info_without_messages_is_named():
    with pytest.raises(ValueError, match="no 'messages'"):
        observation_messages({"frames": frames(0)}, {})


def test_a_message_counts_its_placeholders_and_renders_parts_in_reading_order():
    m = Message("user", "a<image>b", [np.zeros((2, 2, 3), np.uint8)])
    assert m.parts() == [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]
    with pytest.raises(ValueError, match="1 <image> placeholders but 0 images"):
        Message("user", "<image>")
