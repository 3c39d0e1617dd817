"""``torchvision.io``: the image readers transformers imports (through PIL, as tensors in torchvision's layout);
no video decoding (the env decodes its own frames, qwen-vl-utils reads video through decord here)."""

from __future__ import annotations

import enum
import io as _io


class ImageReadMode(enum.Enum):
    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4


_PIL_MODES = {ImageReadMode.GRAY: "L", ImageReadMode.GRAY_ALPHA: "LA", ImageReadMode.RGB: "RGB",
              ImageReadMode.RGB_ALPHA: "RGBA"}  # fmt: skip


def _from_pil(image, mode):
    from .transforms.functional import pil_to_tensor

    mode = ImageReadMode(mode) if not isinstance(mode, ImageReadMode) else mode
    if mode is not ImageReadMode.UNCHANGED:
        image = image.convert(_PIL_MODES[mode])
    return pil_to_tensor(image)


def decode_image(data, mode=ImageReadMode.UNCHANGED, apply_exif_orientation=False):
    """A 1-D uint8 tensor of encoded bytes (or a path) -> a C x H x W uint8 tensor."""
    from PIL import Image, ImageOps

    if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__"):
        return read_image(data, mode, apply_exif_orientation)
    image = Image.open(_io.BytesIO(data.numpy().tobytes()))
    if apply_exif_orientation:
        image = ImageOps.exif_transpose(image)
    return _from_pil(image, mode)


def read_image(path, mode=ImageReadMode.UNCHANGED, apply_exif_orientation=False):
    from PIL import Image, ImageOps

    image = Image.open(path)
    if apply_exif_orientation:
        image = ImageOps.exif_transpose(image)
    return _from_pil(image, mode)


def read_video(*args, **kwargs):
    raise RuntimeError("torchvision.io.read_video is not available in this stand-in: decode video with PyAV or decord "
                       "(qwen-vl-utils: FORCE_QWENVL_VIDEO_READER=decord)")  # fmt: skip
