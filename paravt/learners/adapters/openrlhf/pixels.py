"""Every frame at the size the local trainer gives it to the policy, through OpenRLHF's unmodified processor and vLLM.

The local trainer's image processor runs at the recipe's pixel budget (``ModelConfig.processor_pixels``: the env's
``min_pixels``/``max_pixels`` unless the recipe names the processor's own), so a frame reaches the model at
``smart_resize(frame, budget)``. Under OpenRLHF two processors see each frame, and neither can be told a budget:
the processor ``get_tokenizer`` loads (the tokens and pixels the trainer trains on) and vLLM's (what the policy
generated from), both at the checkpoint's own ``preprocessor_config.json``. A 112 x 112 frame of a recipe at
12,544 pixels is 96 x 96 (9 pads) for the local trainer and 128 x 128 (16 pads) at the tiny checkpoint's budget.

So the executor resizes each frame to the local trainer's size itself (PIL, bicubic: the resize of the processor the
local trainer uses) and hands both processors a frame they keep as it is, which holds when that size lies inside the
checkpoint's budget. Where it does not (Qwen3-VL's own processor upscales below 65,536 pixels), no frame could reach
vLLM at the recipe's size, and the executor refuses rather than train on other images than the local trainer's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..budget import processor_budget

if TYPE_CHECKING:
    from PIL import Image


def _smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen-VL's resize rule (transformers' own ``smart_resize``: sides rounded to ``factor``, the area kept
    inside the budget)."""
    try:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize
    except ImportError:  # transformers releases before the PIL backend module
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize
    h, w = smart_resize(height, width, factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
    return int(h), int(w)


def fit_frames(frames: Any, budget: tuple[int, int], image_processor: Any, where: str) -> list[Image.Image]:
    """``frames`` (RGB arrays or PIL images) as PIL images at the size the local trainer's processor gives them
    under ``budget`` (min, max pixels), checked to be a size ``image_processor`` (the checkpoint's, as vLLM's) keeps.
    ``where`` names the sample in the error."""
    from PIL import Image

    if not len(frames):
        return []
    lo, hi, factor = processor_budget(image_processor)
    # the resize of the local trainer's processor (Qwen-VL's: bicubic, PIL's code 3)
    resample = Image.Resampling(int(getattr(image_processor, "resample", None) or Image.Resampling.BICUBIC))
    out = []
    for frame in frames:
        image = frame.convert("RGB") if isinstance(frame, Image.Image) else Image.fromarray(np.asarray(frame)).convert("RGB")
        h, w = _smart_resize(image.height, image.width, factor, *budget)
        kept = _smart_resize(h, w, factor, lo, hi)
        if kept != (h, w):
            raise ValueError(
                f"{where}: the recipe gives the policy {image.width} x {image.height} frames at {w} x {h} pixels "
                f"(processor budget {budget[0]}-{budget[1]}), but the checkpoint's image processor "
                f"(preprocessor_config.json: {lo}-{hi} pixels), which OpenRLHF's get_tokenizer and vLLM both load "
                f"unchanged, resizes them to {kept[1]} x {kept[0]}: OpenRLHF would train on other images than the "
                f"local trainer's. Give the recipe the checkpoint's budget (model.processor_min_pixels={lo} "
                f"model.processor_max_pixels={hi}, as paragrpo_qwen3vl_8b_release does), or write the recipe's budget "
                "into the checkpoint's preprocessor_config.json (size.shortest_edge / size.longest_edge)")  # fmt: skip
        out.append(image if image.size == (w, h) else image.resize((w, h), resample=resample))
    return out


def check_checkpoint_budget(model_path: str | None, budget: tuple[int, int]) -> None:
    """Before a run starts: refuse a local checkpoint whose image processor (``preprocessor_config.json``) would resize
    every frame of the recipe, its whole budget ``(min, max)`` below the checkpoint's minimum or above its maximum
    (the executor checks each frame as it comes; a hub id is checked there only)."""
    config = Path(str(model_path or "")) / "preprocessor_config.json"
    if not config.is_file():
        return
    data = json.loads(config.read_text())
    data = data.get("image_processor", data)
    size = data.get("size") or {}
    lo, hi = size.get("shortest_edge", data.get("min_pixels")), size.get("longest_edge", data.get("max_pixels"))
    if lo is None or hi is None:
        return
    if budget[1] < lo or budget[0] > hi:
        raise ValueError(f"{config}: the checkpoint's image processor runs at {lo}-{hi} pixels and the recipe shows the "
                         f"policy its frames at {budget[0]}-{budget[1]}: OpenRLHF's vLLM and processor load the "
                         "checkpoint's budget unchanged, so every frame would reach the policy resized. Give the recipe "
                         f"the checkpoint's budget (model.processor_min_pixels={lo} model.processor_max_pixels={hi}, as "
                         "paragrpo_qwen3vl_8b_release does), or write the recipe's budget into that file "
                         "(size.shortest_edge / size.longest_edge)")  # fmt: skip
