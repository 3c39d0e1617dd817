"""The HTTP transport ``paravt serve-env`` and ``paravt serve`` share: uvicorn on a socket bound up front (a busy
port fails at construction, as an ``OSError``), and an ASGI middleware that bounds what a client may send (body
size and arrival time, JSON depth and number size, requests in flight) before the app sees the request."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse

logger = logging.getLogger(__name__)


def error_response(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status, headers=headers)


# --- bounded requests: the body read with a size cap and a deadline before the request counts ------------------
@dataclass(frozen=True)
class RequestBounds:
    max_body_bytes: int
    """Largest request body (413 above it; refused before it is read when its length is declared)."""
    body_timeout_s: float
    """The whole body must arrive within this long (408 otherwise)."""
    max_inflight: int
    """Admitted requests at once (503 with Retry-After beyond)."""
    write_timeout_s: float = 120.0
    """A reply (or a WebSocket message) must drain to the client within this long; a client that does not read it
    has its connection dropped, and the unsent reply with it (without this, each unread reply stays in the server's
    send buffer for as long as the client keeps the connection open)."""
    max_unread_bytes: int = 256 * 2**20
    """What all the replies clients have not read yet may hold at once, across every connection of the server: past
    it the connection whose unread bytes have waited longest is dropped first, and so on until they fit. The time
    bound alone let six slow readers hold 1.1 GB of frames for two minutes."""


class BoundedRequests:
    """ASGI middleware: the whole body is read (at most ``max_body_bytes``, within ``body_timeout_s``) and
    parsed as JSON (depth and number size refused as 400) before the request is admitted; at most
    ``max_inflight`` admitted requests run at once (503 beyond). A slow sender holds a connection, not a slot."""

    def __init__(self, app: Any, limits: RequestBounds) -> None:
        self.app, self.limits = app, limits
        self.inflight = 0
        self.unread = UnreadReplies(limits.max_unread_bytes)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        try:
            await self._bounded(scope, receive, _send_within(send, self.limits.write_timeout_s, self.unread))
        except _WriteTimedOut as exc:
            logger.warning("%s %s: %s", scope.get("method", "WS"), scope.get("path"), exc)

    async def _bounded(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limits = self.limits
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        method = scope["method"]
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await error_response(400, f"Content-Length {declared.decode(errors='replace')!r} is not an integer",
                             "BadRequest", {"Connection": "close"})(scope, receive, send)  # fmt: skip
                return
            if size > limits.max_body_bytes:
                await error_response(413, f"the body is {size} bytes, above the limit of {limits.max_body_bytes}", "BadRequest",
                             {"Connection": "close"})(scope, receive, send)  # fmt: skip
                return
        elif method in ("POST", "PUT") and headers.get(b"transfer-encoding") is None:
            await error_response(411, "a Content-Length header is required", "BadRequest", {"Connection": "close"})(scope, receive, send)
            return
        try:
            body = await asyncio.wait_for(self._read(receive), limits.body_timeout_s)
        except asyncio.TimeoutError:
            await error_response(408, f"the body did not arrive within {limits.body_timeout_s:g} s", "RequestTimeout",
                         {"Connection": "close"})(scope, receive, send)  # fmt: skip
            return
        except _TooLarge:
            await error_response(413, f"the body is above the limit of {limits.max_body_bytes} bytes", "BadRequest",
                         {"Connection": "close"})(scope, receive, send)  # fmt: skip
            return
        except _Disconnected:
            return
        if body:
            problem = _json_problem(body)
            if problem:
                await error_response(400, problem, "BadRequest")(scope, receive, send)
                return
        if self.inflight >= limits.max_inflight:
            await error_response(503, f"{limits.max_inflight} requests in flight; retry later", "ServerBusy",
                         {"Retry-After": "1"})(scope, receive, send)  # fmt: skip
            return
        self.inflight += 1
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        try:
            await self.app(scope, replay, send)
        finally:
            self.inflight -= 1

    async def _read(self, receive: Any) -> bytes:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limits.max_body_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


class _TooLarge(Exception):
    pass


class _WriteTimedOut(Exception):
    pass


class UnreadReplies:
    """The connections of one server that hold reply bytes their clients have not read, oldest first, and a bound on
    all of them together (``RequestBounds.max_unread_bytes``): past it, the connection whose bytes have waited
    longest is aborted (which frees them), then the next, until the rest fit. Each is logged with what it held."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = int(max_bytes)
        self.queued: dict[Any, None] = {}  # insertion order: the oldest unread reply first
        self.cut = 0  # connections dropped for the bound, over the server's life

    def total(self) -> int:
        for transport in [t for t in self.queued if t.is_closing() or t.get_write_buffer_size() == 0]:
            del self.queued[transport]  # drained or gone: nothing held any more
        return sum(t.get_write_buffer_size() for t in self.queued)

    def note(self, transport: Any) -> None:
        """After a send on ``transport``: keep it while it holds unread bytes, and cut the oldest past the bound."""
        if transport is None or transport.get_write_buffer_size() == 0:
            return
        self.queued.setdefault(transport, None)
        total = self.total()
        while total > self.max_bytes and self.queued:
            oldest = next(iter(self.queued))
            held = oldest.get_write_buffer_size()
            logger.warning("unread replies hold %d bytes, above the bound of %d: dropped the connection whose %d unread "
                           "bytes waited longest", total, self.max_bytes, held)  # fmt: skip
            _abort(oldest)
            del self.queued[oldest]
            self.cut += 1
            total -= held


def _send_within(send: Any, timeout_s: float, unread: UnreadReplies | None = None) -> Any:
    """``send`` whose message must reach the client within ``timeout_s``. uvicorn's ``send`` returns once the bytes
    are queued on the connection (waiting only while a previous write is paused), so two checks: a send that blocks
    past the timeout, and, after each send, what is still queued: if the client has not taken it by then, the
    connection is aborted, which frees what was queued for it (``_WriteTimedOut`` ends a request still running).
    ``unread`` bounds what every connection's queued bytes hold together (``UnreadReplies``)."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)  # uvicorn's protocol object holds it
    watcher: asyncio.Task | None = None  # one per connection: the oldest queued bytes set the deadline

    async def bounded(message: dict) -> None:
        nonlocal watcher
        try:
            await asyncio.wait_for(send(message), timeout_s)
        except asyncio.TimeoutError:
            _abort(transport)
            raise _WriteTimedOut(f"the client did not read its reply within {timeout_s:g} s: connection dropped") from None
        if transport is not None and transport.get_write_buffer_size() > 0 and (watcher is None or watcher.done()):
            watcher = asyncio.create_task(_drop_unread(transport, timeout_s))
            _watch(watcher)
        if unread is not None:
            unread.note(transport)

    return bounded


_WATCHERS: set[asyncio.Task] = set()


def _watch(task: asyncio.Task) -> None:
    _WATCHERS.add(task)  # a reference until it ends (the event loop keeps only weak ones)
    task.add_done_callback(_WATCHERS.discard)


async def _drop_unread(transport: Any, timeout_s: float) -> None:
    """Abort ``transport`` if what is queued on it has not drained within ``timeout_s``."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not transport.is_closing() and transport.get_write_buffer_size() > 0:
        if asyncio.get_running_loop().time() >= deadline:
            logger.warning("a client did not read %d queued bytes within %g s: connection dropped",
                           transport.get_write_buffer_size(), timeout_s)  # fmt: skip
            _abort(transport)
            return
        await asyncio.sleep(min(0.1, timeout_s))


def _abort(transport: Any) -> None:
    """Abort a connection: ``close`` would wait to flush a buffer the client never reads, ``abort`` drops it."""
    if transport is not None:
        transport.abort()


class _Disconnected(Exception):
    pass


def _json_problem(body: bytes) -> str | None:
    """Why ``body`` is not a JSON object this server parses, or None."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "the body is not UTF-8"
    try:
        value = json.loads(text)
    except RecursionError:
        return "the body is nested too deeply"
    except json.JSONDecodeError as exc:
        return f"the body is not JSON ({exc.msg} at position {exc.pos})"
    except ValueError as exc:  # e.g. an integer of more digits than Python parses
        return f"the body is not JSON this server accepts ({exc})"
    if not isinstance(value, dict):
        return f"the body must be a JSON object, got {type(value).__name__}"
    return None




def route_errors(app: Any) -> None:
    """No such route (404) and a method a route does not take (405) in the ``{"error": ...}`` envelope."""
    from starlette.exceptions import HTTPException

    @app.exception_handler(HTTPException)
    async def _http(request: Any, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return error_response(404, f"no route {request.method} {request.url.path}", "NoSuchRoute")
        if exc.status_code == 405:
            return error_response(405, f"{request.method} is not allowed on {request.url.path}", "MethodNotAllowed")
        return error_response(exc.status_code, str(exc.detail), "HTTPError")


class UvicornServer:
    """``app`` served by uvicorn on ``address``, bound now. ``serve_forever`` blocks; ``shutdown`` (from another
    thread) stops it and waits; ``close`` closes the socket."""

    def __init__(self, app: Any, address: tuple[str, int], keep_alive_s: float = 5.0) -> None:
        import uvicorn

        self.socket = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind(address)
            self.socket.listen(1024)
        except OSError:
            self.socket.close()
            raise
        self.address = self.socket.getsockname()
        self._uvicorn = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="auto",
                                                      timeout_keep_alive=int(max(1, keep_alive_s))))  # fmt: skip
        self._served = threading.Event()

    @property
    def url(self) -> str:
        host, port = self.address[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def serve_forever(self) -> None:
        try:
            self._uvicorn.run(sockets=[self.socket])
        finally:
            self._served.set()

    def shutdown(self, timeout: float = 10.0) -> None:
        self._uvicorn.should_exit = True
        self._served.wait(timeout)

    def close(self) -> None:
        self._uvicorn.should_exit = True
        self.socket.close()
