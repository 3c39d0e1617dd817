"""Hostile clients against ``paravt serve-env`` and hostile servers against ``RemoteVideoToolEnv``: every bomb,
trickle and malformed message is refused with a 4xx (server) or a ``RemoteEnvError`` naming it (client), and
nothing grows without bound."""

import base64
import json
import socket
import threading
import time

import httpx
import pytest

from paravt_env.remote import RemoteVideoToolEnv
from paravt_env.remote.client import RemoteEnvError


def post(url, path, body, **kw):
    return httpx.post(url + path, json=body, timeout=60, **kw)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"frame_budget": 100000}, "'frame_budget' = 100000 is above this server's limit of 256"),
        ({"max_pixels": 12000 * 12000}, "'max_pixels'"),
        ({"crop_max_frames": 5000}, "'crop_max_frames'"),
        ({"crop_fps": 500.0}, "'crop_fps'"),
        ({"max_parallel": 1500}, "'max_parallel' = 1500"),
        ({"max_turns": 10000}, "'max_turns'"),
        ({"gating_choices": [4, 100000]}, "gating_choices"),
        ({"max_action_chars": 10**9}, "'max_action_chars'"),
    ],
)
def test_options_above_the_servers_ceilings_are_refused(env_server, options, words):
    r = post(env_server.url, "/v1/sessions", {"options": options})
    assert r.status_code == 400 and words in r.json()["error"]["message"], r.text
    limits = httpx.get(env_server.url + "/health").json()["limits"]
    assert limits["max_frame_budget"] == 256 and limits["max_parallel"] == 16


def test_a_reset_cannot_ask_for_more_frames_than_the_ceiling(env_server):
    sid = post(env_server.url, "/v1/sessions", {"options": {"frame_budget": 4}}).json()["session_id"]
    r = post(env_server.url, f"/v1/sessions/{sid}/reset", {"options": {"index": 0, "frame_budget": 5000}})
    assert r.status_code == 400 and "frame_budget" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b'{"seed": ' + b"9" * 4400 + b"}", "JSON this server accepts"),  # more digits than Python parses
        (b'{"a": ' + b"[" * 200000 + b"]" * 200000 + b"}", "nested too deeply"),
    ],
)
def test_json_bombs_are_400_not_500(env_server, raw, words):
    sid = post(env_server.url, "/v1/sessions", {"options": {"frame_budget": 4}}).json()["session_id"]
    r = httpx.post(env_server.url + f"/v1/sessions/{sid}/reset", content=raw, timeout=60)
    assert r.status_code == 400 and words in r.json()["error"]["message"], r.text[:300]


def test_the_ceilings_bind_the_envs_defaults_too(env_samples, start_env_server):
    """An operator's ceilings bound what the env will use, not only what a client names: `{}` asks for the env's
    defaults (5 crops a turn, 16 frames a crop; under gating up to 64 overview frames)."""
    server = start_env_server(env_samples, max_frame_budget=8, max_parallel=2)
    for options, words in [({}, "'frame_budget' = 64 (the env's default: ask for less) is above this server's limit of 8"),
                           ({"frame_budget": 8}, "'max_parallel' = 5 (the env's default: ask for less) is above"),
                           ({"frame_budget": 8, "max_parallel": 2, "nframes_gating": True},
                            "'gating_choices' holds 16 (the env's default: ask for less)")]:
        r = post(server.url, "/v1/sessions", {"options": options})
        assert r.status_code == 400 and words in r.json()["error"]["message"], r.text
    r = post(server.url, "/v1/sessions", {"options": {"max_parallel": 2, "frame_budget": 8}})
    assert r.status_code == 201, r.text


def test_a_string_seed_is_refused_not_coerced(env_server):
    sid = post(env_server.url, "/v1/sessions", {"options": {"frame_budget": 4}}).json()["session_id"]
    r = post(env_server.url, f"/v1/sessions/{sid}/reset", {"seed": "1"})
    assert r.status_code == 400 and "seed" in r.json()["error"]["message"], r.text


def test_an_openenv_binary_frame_gets_a_named_error_and_the_connection_goes_on(env_server):
    from websockets.sync.client import connect

    with connect(env_server.url.replace("http", "ws") + "/openenv/ws") as ws:
        ws.send(b'{"type": "reset", "data": {"index": 0}}')
        reply = json.loads(ws.recv(timeout=30))
        assert reply["type"] == "error" and "binary frames" in reply["data"]["message"]
        ws.send(json.dumps({"type": "state", "data": {}}))  # the connection still serves
        assert json.loads(ws.recv(timeout=30))["type"] == "state"


def _received(sock: socket.socket, wait_s: float) -> bytes:
    """What ``sock`` can still read after ``wait_s`` of not reading: the whole reply if the server kept it, only what
    the kernel had buffered if the server dropped the connection (then EOF or a reset)."""
    time.sleep(wait_s)
    chunks = []
    sock.settimeout(5)
    try:
        while chunk := sock.recv(1 << 20):
            chunks.append(chunk)
    except (ConnectionResetError, TimeoutError):
        pass
    return b"".join(chunks)


BIG = {"frame_budget": 64, "max_pixels": 200704}  # 64 raw frames of the 224 x 224 test videos: a 13 MB reply


def test_a_client_that_never_reads_its_reply_loses_the_connection_and_the_server_the_reply(env_samples,
                                                                                           start_env_server):  # fmt: skip
    """REST: a client asks for a 13 MB reset reply and does not read it: after write_timeout_s the connection is
    aborted and the part of the reply the kernel had not taken is gone from the server."""
    server = start_env_server(env_samples, write_timeout_s=1.0)
    sid = post(server.url, "/v1/sessions", {"options": BIG}).json()["session_id"]
    full = len(post(server.url, f"/v1/sessions/{sid}/reset", {"options": {"index": 0}}).content)  # read at once: whole
    sock = socket.create_connection(server.server_address[:2])
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    body = json.dumps({"options": {"index": 0}}).encode()
    sock.sendall(b"POST /v1/sessions/%s/reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % (sid.encode(), len(body)) + body)  # fmt: skip
    got = _received(sock, 4.0)  # the write timeout (1 s) and the watch's polling, with room
    sock.close()
    head, _, reply = got.partition(b"\r\n\r\n")
    assert b"200 OK" in head and 0 < len(reply) < full, (len(reply), full)  # cut: the server let go of the rest
    assert server.inflight == 0
    assert post(server.url, f"/v1/sessions/{sid}/reset", {"options": {"index": 0}}).status_code == 200  # still serves


def _raw_websocket(address, path: str) -> socket.socket:
    """A WebSocket opened by hand on a plain socket (a client library would read in a thread of its own)."""
    sock = socket.create_connection(address[:2])
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    key = base64.b64encode(b"0123456789abcdef").decode()
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())  # fmt: skip
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert b" 101 " in head, head
    return sock


def _text_frame(payload: bytes) -> bytes:
    """One masked text frame, as a client sends it (RFC 6455)."""
    mask = b"\x01\x02\x03\x04"
    size = bytes([0x80 | len(payload)]) if len(payload) < 126 else bytes([0x80 | 126]) + len(payload).to_bytes(2, "big")
    return b"\x81" + size + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload))


def test_an_openenv_client_that_never_reads_loses_the_connection(env_samples, start_env_server):
    from websockets.sync.client import connect

    server = start_env_server(env_samples, write_timeout_s=1.0)
    reset = json.dumps({"type": "reset", "data": {"index": 0, "options": BIG}})
    with connect(server.url.replace("http", "ws") + "/openenv/ws", max_size=None) as reader:
        reader.send(reset)
        full = len(reader.recv(timeout=60))
    sock = _raw_websocket(server.server_address, "/openenv/ws")
    sock.sendall(_text_frame(reset.encode()))
    got = _received(sock, 4.0)  # the write timeout (1 s) and the watch's polling, with room
    sock.close()
    assert 0 < len(got) < full, (len(got), full)  # the frame was cut: the server dropped the connection and the rest


def test_a_seed_out_of_range_is_400(env_server):
    sid = post(env_server.url, "/v1/sessions", {"options": {"frame_budget": 4}}).json()["session_id"]
    r = post(env_server.url, f"/v1/sessions/{sid}/reset", {"seed": 2**70})
    assert r.status_code == 400 and "seed" in r.json()["error"]["message"]


def test_slow_senders_hold_no_slot(env_samples, start_env_server):
    server = start_env_server(env_samples, max_inflight=4, body_timeout_s=2.0)
    host, port = server.server_address[:2]
    trickles = []
    for _ in range(12):  # three times the in-flight slots, each sending its body a byte at a time
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        trickles.append(s)
    time.sleep(0.3)
    r = httpx.get(server.url + "/health", timeout=10)  # everyone else is still served
    assert r.status_code == 200
    deadline = time.monotonic() + 2  # the health request leaves its slot just after its reply is sent
    while server.inflight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.inflight == 0  # the 12 tricklers hold none of the 4 slots
    assert post(server.url, "/v1/sessions", {"options": {"frame_budget": 4}}).status_code == 201
    time.sleep(2.5)
    for s in trickles:  # past the body deadline: each got a 408 and its connection closed
        assert s.recv(200).split(b"\r\n")[0].endswith(b"408 Request Timeout")
        s.close()


def test_an_unreadable_video_names_the_sample_not_the_servers_path(env_samples, start_env_server, tmp_path):
    import dataclasses

    broken = tmp_path / "secret_dir" / "broken.mp4"
    broken.parent.mkdir()
    broken.write_bytes(b"not a video at all" * 100)
    sample = dataclasses.replace(env_samples[0], id="broken-one", video_path=str(broken))
    server = start_env_server([sample, *env_samples[1:]])
    sid = post(server.url, "/v1/sessions", {"options": {"frame_budget": 4}}).json()["session_id"]
    r = post(server.url, f"/v1/sessions/{sid}/reset", {"options": {"index": 0}})
    assert r.status_code == 422 and "broken-one" in r.json()["error"]["message"]
    assert "secret_dir" not in r.text and str(tmp_path) not in r.text


# --- hostile servers ---------------------------------------------------------------------------------------
SESSION = {"session_id": "s1", "frame_encoding": "png",
           "spaces": {"max_frames": 8, "max_pixels": 12544, "max_text_chars": 1000},
           "config": {"gating_choices": [4, 8], "frame_budget": 4}}  # fmt: skip


class HostileServer:
    """A loopback HTTP server that answers a new session properly and a reset with ``reply`` (bytes, sent at
    ``rate`` bytes a second when given, or forever when ``endless``)."""

    def __init__(self, reply: bytes = b"", rate: float | None = None, endless: bool = False) -> None:
        self.reply, self.rate, self.endless = reply, rate, endless
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = False
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn) -> None:
        with conn:
            try:
                while True:
                    head = b""
                    while b"\r\n\r\n" not in head:
                        chunk = conn.recv(65536)
                        if not chunk:
                            return
                        head += chunk
                    top, body = head.split(b"\r\n\r\n", 1)
                    length = 0
                    for line in top.split(b"\r\n")[1:]:
                        key, _, value = line.partition(b":")
                        if key.strip().lower() == b"content-length":
                            length = int(value.strip())
                    while len(body) < length:
                        body += conn.recv(65536)
                    path = head.split(b" ")[1]
                    if path == b"/v1/sessions":
                        data = json.dumps(SESSION).encode()
                        conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
                    elif path.endswith(b"/reset"):
                        self.send_reply(conn)
                        return
                    else:
                        conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}')
            except OSError:
                return

    def send_reply(self, conn) -> None:
        if self.endless:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
            chunk = b" " * 65536
            while not self.stop:
                conn.sendall(chunk)
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(self.reply))
        if self.rate is None:
            conn.sendall(self.reply)
            return
        for i in range(len(self.reply)):
            if self.stop:
                return
            conn.sendall(self.reply[i : i + 1])
            time.sleep(1 / self.rate)

    def close(self) -> None:
        self.stop = True
        self.sock.close()


def png_declaring(width: int, height: int) -> str:
    """A PNG header claiming ``width`` x ``height`` (the rest need not decode: the client must not get that far)."""
    import zlib

    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    chunk = b"IHDR" + ihdr
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + len(ihdr).to_bytes(4, "big") + chunk + zlib.crc32(chunk).to_bytes(4, "big")).decode()


def reset_reply(frames: dict, **extra) -> bytes:
    body = {"observation": {"text": "<image>", "timestamps": [0.0], "frames": frames}, "info": {}, "sample": {}, **extra}
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("server_kwargs", "client_kwargs", "words"),
    [
        ({"endless": True}, {"max_reply_bytes": 1 << 20}, "max_reply_bytes"),
        # the default max_reply_bytes is 512 MiB; this session's spaces bound an observation far below that
        ({"endless": True}, {}, "the most an observation of this session's spaces can take"),
        ({"reply": b'{"observation": null}' + b" " * 200, "rate": 20.0}, {"timeout": 1.5}, "timeout=1.5"),
        ({"reply": reset_reply({"encoding": "png", "shape": [1, 12000, 12000, 3], "dtype": "uint8",
                                "data": [png_declaring(12000, 12000)]})}, {}, "above the observation space's 12544 pixels"),  # fmt: skip
        ({"reply": reset_reply({"encoding": "png", "shape": [1, 100, 100, 3], "dtype": "uint8",
                                "data": [png_declaring(12000, 12000)]})}, {}, "declares 12000x12000"),  # fmt: skip
        ({"reply": reset_reply({"encoding": "raw", "shape": [1, 10, 10, 3], "dtype": "uint8",
                                "data": base64.b64encode(bytes(10)).decode()})}, {}, "holds 10 bytes"),  # fmt: skip
        ({"reply": reset_reply({"encoding": "raw", "shape": [64, 10, 10, 3], "dtype": "uint8",
                                "data": base64.b64encode(bytes(64 * 300)).decode()})}, {}, "64 frames, above"),  # fmt: skip
        ({"reply": json.dumps({"info": {}, "sample": {}}).encode()}, {}, "has no ['observation']"),
        ({"reply": b"[1, 2, 3]"}, {}, "not an object"),
        ({"reply": b"<html>"}, {}, "not JSON"),
    ],
)
def test_hostile_replies_are_refused_and_named(server_kwargs, client_kwargs, words):
    server = HostileServer(**server_kwargs)
    try:
        env = RemoteVideoToolEnv(server.url, frame_encoding="png", **client_kwargs)
        t0 = time.monotonic()
        with pytest.raises(RemoteEnvError, match=words.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
            env.reset(options={"index": 0})
        assert time.monotonic() - t0 < 10  # abandoned, not waited out
        env.close()
    finally:
        server.close()


class _FakeTransport:
    def __init__(self, queued: int) -> None:
        self.queued, self.aborted = queued, False

    def get_write_buffer_size(self) -> int:
        return 0 if self.aborted else self.queued

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True


def test_unread_replies_past_the_bound_cut_the_oldest_reader_first():
    from paravt_env.remote.asgi import UnreadReplies

    unread = UnreadReplies(max_bytes=250)
    first, second, third = _FakeTransport(100), _FakeTransport(100), _FakeTransport(100)
    unread.note(first)
    unread.note(second)
    assert not first.aborted and unread.total() == 200
    unread.note(third)  # 300 > 250: the oldest goes, the two newer stay
    assert (first.aborted, second.aborted, third.aborted) == (True, False, False) and unread.cut == 1
    second.queued = 0  # read at last: it holds nothing and leaves the count
    assert unread.total() == 100
    unread.note(_FakeTransport(0))  # a reply that drained at once is never tracked
    assert len(unread.queued) == 1


def test_slow_readers_past_the_servers_unread_bound_are_cut_oldest_first(env_samples, start_env_server):
    """The time bound (60 s here) would let each slow reader hold its 13 MB reply for a minute; the bound on unread
    bytes (16 MB, above one reply, below two) cuts the oldest as soon as a second one queues, and a client that reads
    gets its whole reply."""
    import time

    server = start_env_server(env_samples, write_timeout_s=60.0, max_unread_bytes=16 * 2**20)
    sid = post(server.url, "/v1/sessions", {"options": BIG}).json()["session_id"]
    full = len(post(server.url, f"/v1/sessions/{sid}/reset", {"options": {"index": 0}}).content)
    body = json.dumps({"options": {"index": 0}}).encode()
    request = (b"POST /v1/sessions/%s/reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % (sid.encode(), len(body)) + body)  # fmt: skip
    slow = []
    for _ in range(2):
        sock = socket.create_connection(server.server_address[:2])
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        sock.sendall(request)
        slow.append(sock)
        time.sleep(2.0)  # the reply is queued before the next reader asks
    start = time.monotonic()
    first = _received(slow[0], 1.0)
    assert 0 < len(first.partition(b"\r\n\r\n")[2]) < full and time.monotonic() - start < 30  # cut, long before 60 s
    assert server.bounded.unread.cut >= 1
    reply = post(server.url, f"/v1/sessions/{sid}/reset", {"options": {"index": 0}})  # a reader: whole, the last
    assert reply.status_code == 200 and reply.json()["observation"]["frames"]["shape"][0] == 64  # slow one cut instead
    for sock in slow:
        sock.close()
