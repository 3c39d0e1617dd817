"""``torchvision.transforms.v2.functional`` for tensors: the operations transformers' torchvision image and video
processors call, with torchvision's semantics (documented at pytorch.org/vision; reimplemented on torch ops):

- ``resize``: a no-op at the same size; otherwise ``F.interpolate`` (antialiased for bilinear / bicubic, corners
  not aligned), on uint8 directly for bicubic on the CPU, else in float32 and rounded (and clamped, for bicubic)
  back to the input's integer dtype;
- ``normalize``: ``(x - mean) / std`` per channel, on a float tensor;
- ``crop``: a window, zero-padded where it leaves the image; ``pad``: constant / edge / reflect / symmetric;
- ``grayscale_to_rgb``: one channel repeated three times; ``pil_to_tensor`` / ``to_tensor`` as in v1.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import InterpolationMode
from ..functional import pil_to_tensor, to_pil_image, to_tensor  # noqa: F401

__all__ = ["InterpolationMode", "crop", "grayscale_to_rgb", "normalize", "pad", "pil_to_tensor", "resize",
           "to_pil_image", "to_tensor"]  # fmt: skip


def _mode(interpolation) -> InterpolationMode:
    if isinstance(interpolation, InterpolationMode):
        return interpolation
    if isinstance(interpolation, int):  # PIL's resampling constants
        return {0: InterpolationMode.NEAREST, 1: InterpolationMode.LANCZOS, 2: InterpolationMode.BILINEAR,
                3: InterpolationMode.BICUBIC, 4: InterpolationMode.BOX, 5: InterpolationMode.HAMMING}[interpolation]  # fmt: skip
    return InterpolationMode(getattr(interpolation, "value", interpolation))


def _output_size(height: int, width: int, size, max_size) -> tuple[int, int]:
    if size is None:
        if max_size is None:
            raise ValueError("resize needs size or max_size")
        scale = max_size / max(height, width)
        return max(1, int(height * scale)), max(1, int(width * scale))
    if isinstance(size, int) or len(size) == 1:  # the shorter edge
        short = size if isinstance(size, int) else size[0]
        small, large = min(height, width), max(height, width)
        new_small, new_large = short, int(short * large / small)
        if max_size is not None and new_large > max_size:
            new_small, new_large = int(max_size * new_small / new_large), max_size
        return (new_small, new_large) if height <= width else (new_large, new_small)
    return int(size[0]), int(size[1])


def resize(inpt, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True):
    if not isinstance(inpt, torch.Tensor):  # a PIL image
        from PIL import Image

        h, w = _output_size(inpt.height, inpt.width, size, max_size)
        return inpt if (h, w) == (inpt.height, inpt.width) else inpt.resize((w, h), Image.Resampling.BICUBIC
                                                                             if _mode(interpolation) is InterpolationMode.BICUBIC
                                                                             else Image.Resampling.BILINEAR)  # fmt: skip
    mode = _mode(interpolation)
    shape = inpt.shape
    channels, height, width = shape[-3:]
    new_h, new_w = _output_size(height, width, size, max_size)
    if (new_h, new_w) == (height, width) or inpt.numel() == 0:
        return inpt
    smooth = mode in (InterpolationMode.BILINEAR, InterpolationMode.BICUBIC)
    dtype = inpt.dtype
    native = dtype in (torch.float32, torch.float64) or (
        dtype == torch.uint8 and (not smooth or (mode is InterpolationMode.BICUBIC and inpt.device.type == "cpu"))
    )
    x = inpt.reshape(-1, channels, height, width)
    if not native:
        x = x.float()
    y = F.interpolate(x, size=[new_h, new_w], mode=mode.value, align_corners=False if smooth else None,
                      antialias=bool(antialias) and smooth)  # fmt: skip
    if not native:
        if mode is InterpolationMode.BICUBIC and dtype == torch.uint8:
            y = y.clamp_(0, 255)
        if not dtype.is_floating_point:
            y = y.round_()
        y = y.to(dtype)
    return y.reshape(shape[:-3] + (channels, new_h, new_w))


def normalize(inpt, mean, std, inplace=False):
    if not inpt.is_floating_point():
        raise TypeError(f"normalize needs a floating point tensor, got {inpt.dtype}")
    mean = torch.as_tensor(mean, dtype=inpt.dtype, device=inpt.device).view(-1, 1, 1)
    std = torch.as_tensor(std, dtype=inpt.dtype, device=inpt.device).view(-1, 1, 1)
    out = inpt if inplace else inpt.clone()
    return out.sub_(mean).div_(std)


def _ltrb(padding) -> tuple[int, int, int, int]:
    if isinstance(padding, int):
        return padding, padding, padding, padding
    padding = list(padding)
    if len(padding) == 1:
        return padding[0], padding[0], padding[0], padding[0]
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    return padding[0], padding[1], padding[2], padding[3]


def pad(inpt, padding, fill=0, padding_mode="constant"):
    left, top, right, bottom = _ltrb(padding)
    if padding_mode == "constant":
        return F.pad(inpt, [left, right, top, bottom], mode="constant", value=0 if fill is None else fill)
    mode = {"edge": "replicate", "reflect": "reflect", "symmetric": "symmetric"}[padding_mode]
    if mode == "symmetric":  # reflect including the edge pixel
        x = inpt
        if top or bottom:
            x = torch.cat([x[..., :top, :].flip(-2), x, x[..., x.shape[-2] - bottom :, :].flip(-2)], dim=-2)
        if left or right:
            x = torch.cat([x[..., :left].flip(-1), x, x[..., x.shape[-1] - right :].flip(-1)], dim=-1)
        return x
    dtype = inpt.dtype
    x = inpt.reshape(-1, *inpt.shape[-3:]).float()
    y = F.pad(x, [left, right, top, bottom], mode=mode).to(dtype)
    return y.reshape(inpt.shape[:-2] + y.shape[-2:])


def crop(inpt, top, left, height, width):
    h, w = inpt.shape[-2:]
    right, bottom = left + width, top + height
    if left < 0 or top < 0 or right > w or bottom > h:
        window = inpt[..., max(top, 0) : min(bottom, h), max(left, 0) : min(right, w)]
        return F.pad(window, [max(-left, 0), max(right - w, 0), max(-top, 0), max(bottom - h, 0)], value=0)
    return inpt[..., top:bottom, left:right]


def grayscale_to_rgb(inpt):
    return inpt if inpt.shape[-3] == 3 else inpt.repeat(*([1] * (inpt.dim() - 3)), 3, 1, 1)
