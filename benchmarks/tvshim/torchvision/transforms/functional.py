"""``torchvision.transforms.functional``: ``resize`` as torchvision computes it for tensors (``F.interpolate`` with
antialiasing, rounded back to the input's integer dtype: what qwen-vl-utils calls), and the PIL <-> tensor
conversions transformers imports."""

import numpy as np
import torch
import torch.nn.functional as F


def resize(img, size, interpolation=None, antialias=True):
    mode = getattr(interpolation, "value", "bilinear")
    x = img if img.is_floating_point() else img.float()
    single = x.dim() == 3
    if single:
        x = x.unsqueeze(0)
    y = F.interpolate(x, size=list(size), mode=mode, antialias=antialias, align_corners=False)
    if not img.is_floating_point():
        y = y.round_().clamp_(0, 255).to(img.dtype)
    return y.squeeze(0) if single else y


def pil_to_tensor(pic):
    """A PIL image -> C x H x W tensor of its own dtype (uint8 for 8-bit modes), no scaling."""
    array = np.array(pic, copy=True)
    if array.ndim == 2:
        array = array[:, :, None]
    return torch.from_numpy(array).permute(2, 0, 1).contiguous()


def to_tensor(pic):
    """A PIL image or H x W x C array -> C x H x W float32 in [0, 1] (integer inputs divided by 255)."""
    if isinstance(pic, np.ndarray):
        array = pic[:, :, None] if pic.ndim == 2 else pic
        tensor = torch.from_numpy(np.ascontiguousarray(array)).permute(2, 0, 1).contiguous()
    else:
        tensor = pil_to_tensor(pic)
    return tensor.float().div(255) if tensor.dtype == torch.uint8 else tensor.float()


def to_pil_image(pic, mode=None):
    from PIL import Image

    if isinstance(pic, torch.Tensor):
        if pic.is_floating_point():
            pic = pic.mul(255).round().clamp(0, 255).byte()
        array = pic.permute(1, 2, 0).numpy() if pic.dim() == 3 else pic.numpy()
    else:
        array = np.asarray(pic)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    return Image.fromarray(array, mode=mode)
