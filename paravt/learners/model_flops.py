"""Model FLOPs of a Qwen-VL forward pass, from the sequences it ran on: the numerator of model FLOP utilisation.

Counted as matrix multiplications only (2 FLOPs per multiply-add), the convention of PaLM's MFU, recomputation
under gradient checkpointing excluded (it is hardware work, not model work):

* decoder: every 2-D weight of the text layers once per token, the LM head once per token, and attention's
  scores and weighted sum, 2 x 2 x T^2 x (heads x head_dim) per layer for a T-token sequence (full, not causal:
  what a dense kernel computes, and what ``torch.utils.flop_counter`` counts);
* vision tower: the patch embedding and the blocks' weights once per patch, their attention over each image's
  patches, and the mergers (final and deepstack) once per merged token (4 patches).

Embedding look-ups, norms and element-wise work are not counted. Written for Qwen3-VL (Qwen2.5-VL's windowed
vision blocks would be counted as attending over the whole image). A training step (forward + backward) is 3x
the forward pass. ``tests/paravt/learners/test_model_flops.py`` checks the count against ``FlopCounterMode`` on the
tiny model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


def _matmul_weights(module: torch.nn.Module) -> int:
    """Elements of the module's weights that multiply activations (2-D linear, 5-D conv): not biases, norms."""
    return sum(p.numel() for p in module.parameters() if p.dim() >= 2)


@dataclass(frozen=True)
class FlopModel:
    """The per-token and per-patch costs of one Qwen-VL checkpoint."""

    decoder_weights: int
    lm_head_weights: int
    layers: int
    attention_width: int  # heads x head_dim
    vision_weights: int  # patch embedding + blocks, per patch
    merger_weights: int  # final + deepstack mergers, per merged token
    vision_depth: int
    vision_width: int
    merge: int  # patches per merged token (spatial_merge_size ** 2)

    @classmethod
    def of(cls, model: torch.nn.Module) -> FlopModel:
        inner = model.model
        text = model.config.get_text_config()
        vision = model.config.vision_config
        visual = inner.visual
        mergers = [visual.merger, *getattr(visual, "deepstack_merger_list", [])]
        return cls(
            decoder_weights=_matmul_weights(inner.language_model.layers),
            lm_head_weights=model.lm_head.weight.numel(),
            layers=text.num_hidden_layers,
            attention_width=text.num_attention_heads * getattr(text, "head_dim", text.hidden_size // text.num_attention_heads),
            vision_weights=_matmul_weights(visual.patch_embed) + _matmul_weights(visual.blocks),
            merger_weights=sum(_matmul_weights(m) for m in mergers),
            vision_depth=vision.depth,
            vision_width=vision.hidden_size,
            merge=vision.spatial_merge_size**2,
        )  # fmt: skip

    def forward_flops(self, tokens: int, image_patches: Sequence[int] = ()) -> int:
        """One forward pass over a ``tokens``-long sequence whose images have ``image_patches`` patches each."""
        text = 2 * tokens * (self.decoder_weights + self.lm_head_weights) + 4 * self.layers * self.attention_width * tokens**2
        patches = sum(image_patches)
        vision = 2 * patches * self.vision_weights + 2 * (patches // self.merge) * self.merger_weights
        vision += 4 * self.vision_depth * self.vision_width * sum(p * p for p in image_patches)
        return text + vision

    def sequence_flops(self, encoded) -> int:  # noqa: ANN001 - paravt.policies.encoded.Encoded
        """Forward FLOPs of one encoded sequence (its ids and its images' grids)."""
        grids = [] if encoded.image_grid_thw is None else [int(t * h * w) for t, h, w in encoded.image_grid_thw.tolist()]
        return self.forward_flops(len(encoded.input_ids), grids)


def peak_flops(device: torch.device) -> float | None:
    """Dense bf16 tensor-core peak FLOP/s of the GPU by name (NVIDIA's data sheets), None where unknown (CPU)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    table = (("H200", 989.4e12), ("H100 PCIe", 756.0e12), ("H100", 989.4e12), ("A100", 312.0e12), ("L40S", 362.1e12))
    return next((value for key, value in table if key in name), None)
