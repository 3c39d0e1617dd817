import numpy as np
import pytest

from paravt.baselines.vision import classify_colour, detect, detect_all
from paravt_env.data.synth_drawing import shape_mask
from paravt_env.data.synth_plan import PALETTE, SHAPES
from paravt_env.video import open_video


def _frame(colour: str, shape: str, side: int, at=(30, 50), size=224) -> np.ndarray:
    img = np.full((size, size, 3), 60, dtype=np.uint8)
    img += np.linspace(0, 20, size, dtype=np.uint8)[None, :, None]  # a grey gradient like the videos
    y, x = at
    img[y : y + side, x : x + side][shape_mask(shape, side)] = PALETTE[colour]
    return img


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("side", [24, 40, 84])
def test_every_shape_is_recognised_at_several_sizes(shape, side):
    for colour in PALETTE:
        d = detect(_frame(colour, shape, side), t=3.0)
        assert d is not None and (d.colour, d.shape, d.t) == (colour, shape, 3.0)


def test_grey_frames_show_nothing():
    assert detect(_frame("red", "circle", 0), 0.0) is None
    noise = np.random.default_rng(0).integers(40, 90, size=(224, 224, 1), dtype=np.uint8).repeat(3, axis=2)
    assert detect(noise, 0.0) is None


def test_colour_is_nearest_hue():
    assert classify_colour(np.array([[250, 10, 20], [240, 40, 30]])) == "red"
    assert classify_colour(np.array([[20, 200, 230]])) == "cyan"


def test_decoded_video_frames_are_read_exactly(synth_small):
    """Every frame of real h264 videos: needles found with the right label inside their events, nothing
    outside them."""
    _, samples = synth_small
    for s in samples[:4]:
        reader = open_video(s.video_path)
        times = np.arange(0.0, reader.duration, 0.5) + 0.01
        frames = reader.frames_at(times, tolerance=0.3, min_pixels=784, max_pixels=50176)
        for d, t in [(detect(img, t), t) for img, t in zip(frames.images, frames.timestamps, strict=True)]:
            truth = [e.label for e in s.events if e.start <= t < e.end]
            assert (d.label if d else None) == (truth[0] if truth else None), (s.id, t)
        assert len(detect_all(frames.images, frames.timestamps)) > 0
