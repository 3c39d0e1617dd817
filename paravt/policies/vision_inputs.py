"""Loading a Qwen-VL checkpoint's tokenizer and image processor, and turning messages into model inputs.

``AutoProcessor`` of the Qwen-VL families also builds a *video* processor, which needs torchvision; CPU
machines with the CPU torch wheel cannot load torchvision. The policy never sends videos (the env gives it
frames), so it needs only the tokenizer and the image processor: ``load_tokenizer_and_image_processor``
uses ``AutoProcessor`` when it works and otherwise reads the same files itself (the PIL image processor of
the Qwen2-VL family, the checkpoint's own chat template), and ``expand_image_tokens`` does the processor's
one text step: each ``<|image_pad|>`` becomes as many pads as the image has merged patches.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from paravt_env.protocol import IMAGE_PLACEHOLDER

IMAGE_PAD = "<|image_pad|>"
VISION_IMAGE = f"<|vision_start|>{IMAGE_PAD}<|vision_end|>"
"""One image in a Qwen-VL prompt before expansion (what the chat template writes for an image part)."""


def inline_images(text: str) -> str:
    """The env's ``<image>`` placeholders as Qwen-VL vision tokens (for prompts rendered without a template)."""
    return text.replace(IMAGE_PLACEHOLDER, VISION_IMAGE)


def process_images(image_processor: Any, images: Any, pixel_kwargs: dict | None = None) -> tuple[Any, Any]:
    """``(pixel_values, image_grid_thw)`` of RGB frames (uint8 arrays or PIL images), in order."""
    arrays = [np.asarray(im.convert("RGB")) if hasattr(im, "convert") else np.asarray(im) for im in images]
    processed = image_processor(images=arrays, return_tensors="pt", **(pixel_kwargs or {}))
    return processed["pixel_values"], processed["image_grid_thw"]


class ProcessedFrames:
    """The image processor's output per frame, kept for frames seen again (a GRPO group's rollouts share one
    overview, crops repeat a grid, and a trajectory's pixels are recomputed for the update): an LRU of at most
    ``max_bytes`` of pixels, keyed by ``frame_digest``. The Qwen-VL processors treat each image on its own, so a
    batch's output is its frames' outputs in order (tested against one processor call). A frame is known by its
    digest and by the processing settings of the call (``settings``).

    Safe to call from several threads at once (``paravt eval`` encodes each episode's turns in that episode's
    thread): the LRU is read and written under a lock, and the processing itself runs outside it, so threads
    process their frames concurrently. A frame evicted by another thread between the lookup and the use is
    never looked up again: a call's hits are taken out under the lock in one go."""

    def __init__(self, image_processor: Any, max_bytes: int = 128 << 20) -> None:
        import threading
        from collections import OrderedDict

        self.image_processor, self.max_bytes = image_processor, int(max_bytes)
        self._kept: OrderedDict[tuple[bytes, str], tuple[Any, Any]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.stats = {"frames": 0, "processed": 0}

    def settings(self, pixel_kwargs: dict) -> str:
        """What the processing depends on besides the frame: the call's pixel settings and the image processor's own
        budget, read at every call (a server sets a request's budget, an adapter the processor's ``size``, after
        the policy is built)."""
        ip = self.image_processor
        own = {name: getattr(ip, name, None) for name in ("size", "min_pixels", "max_pixels", "patch_size", "merge_size",
                                                          "temporal_patch_size")}  # fmt: skip
        return repr((sorted((k, repr(v)) for k, v in pixel_kwargs.items()), sorted((k, repr(v)) for k, v in own.items())))

    def __call__(self, images: Any, pixel_kwargs: dict | None = None, digests: Any = None) -> tuple[Any, Any]:
        """The frames' ``(pixel_values, image_grid_thw)``; ``digests``: their ``frame_digest``s, where the caller has
        computed them already (hashed here otherwise)."""
        import torch

        from paravt.policies.encoded import frame_digest

        arrays = [np.asarray(im.convert("RGB")) if hasattr(im, "convert") else np.asarray(im) for im in images]
        pixel_kwargs = dict(pixel_kwargs or {})
        settings = self.settings(pixel_kwargs)
        keys = [(d, settings) for d in (digests if digests is not None else [frame_digest(a) for a in arrays])]
        with self._lock:
            hits = {k: self._kept[k] for k in keys if k in self._kept}
            for k in hits:
                self._kept.move_to_end(k)
        todo = {k: a for k, a in zip(keys, arrays, strict=True) if k not in hits}
        fresh: dict[tuple[bytes, str], tuple[Any, Any]] = {}
        if todo:
            pixels, grid = process_images(self.image_processor, list(todo.values()), pixel_kwargs)
            row = 0
            for k, thw in zip(todo, grid, strict=True):
                n = int(thw.prod())
                fresh[k] = (pixels[row : row + n].clone(), thw.clone())
                row += n
        parts = [hits.get(k) or fresh[k] for k in keys]
        with self._lock:
            self.stats["frames"] += len(keys)
            self.stats["processed"] += len(todo)
            for k, part in fresh.items():
                old = self._kept.pop(k, None)  # another thread processed the same frame meanwhile
                if old is not None:
                    self._bytes -= old[0].numel() * old[0].element_size()
                self._kept[k] = part
                self._bytes += part[0].numel() * part[0].element_size()
            while self._bytes > self.max_bytes and self._kept:
                _, (p, _g) = self._kept.popitem(last=False)
                self._bytes -= p.numel() * p.element_size()
        return torch.cat([p for p, _ in parts]), torch.stack([g for _, g in parts])


def load_tokenizer_and_image_processor(path: str | Path) -> tuple[Any, Any]:

    try:
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(path)
        return processor.tokenizer, processor.image_processor
    except (ImportError, AttributeError, ValueError, OSError):
        return tokenizer_and_pil_image_processor(path)  # no torchvision here


def tokenizer_and_pil_image_processor(path: str | Path) -> tuple[Any, Any]:
    """The checkpoint's tokenizer and its Qwen-VL image processor (the PIL one), built from its files without
    ``AutoProcessor`` (whose video processor needs torchvision)."""
    from transformers import AutoTokenizer
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    path = Path(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    settings: dict[str, Any] = {}
    for name in ("preprocessor_config.json", "processor_config.json"):
        if (path / name).is_file():
            data = json.loads((path / name).read_text())
            settings = data.get("image_processor", data)
            break
    keep = {"patch_size", "merge_size", "temporal_patch_size", "image_mean", "image_std", "size", "min_pixels",
            "max_pixels", "do_convert_rgb", "do_normalize", "do_rescale", "rescale_factor", "resample"}  # fmt: skip
    image_processor = Qwen2VLImageProcessorPil(**{k: v for k, v in settings.items() if k in keep})
    if tokenizer.chat_template is None and (path / "chat_template.jinja").is_file():
        tokenizer.chat_template = (path / "chat_template.jinja").read_text()
    return tokenizer, image_processor


def expand_image_tokens(text: str, grid_thw, merge_size: int) -> str:
    """Replace the i-th ``<|image_pad|>`` by ``prod(grid_thw[i]) / merge_size**2`` pads."""
    pieces = text.split(IMAGE_PAD)
    if len(pieces) - 1 != len(grid_thw):
        raise ValueError(f"text has {len(pieces) - 1} image pads but {len(grid_thw)} images were processed")
    out = [pieces[0]]
    for piece, thw in zip(pieces[1:], grid_thw, strict=True):
        out.append(IMAGE_PAD * (int(thw[0]) * int(thw[1]) * int(thw[2]) // merge_size**2))
        out.append(piece)
    return "".join(out)
