"""``paravt serve`` is bounded: bodies, images, prompts and the queue have limits, every field is validated and
a bad one is answered 4xx naming it, and 50 clients at once are all answered."""

import base64
import io
import json
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")

from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt.policies.server import PolicyServer, ServeLimits  # noqa: E402


def _png(w, h, mode="RGB") -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new(mode, (w, h)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def served(tiny_qwen3):
    policy = HFPolicy.from_pretrained(tiny_qwen3, temperature=0.0, max_new_tokens=4)
    limits = ServeLimits(max_body_bytes=300_000, max_image_pixels=512 * 512, max_prompt_tokens=512, max_pending=8)
    server = PolicyServer(("127.0.0.1", 0), policy, "tiny", limits)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _chat(content, **extra):
    return {"messages": [{"role": "user", "content": content}], "max_tokens": 3, **extra}


def test_a_valid_request_is_answered(served):
    _, url = served
    r = httpx.post(url + "/v1/chat/completions", json=_chat([{"type": "image_url", "image_url": {"url": _png(64, 48)}},
                                                              {"type": "text", "text": "What?"}]))  # fmt: skip
    assert r.status_code == 200 and isinstance(r.json()["choices"][0]["message"]["content"], str)


@pytest.mark.parametrize(("body", "status", "names"), [
    (b"{not json", 400, "not JSON"),
    (b"\xff\xfe{}", 400, "not UTF-8"),
    (b"[1, 2]", 400, "JSON object, got list"),
    (json.dumps({"messages": "hi"}).encode(), 400, "'messages' must be a non-empty list"),
    (json.dumps({"messages": [{"content": "x"}]}).encode(), 400, "messages[0] must be an object with a 'role'"),
    (json.dumps(_chat({"text": "x"})).encode(), 400, "messages[0].content must be a string or a list"),
    (json.dumps(_chat([{"type": "image_url", "image_url": "data:x"}])).encode(), 400, "image_url must be an object"),
    (json.dumps(_chat([{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}])).encode(), 400, "not valid base64"),
    (json.dumps(_chat([{"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}}])).encode(), 400, "not a readable image"),
    (json.dumps(_chat([{"type": "text", "text": 7}])).encode(), 400, "content[0].text must be a string"),
    (json.dumps(_chat("x", temperature=math.nan)).encode(), 400, "'temperature' must be a number in [0, 2]"),
    (json.dumps(_chat("x", temperature=-1)).encode(), 400, "'temperature' must be a number in [0, 2]"),
    (json.dumps(_chat("x", temperature="hot")).encode(), 400, "'temperature' must be a number"),
    (json.dumps({**_chat("x"), "max_tokens": "10"}).encode(), 400, "'max_tokens' must be an integer"),
    (json.dumps({**_chat("x"), "max_tokens": 0}).encode(), 400, "'max_tokens' must be an integer in [1, "),
    (json.dumps(_chat([{"type": "image_url", "image_url": {"url": _png(2000, 2000, "L")}}])).encode(), 413,
     "2000x2000 pixels, above the limit of 262144"),
    (json.dumps(_chat("word " * 40_000)).encode(), 413, "longer than any prompt of 512 tokens"),
    (json.dumps(_chat("word " * 1_000)).encode(), 413, "above the limit of 512"),
    (b"x" * 400_000, 413, "above the limit of 300000"),
])  # fmt: skip
def test_bad_requests_get_4xx_naming_what_is_wrong(served, body, status, names):
    _, url = served
    r = httpx.post(url + "/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == status and names in r.json()["error"]["message"]


@pytest.mark.parametrize(("body", "names"), [
    ({"text": "x", "image_data": "abc"}, "'image_data' must be a list"),
    ({"text": "x", "sampling_params": [1]}, "'sampling_params' must be an object"),
    ({"text": "x", "sampling_params": {"max_new_tokens": 10**9}}, "'max_new_tokens' must be an integer in [1, 8192]"),
    ({"text": 5}, "'text' (the rendered prompt) is required"),
])  # fmt: skip
def test_generate_fields_are_validated(served, body, names):
    _, url = served
    r = httpx.post(url + "/generate", json=body)
    assert r.status_code == 400 and names in r.json()["error"]["message"]


def test_a_full_queue_answers_503_with_retry_after_and_the_admitted_requests_complete(served):
    server, url = served
    server.work.acquire()  # the model is busy: requests queue
    try:
        with ThreadPoolExecutor(12) as pool:
            futures = [pool.submit(httpx.post, url + "/v1/chat/completions", json=_chat("hi"), timeout=60) for _ in range(12)]
            deadline = time.monotonic() + 30
            while sum(f.done() for f in futures) < 12 - 8 and time.monotonic() < deadline:
                time.sleep(0.05)
            refused = [f.result() for f in futures if f.done()]
            assert len(refused) == 4 and all(r.status_code == 503 and r.headers["retry-after"] == "1" for r in refused)
            server.work.release()
            codes = [f.result(timeout=60).status_code for f in futures]
    finally:
        if server.work.locked():
            server.work.release()
    assert codes.count(200) == 8 and codes.count(503) == 4


def test_fifty_clients_at_once_are_all_answered(served):
    _, url = served
    with ThreadPoolExecutor(50) as pool:
        codes = list(pool.map(lambda _: httpx.post(url + "/v1/chat/completions", json=_chat("hi"), timeout=120).status_code,
                              range(50)))  # fmt: skip
    assert codes.count(200) + codes.count(503) == 50 and codes.count(200) >= 8


def test_the_decoded_pixels_of_one_request_are_bounded_before_decoding(tiny_qwen3, monkeypatch):
    """Every image within its own limit, the count within max_images: the sum is refused (413), on both routes, and no
    image past the bound is decoded (80 one-bit 4096 x 4096 PNGs: 224 KiB sent, 3.8 GB decoded)."""
    import PIL.Image


    policy = HFPolicy.from_pretrained(tiny_qwen3, temperature=0.0, max_new_tokens=4)
    limits = ServeLimits(max_image_pixels=1024 * 1024, max_request_pixels=3 * 1024 * 1024)
    server = PolicyServer(("127.0.0.1", 0), policy, "tiny", limits)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    converted = []
    convert = PIL.Image.Image.convert
    monkeypatch.setattr(PIL.Image.Image, "convert", lambda self, *a, **k: converted.append(self.size) or convert(self, *a, **k))
    try:
        big = _png(1024, 1024, "1")  # one bit a pixel: a few KB on the wire
        r = httpx.post(url + "/v1/chat/completions", json=_chat([{"type": "image_url", "image_url": {"url": big}}] * 5))
        assert r.status_code == 413, r.text
        assert "messages[0].content[3] would bring the request's images to 4194304 pixels, above the limit of 3145728" in r.json()["error"]["message"]
        assert len(converted) == 3  # the fourth was refused from its header, never decoded
        r = httpx.post(url + "/generate", json={"text": "x", "image_data": [big.split(",", 1)[1]] * 4})
        assert r.status_code == 413 and "image_data[3] would bring" in r.json()["error"]["message"]
        r = httpx.post(url + "/v1/chat/completions", json=_chat([{"type": "image_url", "image_url": {"url": _png(64, 48)}}] * 3))
        assert r.status_code == 200
    finally:
        server.shutdown()
        server.server_close()
