"""torchvision.io is not provided: qwen-vl-utils reads video through decord here (FORCE_QWENVL_VIDEO_READER)."""


def read_video(*args, **kwargs):
    raise RuntimeError("torchvision.io is not available in this stand-in; set FORCE_QWENVL_VIDEO_READER=decord")
