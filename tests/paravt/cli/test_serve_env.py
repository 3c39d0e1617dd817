"""``paravt serve-env`` as a real process, driven with the standard library's urllib (what docs/env-server.md shows)."""

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest


def call(url, method="GET", body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture
def served(synth_small):
    proc = subprocess.Popen([sys.executable, "-m", "paravt", "serve-env", "--data", str(synth_small[0]), "--port", "0",
                             "--max-sessions", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    line = proc.stdout.readline()
    m = re.search(r"at (http://\S+)", line)
    if not m:
        proc.kill()
        pytest.fail(f"paravt serve-env did not start: {line!r} {proc.stderr.read()}")
    yield m.group(1)
    proc.terminate()
    proc.wait(timeout=20)


def test_an_episode_over_plain_http(served, synth_small):
    env_samples = synth_small[1]
    assert call(served + "/health")[1]["samples"] == len(env_samples)
    status, opened = call(served + "/v1/sessions", "POST", {"options": {"frame_budget": 8, "max_parallel": 2}})
    assert status == 201 and opened["config"]["max_parallel"] == 2
    sid = opened["session_id"]
    status, out = call(f"{served}/v1/sessions/{sid}/reset", "POST", {"seed": 0, "options": {"sample_id": env_samples[1].id}})
    assert status == 200 and out["observation"]["frames"]["shape"][0] == 8 and out["observation"]["text"].count("<image>") == 8
    turn = "".join(f'<tool_call>{{"name": "crop_video", "arguments": {{"start_time": {s}, "end_time": {s + 8}}}}}</tool_call>'
                   for s in (0, 10, 20))  # fmt: skip
    status, out = call(f"{served}/v1/sessions/{sid}/step", "POST", {"action": turn})
    assert status == 200 and out["info"]["tool_calls"] == {"requested": 3, "executed": 2, "rejected": 1, "failed": 0}
    assert len(out["observation"]["timestamps"]) == out["observation"]["frames"]["shape"][0] > 0
    status, out = call(f"{served}/v1/sessions/{sid}/step", "POST", {"action": "<answer>A</answer>"})
    assert status == 200 and out["terminated"] and "total" in out["info"]["reward_breakdown"]
    assert call(f"{served}/v1/sessions/{sid}", "DELETE")[0] == 200
    assert call(f"{served}/v1/sessions/{sid}/step", "POST", {"action": "x"})[0] == 404


def test_bad_command_lines_are_one_line_errors(tmp_path):
    for argv, words in ((["--data", str(tmp_path / "missing")], "missing"), (["--data", str(tmp_path), "--port", "70000"], "--port"),
                        (["--data", str(tmp_path), "--max-sessions", "0"], "max_sessions")):  # fmt: skip
        r = subprocess.run([sys.executable, "-m", "paravt", "serve-env", *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and "Traceback" not in r.stderr and words in r.stderr, (argv, r.stderr)
        time.sleep(0)


def test_the_readme_client_runs_as_written(served, capsys):
    """The docs' standard-library client, against a real server (its URL swapped in)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "env-server.md").read_text()
    block = re.search(r"## A client in a few lines of standard library\n.*?```python\n(.*?)```", text, re.S).group(1)
    assert "http://127.0.0.1:8100" in block
    exec(block.replace("http://127.0.0.1:8100", served), {})
    assert "'total'" in capsys.readouterr().out
