"""Qwen-VL's patch embedding as the matrix product it is.

Qwen2.5-VL and Qwen3-VL embed each ``temporal x patch x patch`` pixel patch with a ``Conv3d`` whose kernel equals
its stride, applied to a batch of single patches: every output is one dot product of a flattened patch with a
flattened filter, a linear layer in all but name. A convolution library does not know that. On a CPU, torch's
own convolution (what runs once oneDNN is off, as ``cpu_numerics`` turns it off so that floats repeat across
machines) took 1.17 s for the forward and backward pass of 4,096 patches of the tiny model at 1 thread, oneDNN's
0.52 s, and the same product as ``F.linear`` 0.04-0.05 s . On a pinned RL step of the main job that
convolution was a quarter of the step. ``F.linear`` runs on MKL's matrix multiply, which ``MKL_CBWR`` pins, so it
is both the fast path and the one that repeats on another machine.

``linear_patch_embed(model)`` rebinds the ``forward`` of every such patch embedding in the model to the matrix
product. The weights stay the convolution's (a checkpoint saves and loads as before); outputs equal the
convolution's up to float rounding (about 1e-6 on the tiny model).
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F
from torch import nn


def _is_patch_conv(conv: nn.Module) -> bool:
    """A ``Conv3d`` that sees each patch once and only once: kernel = stride, no padding, dilation or groups."""
    return (isinstance(conv, nn.Conv3d) and tuple(conv.kernel_size) == tuple(conv.stride)
            and all(p == 0 for p in conv.padding) and all(d == 1 for d in conv.dilation) and conv.groups == 1)  # fmt: skip


def _linear_forward(self: nn.Module, hidden_states: torch.Tensor) -> torch.Tensor:
    weight = self.proj.weight  # (embed, channels, temporal, patch, patch): the order the flat patch is in
    flat = hidden_states.to(dtype=weight.dtype).reshape(-1, weight[0].numel())
    return F.linear(flat, weight.reshape(weight.shape[0], -1), self.proj.bias)


def linear_patch_embed(model: nn.Module) -> int:
    """Compute every Qwen-VL patch embedding of ``model`` (a module with a kernel-equals-stride ``Conv3d`` named
    ``proj``, as ``Qwen2_5_VisionPatchEmbed`` and ``Qwen3VLVisionPatchEmbed`` have) as ``F.linear``; returns how many
    it rebound (0 for a model without one)."""
    count = 0
    for module in model.modules():
        if type(module).__name__.endswith("PatchEmbed") and _is_patch_conv(getattr(module, "proj", None)):
            module.forward = types.MethodType(_linear_forward, module)
            count += 1
    return count
