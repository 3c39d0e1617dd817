"""A Qwen-VL processor TRL can take, where torchvision cannot load (the CPU torch wheel here).

``AutoProcessor`` of Qwen2.5-VL / Qwen3-VL builds a video processor, whose module imports torchvision. The env
sends frames as images, never as video, so ``image_processor`` + tokenizer is all a processor needs here:
``QwenVLImagesProcessor`` is transformers' own Qwen-VL processor class with its video part left out (its
``__call__`` and chat-template code are the library's; only the constructor differs). Where torchvision
loads, ``load_processor`` returns ``AutoProcessor``'s processor unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _images_only(base: type) -> type:
    from transformers.processing_utils import ProcessorMixin

    class QwenVLImagesProcessor(base):
        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            # The token attributes base.__init__ sets before ProcessorMixin's, without a video processor
            # (ProcessorMixin lists its parts from this signature: image_processor and tokenizer).
            for name, default in (("image_token", "<|image_pad|>"), ("video_token", "<|video_pad|>"),
                                  ("vision_start_token", "<|vision_start|>"), ("vision_end_token", "<|vision_end|>")):  # fmt: skip
                token = getattr(tokenizer, name, None) or default
                setattr(self, name, token)
                setattr(self, f"{name}_id", tokenizer.convert_tokens_to_ids(token))
            ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)
            self.video_processor = None

    # The base's name: engines pick model-specific code by processor class name (verl's hf_processor binds
    # Qwen3VLModel.get_rope_index, the M-RoPE positions, only to a class named "Qwen3VLProcessor").
    QwenVLImagesProcessor.__name__ = QwenVLImagesProcessor.__qualname__ = base.__name__
    return QwenVLImagesProcessor


def images_only_processor(path: str | Path) -> Any:
    """The checkpoint's Qwen-VL processor without its video part (no torchvision needed)."""
    import json

    from transformers import Qwen2_5_VLProcessor, Qwen3VLProcessor

    from paravt.policies.vision_inputs import tokenizer_and_pil_image_processor

    tokenizer, image_processor = tokenizer_and_pil_image_processor(path)
    model_type = json.loads((Path(path) / "config.json").read_text()).get("model_type", "")
    base = Qwen3VLProcessor if model_type.startswith("qwen3") else Qwen2_5_VLProcessor
    return _images_only(base)(image_processor, tokenizer, chat_template=tokenizer.chat_template)


def load_processor(path: str | Path, chat_template: str | None = None) -> Any:
    """The checkpoint's processor (``AutoProcessor``), or its image-only form where torchvision is missing;
    ``chat_template`` replaces the checkpoint's (a tiny test model carries a minimal one)."""
    try:
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(path)
    except (ImportError, AttributeError, ValueError, OSError):
        processor = images_only_processor(path)
    if chat_template is not None:
        processor.chat_template = chat_template
        processor.tokenizer.chat_template = chat_template
    return processor
