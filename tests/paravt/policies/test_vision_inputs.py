"""paravt.policies.vision_inputs: the processed-frames LRU under the threads of a batched evaluation."""

import random
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paravt.policies.vision_inputs import (  # noqa: E402
    ProcessedFrames,
    process_images,
    tokenizer_and_pil_image_processor,
)


def test_threads_sharing_frames_under_constant_eviction_get_the_processors_pixels(tiny_qwen3):
    """``paravt eval`` encodes each episode in its own thread. With an LRU that holds about two frames, every call
    races others that evict what it found; each must still get exactly what one processor call gives (a frame
    evicted between lookup and use was a KeyError that failed 10 of 200 held-out episodes)."""
    _tokenizer, image_processor = tokenizer_and_pil_image_processor(tiny_qwen3)
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, size=(56, 56, 3), dtype=np.uint8) for _ in range(10)]
    one = [process_images(image_processor, [f]) for f in frames]
    frame_bytes = one[0][0].numel() * one[0][0].element_size()
    cache = ProcessedFrames(image_processor, max_bytes=2 * frame_bytes)
    errors: list[BaseException] = []

    def play(seed: int) -> None:
        pick = random.Random(seed)
        try:
            for _ in range(25):
                chosen = pick.sample(range(len(frames)), 4)
                pixels, grid = cache([frames[i] for i in chosen])
                assert torch.equal(pixels, torch.cat([one[i][0] for i in chosen]))
                assert torch.equal(grid, torch.cat([one[i][1] for i in chosen]))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=play, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert cache._bytes <= cache.max_bytes
    assert cache._bytes == sum(p.numel() * p.element_size() for p, _ in cache._kept.values())
    assert cache.stats["frames"] == 8 * 25 * 4 and 0 < cache.stats["processed"] <= cache.stats["frames"]
