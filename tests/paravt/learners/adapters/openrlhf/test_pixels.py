"""Frames at the local trainer's size, checked against the checkpoint's processor (``openrlhf/pixels.py``); no
OpenRLHF needed: the image processor is the one the Qwen-VL checkpoints name."""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from paravt.learners.adapters.budget import processor_budget  # noqa: E402
from paravt.learners.adapters.openrlhf.pixels import fit_frames  # noqa: E402
from paravt.policies.vision_inputs import process_images  # noqa: E402


def qwen3_image_processor(shortest: int, longest: int):
    """Qwen3-VL's image processor (patch 16, merge 2) at a budget of ``shortest``-``longest`` pixels."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil(patch_size=16, merge_size=2, temporal_patch_size=2,
                                    size={"shortest_edge": shortest, "longest_edge": longest})  # fmt: skip


def test_frames_reach_the_trainers_size_and_the_checkpoint_keeps_it():
    frame = np.random.default_rng(0).integers(0, 256, (112, 112, 3), dtype=np.uint8)
    checkpoint = qwen3_image_processor(784, 50176)  # the tiny checkpoint's budget (vLLM's and get_tokenizer's)
    assert processor_budget(checkpoint) == (784, 50176, 32)
    [fitted] = fit_frames([frame], (784, 12544), checkpoint, "sample 's'")
    assert fitted.size == (96, 96)  # the recipe's 12,544 pixels: 3 x 3 merged patches, as the local trainer
    # the checkpoint's processor keeps it: 9 image tokens, where the frame as the env gave it would get 16
    _, grid = process_images(checkpoint, [fitted])
    assert grid.tolist() == [[1, 6, 6]]
    _, raw = process_images(checkpoint, [frame])
    assert raw.tolist() == [[1, 8, 8]]
    # and the pixels are the local trainer's own resize of the frame
    trainer = qwen3_image_processor(784, 12544)
    fitted_pixels, _ = process_images(checkpoint, [fitted])
    trainer_pixels, _ = process_images(trainer, [frame])
    assert np.abs(fitted_pixels.numpy() - trainer_pixels.numpy()).max() < 0.01
    assert fit_frames([], (784, 12544), None, "sample 's'") == []


def test_a_size_the_checkpoint_would_change_is_refused_with_the_fix():
    frame = np.zeros((224, 224, 3), dtype=np.uint8)
    qwen3 = qwen3_image_processor(65536, 16777216)  # Qwen3-VL-8B-Instruct's own budget
    with pytest.raises(ValueError, match=r"sample 'x': .*224 x 224 pixels .*256 x 256.*model.processor_min_pixels=65536"):
        fit_frames([frame], (784, 50176), qwen3, "sample 'x'")
    [kept] = fit_frames([frame], (65536, 16777216), qwen3, "sample 'x'")  # the recipe at the checkpoint's budget
    assert kept.size == (256, 256)
