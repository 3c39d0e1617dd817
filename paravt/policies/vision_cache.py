"""One vision-tower pass per distinct image: the features of the images a step has already encoded, reused.

A step holds several times more images than distinct frames (measured 3.2-3.8x): a GRPO group's
rollouts share one overview, crops of a fixed grid repeat across rollouts, and a turn's prompt holds the previous
turns' images again. ``VisionCache.features(prompt, first)`` returns the model's own per-image encoder outputs
(``get_image_features``: the merged embeddings and, for Qwen3-VL, the DeepStack features) for images
``first..`` of ``prompt``, computing only those it has not seen, all of them in one tower pass, and hands them to
the forward pass as ``mm_encoder_outputs``, the argument transformers has for precomputed features.

An image is known by its processed pixels and its grid (bytes equal, features equal). The cache holds features
of one set of weights: it is cleared when the vision tower's parameters change in place (an optimizer step, a
``load_state_dict``: torch counts each tensor's in-place writes) and by ``clear`` (the rollout clears it at
every step, so that what a step computes never depends on what an earlier step left there: resume stays
bit-exact).
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

import torch

from paravt.policies.encoded import Encoded


class VisionCache:
    """Per-image encoder outputs of ``model`` (a Qwen-VL ``...ForConditionalGeneration``), keyed by pixels."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._features: dict[tuple, tuple[torch.Tensor, tuple[torch.Tensor, ...]]] = {}
        self._weights: tuple[int, ...] | None = None
        self._type: Any = None  # the model's encoder-output class, learnt from its first pass
        self.supported = "mm_encoder_outputs" in inspect.signature(model.model.forward).parameters
        """Whether this transformers takes precomputed features (``mm_encoder_outputs``: 5.2x; the engines' pins,
        5.9 and 5.15, do not): where not, images are encoded in every pass that holds them, as before."""
        self.stats = {"images": 0, "encoded": 0}
        """Running totals: images asked for, and images the tower actually encoded."""

    def clear(self) -> None:
        self._features.clear()

    def _weights_version(self) -> tuple[int, ...]:
        return tuple(p._version for p in self.model.model.visual.parameters())

    def image_keys(self, prompt: Encoded) -> list[tuple]:
        """Each image of ``prompt`` by identity and grid: its frame's digest where the prompt keeps its frames (one
        image processor turns equal frames into equal pixels), else a digest of its processed pixels."""
        grid = prompt.image_grid_thw
        digests = prompt.frame_digests
        if digests is not None:
            return [(d, tuple(thw)) for d, thw in zip(digests, grid.tolist(), strict=True)]
        pixels = prompt.pixel_values
        keys, row = [], 0
        for thw in grid.tolist():
            n = thw[0] * thw[1] * thw[2]
            piece = pixels[row : row + n].detach().cpu().contiguous()
            keys.append((hashlib.blake2b(piece.numpy().tobytes(), digest_size=16).digest(), tuple(thw)))
            row += n
        return keys

    def features_of(self, prompts: list[Encoded]) -> Any:
        """The encoder outputs of every image of ``prompts``, in order (a batched forward pass's)."""
        parts = [self.features(p) for p in prompts]
        fields: dict[str, Any] = {"pooler_output": tuple(t for part in parts for t in part.pooler_output)}
        deep = [getattr(part, "deepstack_features", None) for part in parts]
        if deep[0]:
            fields["deepstack_features"] = [tuple(t for d in deep for t in d[layer]) for layer in range(len(deep[0]))]
        return self._type(**fields)

    def features(self, prompt: Encoded, first: int = 0, keys: list[tuple] | None = None, *, stop: int | None = None) -> Any:
        """The encoder outputs of images ``first:stop`` of ``prompt`` (default: to the last), as
        ``get_image_features`` returns them (``keys``: the prompt's ``image_keys``, where the caller has them)."""
        version = self._weights_version()
        if version != self._weights:
            self._features.clear()
            self._weights = version
        keys = (keys if keys is not None else self.image_keys(prompt))[first:stop]
        grid, pixels = prompt.image_grid_thw, prompt.pixel_values
        starts = [0]
        for n in grid.prod(-1).tolist():
            starts.append(starts[-1] + int(n))
        missing: dict[tuple, int] = {}
        for i, k in enumerate(keys, start=first):
            if k not in self._features and k not in missing:
                missing[k] = i
        self.stats["images"] += len(keys)
        self.stats["encoded"] += len(missing)
        if missing:
            order = list(missing.values())
            batch = torch.cat([pixels[starts[i] : starts[i + 1]] for i in order]).to(self.model.device)
            encoded = self.model.model.get_image_features(batch, grid[order].to(self.model.device), return_dict=True)
            self._type = type(encoded)
            deep = getattr(encoded, "deepstack_features", None) or []
            for j, k in enumerate(missing):
                self._features[k] = (encoded.pooler_output[j], tuple(layer[j] for layer in deep))
        embeds = tuple(self._features[k][0] for k in keys)
        n_deep = len(self._features[keys[0]][1])
        fields: dict[str, Any] = {"pooler_output": embeds}
        if n_deep:
            fields["deepstack_features"] = [tuple(self._features[k][1][d] for k in keys) for d in range(n_deep)]
        return self._type(**fields)
