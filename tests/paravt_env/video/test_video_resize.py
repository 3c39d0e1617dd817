import itertools
import random

import pytest

from paravt_env.video import smart_resize
from paravt_env.video.resize import target_size


def test_known_values():
    # 640x360 under ParaVT's frame budget: 280x168 (60 tokens), as qwen-vl-utils gives.
    assert smart_resize(360, 640) == (168, 280)
    assert smart_resize(224, 224) == (224, 224)
    # tiny frames are scaled up to the minimum budget
    assert smart_resize(10, 10) == (28, 28)
    h, w = smart_resize(1080, 1920)
    assert h % 28 == 0 and w % 28 == 0 and h * w <= 50176


def test_parity_with_qwen_vl_utils(tvshim_on_path):
    qwen = pytest.importorskip("qwen_vl_utils.vision_process")
    rng = random.Random(0)
    sizes = [(rng.randint(1, 4000), rng.randint(1, 4000)) for _ in range(3000)]
    sizes += list(itertools.product([1, 27, 28, 29, 55, 56, 57, 223, 224, 225, 359, 360, 1079, 1080], repeat=2))
    budgets = [(784, 50176), (3136, 1003520), (128 * 28 * 28, 768 * 28 * 28), (784, 784)]
    compared = 0
    for (h, w), (lo, hi) in itertools.product(sizes, budgets):
        if max(h, w) / min(h, w) > 200:
            with pytest.raises(ValueError, match="aspect ratio"):
                smart_resize(h, w, 28, lo, hi)
            continue
        assert smart_resize(h, w, 28, lo, hi) == qwen.smart_resize(h, w, factor=28, min_pixels=lo, max_pixels=hi), (h, w)
        compared += 1
    assert compared > 10000


def test_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match="positive"):
        smart_resize(0, 10)
    with pytest.raises(ValueError, match="max_pixels"):
        smart_resize(100, 100, min_pixels=1000, max_pixels=10)


def test_target_size_native_and_degenerate():
    assert target_size(360, 640, None, None) == (360, 640)
    with pytest.raises(ValueError, match="leaves no pixels"):
        target_size(28, 5000, 784, 50176)


def test_a_kept_reformatter_gives_the_bytes_of_a_fresh_one_per_frame():
    """A decoding handle keeps one swscale reformatter for its frames (``resize_frame(..., reformatter)``); its frames
    equal ``VideoFrame.reformat``'s, which builds a new scaler context for every frame, across sources and targets
    that change from call to call."""
    import av
    import numpy as np
    from av.video.reformatter import VideoReformatter

    from paravt_env.video.resize import resize_frame

    rng = np.random.default_rng(0)
    sources = []
    for h, w, fmt in ((112, 112, "yuv420p"), (240, 320, "yuv420p"), (90, 160, "rgb24"), (64, 48, "yuv444p")):
        frame = av.VideoFrame.from_ndarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), format="rgb24")
        sources.append(frame if fmt == "rgb24" else frame.reformat(format=fmt))
    kept = VideoReformatter()
    for frame in sources * 2:
        for h, w in ((96, 96), (56, 84), (112, 112), (28, 28), (224, 168)):
            fresh = frame.reformat(width=w, height=h, format="rgb24", interpolation="BICUBIC").to_ndarray()
            assert np.array_equal(resize_frame(frame, h, w, kept), fresh)
            assert np.array_equal(resize_frame(frame, h, w), fresh)
