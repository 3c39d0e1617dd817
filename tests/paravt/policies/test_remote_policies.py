"""OpenAIPolicy and SGLangPolicy against a real local server process (``paravt serve``) serving the tiny model."""

import re
import subprocess
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt.policies.remote import OpenAIPolicy, ServerError, SGLangPolicy  # noqa: E402
from paravt_env.messages import Message  # noqa: E402


@pytest.fixture(scope="module")
def server(tiny_qwen3):
    proc = subprocess.Popen(
        [sys.executable, "-m", "paravt", "serve", "--model", str(tiny_qwen3), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    deadline = time.time() + 120
    url = None
    while time.time() < deadline and url is None:
        line = proc.stdout.readline()
        m = re.search(r"listening on (http://\S+)", line or "")
        url = m.group(1) if m else None
        if not line and proc.poll() is not None:
            break
    if url is None:
        proc.kill()
        pytest.fail("paravt serve did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=20)


def _conversation():
    frames = [np.random.default_rng(i).integers(0, 255, (96, 128, 3), dtype=np.uint8) for i in range(2)]
    return [Message("system", "You are a video analyst."), Message("user", "<0.0 seconds><image>\n<1.0 seconds><image>\nWhat?", frames)]


def test_openai_client_matches_local_greedy_generation(server, tiny_qwen3):
    local = HFPolicy.from_pretrained(tiny_qwen3, temperature=0.0, max_new_tokens=10)
    convs = [_conversation(), [Message("user", "No frames, just text.")]]
    remote = OpenAIPolicy(server + "/v1", max_new_tokens=10).generate(convs)
    assert [g.text for g in remote] == [g.text for g in local.generate(convs)]


def test_sglang_client_returns_ids_and_logprobs(server, tiny_qwen3):
    local = HFPolicy.from_pretrained(tiny_qwen3, temperature=0.0, max_new_tokens=10)
    [ref] = local.generate([_conversation()])
    [gen] = SGLangPolicy(server, local.tokenizer, max_new_tokens=10, temperature=0.0).generate([_conversation()])
    assert gen.token_ids == ref.token_ids
    assert np.allclose(gen.logprobs, ref.logprobs, atol=1e-4)


def test_errors_name_the_server_and_its_answer(server):
    with pytest.raises(ServerError, match=r"127\.0\.0\.1:9/v1/chat/completions failed after 2 attempts"):
        OpenAIPolicy("http://127.0.0.1:9/v1", retries=1, backoff=0.01).generate([_conversation()])
    bad = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}]}]
    from paravt.policies.remote import post_json

    with pytest.raises(ServerError, match="only data: URLs"):
        post_json(server + "/v1/chat/completions", {"messages": bad}, timeout=30, retries=0, backoff=0)
