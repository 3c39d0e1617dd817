"""The env over the network: ``paravt serve-env`` (``server``) and ``RemoteVideoToolEnv`` (``client``).

The client needs httpx only (a core dependency); the server the standard library's HTTP server.
"""

from .client import RemoteEnvError, RemoteVideoToolEnv
from .wire import FRAME_ENCODINGS

__all__ = ["FRAME_ENCODINGS", "RemoteEnvError", "RemoteVideoToolEnv"]
