"""``resize`` as torchvision computes it for tensors: ``F.interpolate`` with antialiasing, rounded back to the
input's integer dtype."""

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
