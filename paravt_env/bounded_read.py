"""Reading an HTTP reply under a size cap and a total deadline: the one loop every client here uses
(``RemoteVideoToolEnv``, the remote policies, the LLM judge), each turning the two refusals into its own error."""

from __future__ import annotations

import time
from typing import Any


class ReplyTooLarge(Exception):
    """The reply passed the cap: ``size`` bytes (``declared``: by its Content-Length, before anything was read)."""

    def __init__(self, size: int, declared: bool) -> None:
        super().__init__(size)
        self.size, self.declared = size, declared


class ReplyTooSlow(Exception):
    """The reply was still arriving at the deadline."""


def read_bounded(response: Any, max_bytes: int, deadline: float) -> bytes:
    """The body of an httpx streaming ``response``: at most ``max_bytes``, all of it by ``deadline``
    (``time.monotonic()``), checked after every chunk (a server trickling one byte a second cannot hold the call)."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ReplyTooLarge(int(declared), declared=True)
    body = bytearray()
    for chunk in response.iter_raw():
        body += chunk
        if len(body) > max_bytes:
            raise ReplyTooLarge(len(body), declared=False)
        if time.monotonic() > deadline:
            raise ReplyTooSlow
    return bytes(body)
