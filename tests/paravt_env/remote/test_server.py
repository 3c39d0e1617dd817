"""``EnvServer`` over plain HTTP: routes, limits, concurrency and every refusal a 4xx that names its cause."""

import json
import socket
import threading
import time

import httpx
import pytest


def post(url, path, body, **kw):
    return httpx.post(url + path, json=body, timeout=60, **kw)


def open_session(url, **options):
    r = post(url, "/v1/sessions", {"options": options})
    assert r.status_code == 201, r.text
    return r.json()["session_id"]


def test_health_and_samples(env_server, env_samples):
    h = httpx.get(env_server.url + "/health").json()
    assert h["status"] == "ok" and h["samples"] == len(env_samples) and h["sessions"] == 0
    listed = httpx.get(env_server.url + "/v1/samples").json()["samples"]
    assert [s["id"] for s in listed] == [s.id for s in env_samples]


def test_a_whole_episode_over_plain_json(env_server, env_samples):
    sid = open_session(env_server.url, frame_budget=4)
    r = post(env_server.url, f"/v1/sessions/{sid}/reset", {"seed": 0, "options": {"index": 2}}).json()
    assert r["info"]["sample_id"] == env_samples[2].id and len(r["observation"]["timestamps"]) == 4
    assert "/" not in r["sample"]["video_path"]  # the server's paths stay on the server
    r = post(env_server.url, f"/v1/sessions/{sid}/step", {"action": "<answer>A</answer>"}).json()
    assert r["terminated"] is True and set(r["info"]["reward_breakdown"]) >= {"accuracy", "format", "tool", "total"}
    assert httpx.delete(env_server.url + f"/v1/sessions/{sid}").status_code == 200
    assert httpx.get(env_server.url + "/health").json()["sessions"] == 0


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        ("/v1/sessions", {"options": {"samples": "/etc"}}, 400, "owns its data"),
        ("/v1/sessions", {"options": {"video_root": "/"}}, 400, "owns its data"),
        ("/v1/sessions", {"options": {"tool_result": "subagent"}}, 400, "sub-agent"),
        ("/v1/sessions", {"options": {"frame_budgt": 3}}, 400, "frame_budgt"),
        ("/v1/sessions", {"options": {"max_turns": 0}}, 400, "max_turns"),
        ("/v1/sessions", {"frame_encoding": "jpeg"}, 400, "frame_encoding"),
        ("/v1/sessions", {"colour": 1}, 400, "colour"),
        ("/v1/sessions", {"options": []}, 400, "options"),
        ("/v1/nowhere", {}, 404, "no route"),
    ],
)
def test_bad_requests_are_named(env_server, path, body, status, words):
    r = post(env_server.url, path, body)
    assert r.status_code == status and words in r.json()["error"]["message"], r.text


def test_bad_resets_and_steps(env_server):
    url, sid = env_server.url, open_session(env_server.url, frame_budget=4)
    cases = [
        ("reset", {"options": {"sample": {"video_path": "/etc/passwd"}}}, 400, "server file"),
        ("reset", {"options": {"sample_id": "nope"}}, 400, "no sample with id"),
        ("reset", {"options": {"index": 99}}, 400, "outside"),
        ("reset", {"options": {"index": "0"}}, 400, "integer"),
        ("reset", {"seed": -1}, 400, "seed"),
        ("reset", {"options": {"colour": 1}}, 400, "colour"),
        ("step", {"action": "<answer>A</answer>"}, 409, "reset"),  # no episode yet
        ("step", {}, 400, "action"),
        ("step", {"action": 5}, 400, "string"),
    ]
    for route, body, status, words in cases:
        r = post(url, f"/v1/sessions/{sid}/{route}", body)
        assert r.status_code == status and words in r.json()["error"]["message"], (route, body, r.text)
    r = post(url, "/v1/sessions/0123/step", {"action": "x"})
    assert r.status_code == 404 and "no session" in r.json()["error"]["message"]
    r = httpx.put(url + f"/v1/sessions/{sid}/step", json={"action": "x"})
    assert r.status_code == 405


def test_body_limits(env_samples, start_env_server):
    server = start_env_server(env_samples, max_body_bytes=4096)
    sid = open_session(server.url, frame_budget=4)
    post(server.url, f"/v1/sessions/{sid}/reset", {"options": {"index": 0}})
    r = post(server.url, f"/v1/sessions/{sid}/step", {"action": "x" * 5000})
    assert r.status_code == 413 and "4096" in r.json()["error"]["message"]
    for raw, words in ((b"{not json", "not JSON"), (b"[1, 2]", "object"), (b"\xff\xfe", "UTF-8")):
        r = httpx.post(server.url + f"/v1/sessions/{sid}/step", content=raw)
        assert r.status_code == 400 and words in r.json()["error"]["message"]
    # no Content-Length: refused without waiting for a body (raw socket: httpx always sends one)
    host, port = server.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(f"POST /v1/sessions/{sid}/step HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert s.recv(200).split(b"\r\n")[0].endswith(b"411 Length Required")


def test_session_limit_and_idle_expiry(env_samples, start_env_server):
    server = start_env_server(env_samples, max_sessions=2, idle_timeout_s=0.5)
    a, _b = open_session(server.url), open_session(server.url)
    r = post(server.url, "/v1/sessions", {})
    assert r.status_code == 503 and r.headers["Retry-After"] and "2 sessions" in r.json()["error"]["message"]
    time.sleep(1.0)  # the reaper (every idle_timeout / 4) closes both
    assert httpx.get(server.url + "/health").json()["sessions"] == 0
    r = post(server.url, f"/v1/sessions/{a}/reset", {})
    assert r.status_code == 410 and "idle" in r.json()["error"]["message"]
    open_session(server.url)  # room again


def test_a_busy_session_answers_409(env_server):
    sid = open_session(env_server.url, frame_budget=4)
    session = env_server.sessions[sid]
    with session.lock:  # as if another request were running on it
        r = post(env_server.url, f"/v1/sessions/{sid}/reset", {})
    assert r.status_code == 409 and "busy" in r.json()["error"]["message"]


def test_many_concurrent_sessions(env_server, env_samples):
    """16 clients in threads, each its own session, each playing episodes: no cross-talk."""
    errors, rewards = [], {}

    def client(k):
        try:
            with httpx.Client(base_url=env_server.url, timeout=120) as c:
                sid = c.post("/v1/sessions", json={"options": {"frame_budget": 4}}).json()["session_id"]
                for rep in range(2):
                    i = (k + rep) % len(env_samples)
                    obs = c.post(f"/v1/sessions/{sid}/reset", json={"options": {"index": i}}).json()
                    assert obs["info"]["sample_id"] == env_samples[i].id
                    out = c.post(f"/v1/sessions/{sid}/step", json={"action": f"<answer>{env_samples[i].answer}</answer>"}).json()
                    rewards[(k, rep)] = out["info"]["reward_breakdown"]["accuracy"]
                c.delete(f"/v1/sessions/{sid}")
        except Exception as exc:  # collected: an assertion in a thread would be lost
            errors.append(repr(exc))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(rewards) == 32 and all(v == 1.0 for v in rewards.values())
    assert json.loads(httpx.get(env_server.url + "/health").text)["sessions"] == 0


def test_a_retried_step_gets_its_reply_again_not_a_second_turn(env_server):
    """A client whose connection failed after its step was played asks again with the same ``turn``: the server
    answers with that turn's reply; a turn from elsewhere in the episode is a 409 naming both."""
    url, sid = env_server.url, open_session(env_server.url, frame_budget=4, max_turns=3)
    post(url, f"/v1/sessions/{sid}/reset", {"options": {"index": 0}})
    crop = '<tool_call>{"name": "crop_video", "arguments": {"start_time": 0, "end_time": 5}}</tool_call>'
    first = post(url, f"/v1/sessions/{sid}/step", {"action": crop, "turn": 0})
    again = post(url, f"/v1/sessions/{sid}/step", {"action": crop, "turn": 0})
    assert first.status_code == again.status_code == 200 and first.json() == again.json()
    r = post(url, f"/v1/sessions/{sid}/step", {"action": crop, "turn": 5})
    assert r.status_code == 409 and "step 'turn' 5, but this episode has played 1 turn(s)" in r.json()["error"]["message"]
    second = post(url, f"/v1/sessions/{sid}/step", {"action": "<answer>A</answer>", "turn": 1})
    assert second.status_code == 200 and second.json()["info"]["turn"] == 2  # one crop turn, then the answer
    r = post(url, f"/v1/sessions/{sid}/step", {"action": "x", "turn": "1"})
    assert r.status_code == 400  # strict: not coerced


def test_the_remote_env_retries_a_step_whose_reply_was_lost(env_samples, start_env_server, monkeypatch):
    """``RemoteVideoToolEnv`` sends its turn; when the connection fails after the server played the step, its
    retry gets the same observation and the episode has played the turn once."""
    import httpx as _httpx

    from paravt_env.remote import RemoteVideoToolEnv

    server = start_env_server(env_samples)
    env = RemoteVideoToolEnv(server.url, frame_budget=4, max_turns=3)
    env.reset(options={"index": 0})
    stream = env._http.stream
    failures = []

    def lose_first_step_reply(method, path, **kw):
        if path.endswith("/step") and not failures:
            failures.append(path)
            with stream(method, path, **kw) as r:  # the server plays the turn...
                r.read()
            raise _httpx.ReadError("connection reset")  # ...and the reply is lost on the way
        return stream(method, path, **kw)

    monkeypatch.setattr(env._http, "stream", lose_first_step_reply)
    crop = '<tool_call>{"name": "crop_video", "arguments": {"start_time": 0, "end_time": 5}}</tool_call>'
    obs, reward, terminated, truncated, info = env.step(crop)
    assert failures and info["turn"] == 1 and not terminated  # played once, not twice
    *_, info = env.step("<answer>A</answer>")
    assert info["turn"] == 2
    env.close()


def test_a_step_whose_client_left_is_played_at_most_once(env_server):
    """The client sends its answer and leaves before any reply. Whether the server noticed in time (then it did not
    play it) or played it (then it kept the reply), the client's retry with the same turn gets one answered episode:
    the answer counted once, never as a second turn."""
    url, sid = env_server.url, open_session(env_server.url, frame_budget=4, max_turns=3)
    post(url, f"/v1/sessions/{sid}/reset", {"options": {"index": 0}})
    body = json.dumps({"action": "<answer>A</answer>", "turn": 0}).encode()
    sock = socket.create_connection(env_server.server_address[:2])
    sock.sendall(b"POST /v1/sessions/%s/step HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % (sid.encode(), len(body)) + body)  # fmt: skip
    sock.close()  # gone before any reply
    time.sleep(1.0)
    retry = post(url, f"/v1/sessions/{sid}/step", {"action": "<answer>A</answer>", "turn": 0})
    assert retry.status_code == 200 and retry.json()["terminated"] and retry.json()["info"]["turn"] == 1
    again = post(url, f"/v1/sessions/{sid}/step", {"action": "<answer>A</answer>", "turn": 0})
    assert again.json() == retry.json()  # the same reply, however often asked
