"""ParaVT-Gym's environment layer: video decoding, data, the tool protocol, rewards and the env itself.

Imports with numpy, gymnasium and the video decoders only; never torch (see ../shared/DESIGN.md).
"""

__version__ = "0.1.0"
