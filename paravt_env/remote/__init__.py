"""The env over the network: ``paravt serve-env`` (``server``) and ``RemoteVideoToolEnv`` (``client``).

The client needs httpx only (a core dependency); the server FastAPI with uvicorn (the ``[serve]`` extra), which
also speaks OpenEnv's protocol (``openenv``; OpenEnv's own client: ``openenv_client``, with ``openenv-core``).
"""

from .client import RemoteEnvError, RemoteVideoToolEnv
from .wire import FRAME_ENCODINGS

__all__ = ["FRAME_ENCODINGS", "RemoteEnvError", "RemoteVideoToolEnv"]
