"""``paravt eval --protocol release --policy openai:URL#MODEL`` against a scripted model over HTTP: every
request, as the released driver (``paravt/eval/driver.py::eval_one``) sends it, written out by hand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from scripted_openai import ScriptedModel, summarize_request

from paravt.cli import main as cli
from paravt_env.data.index_video import make_index_video
from paravt_env.protocol.release import release_system_prompt

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "data"
REPLIES = [
    '<think>two windows</think>\n<tool_call>\n{"name": "crop_video", "arguments": {"video_path": "x.mp4", '
    '"start_time": 1.0, "end_time": 3.5}}\n</tool_call>\n'
    '<tool_call>{"name": "crop_video", "arguments": {"start_time": "0:02", "end_time": 6}}</tool_call>',
    '<think>more</think><tool_call>{"name": "crop_video", "arguments": {"start_time": 5, "end_time": 5}}</tool_call>'
    "<tool_code>crop_video(start_time=2, end_time=4.25)</tool_code><answer>B</answer>",
    '<tool_call>{"name": "crop_video", "arguments": {"start": 7}}</tool_call>',
    "The answer is C. It happens in 3.1 - 4.7 seconds.",
]


def images(indices, h=84, w=140):
    return [("image", "jpeg", h, w, int(i)) for i in indices]


def crop(indices, start, end):
    return ("user", [*images(indices), ("text", f"<tool_response>\n{len(indices)} frames from {start}s to {end}s.\n</tool_response>")])


@pytest.fixture(scope="module")
def index_video(tmp_path_factory):
    return make_index_video(tmp_path_factory.mktemp("rel") / "index.mp4", 150, fps=10, size=(96, 128))


def test_every_request_and_score_as_the_release_driver(tmp_path, index_video):
    root = tmp_path / "videomme"
    root.mkdir()
    rows = json.loads((FIXTURES / "videomme" / "videomme_test_rows.json").read_text())[:1]
    (root / "rows.json").write_text(json.dumps(rows))
    (root / "data").mkdir()
    shutil.copy(index_video, root / "data" / "aaaaaaaaaa1.mp4")
    with ScriptedModel(REPLIES, name="paravt-8b") as model:
        rc = cli(["eval", "--protocol", "release", "--policy", f"openai:{model.url}#paravt-8b", "--data",
                  str(root / "rows.json"), "--out", str(tmp_path / "out"), "--no-progress"])  # fmt: skip
        got = [summarize_request(r) for r in model.requests]
    assert rc == 0
    overview = images(np.round(np.linspace(0, 149, 64)), 280, 392)
    question = (
        "Question: How many candles are lit at the start of the video?\nOptions:\nA. A. One.\nB. B. Two.\n"
        "C. C. Three.\nD. D. Four.\nAnswer with the option letter only. The video path for this video is: "
        "aaaaaaaaaa1.mp4"
    )
    conversation = [("system", release_system_prompt("agentic_general")), ("user", [*overview, ("text", question)])]
    rounds = [
        [crop([10, 35], "1.0", "3.5"), crop([20, 33, 47, 60], "2.0", "6.0")],
        [("user", "<tool_response>\n[Error cropping 5.0s-5.0s]\n</tool_response>"), crop([20, 42], "2.0", "4.2")],
        [crop(np.round(np.linspace(70, 149, 8)), "7.0", "17.0"),
         ("user", "Based on the video and cropped segments above, answer with ONLY the letter.")],
    ]  # fmt: skip
    expected = [{"messages": list(conversation), "max_tokens": 2048, "temperature": 0.0, "model": "paravt-8b"}]
    for reply, messages in zip(REPLIES, rounds, strict=False):
        conversation += [("assistant", reply), *messages]
        expected.append({**expected[0], "messages": list(conversation)})
    expected[-1]["max_tokens"] = 64  # the forced final answer's own cap
    assert len(got) == len(expected) == 4
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g == e, f"request {i} differs"
    [row] = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert (row["score"], row["prediction"], row["answer"], row["tool_calls"]) == (1.0, "C", "C", 5)
    assert row["extra"]["release_id"] == "aaaaaaaaaa1"  # the id the release's driver gives the row
    config = json.loads((tmp_path / "out" / "eval_config.json").read_text())
    assert config["protocol"] == "release" and config["prompt_mode"] == "agentic_general"


def charades_root(tmp_path: Path, video: Path) -> Path:
    """One Charades-STA row (ground truth 3.0-5.0 s) laid out as the release reads it."""
    root = tmp_path / "charades"
    (root / "Charades_v1_480").mkdir(parents=True)
    rows = [{"video": "3MSZA.mp4", "caption": "person turn a light on.", "timestamp": [3.0, 5.0]}]
    (root / "rows.json").write_text(json.dumps(rows))
    shutil.copy(video, root / "Charades_v1_480" / "3MSZA.mp4")
    return root


def test_charades_grounding_is_scored_by_iou_with_the_release_extractor(tmp_path, index_video):
    root = charades_root(tmp_path, index_video)
    with ScriptedModel(["The event happens in the 3.1 - 4.7 seconds."]) as model:
        rc = cli(["eval", "--protocol", "release", "--prompt-mode", "agentic_minimal", "--policy", f"openai:{model.url}",
                  "--data", str(root / "rows.json"), "--out", str(tmp_path / "out"), "--no-progress"])  # fmt: skip
        [request] = model.requests
    assert rc == 0 and request["messages"][0]["content"] == release_system_prompt("agentic_minimal")
    [row] = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert row["score"] == pytest.approx(1.6 / 2.0) and row["prediction"] == "3.1-4.7"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["grounding"]["mIoU"] == pytest.approx(0.8)


def test_video_url_channel_sends_the_file_for_the_server_to_sample(tmp_path, index_video):
    root = charades_root(tmp_path, index_video)
    with ScriptedModel([REPLIES[0], "3.1 - 4.7"]) as model:
        rc = cli(["eval", "--protocol", "release", "--prompt-mode", "agentic_minimal", "--video-channel", "video_url",
                  "--policy", f"openai:{model.url}", "--data", str(root / "rows.json"), "--out", str(tmp_path / "out"),
                  "--no-progress", "--max-turns", "1"])  # fmt: skip
        first, second = [summarize_request(r) for r in model.requests]
    assert rc == 0
    (role, content) = first["messages"][1]
    url = f"file://{(root / 'Charades_v1_480' / '3MSZA.mp4').resolve()}"
    assert role == "user" and content[0] == ("video", url) and content[1][0] == "text" and len(content) == 2
    assert content[1][1].endswith("The video path for this video is: 3MSZA.mp4")
    # crops still come back as images, then the grounding force message with its 128-token cap
    assert second["messages"][3][1][0][:2] == ("image", "jpeg") and second["max_tokens"] == 128
    assert second["messages"][-1] == ("user", "Based on the video and any cropped segments, provide your final answer "
                                      "about when the event happens. Use the format: 'The event happens in the X.X - "
                                      "Y.Y seconds.'")  # fmt: skip


def test_video_url_needs_a_server_that_samples_videos(tmp_path, index_video, tiny_qwen3, capsys):
    (tmp_path / "rows.json").write_text(json.dumps([{"video": str(index_video), "caption": "x", "timestamp": [1, 2]}]))
    rc = cli(["eval", "--protocol", "release", "--video-channel", "video_url", "--policy", f"hf:{tiny_qwen3}",
              "--data", str(tmp_path / "rows.json"), "--out", str(tmp_path / "out"), "--no-progress"])  # fmt: skip
    assert rc == 1  # recorded as an error row, not a crash; nothing was scored, so the command fails
    [row] = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert "needs a server that samples videos itself" in row["error"]
    assert cli(["eval", "--video-channel", "video_url", "--policy", "no_tool", "--data", str(tmp_path / "rows.json"),
                "--out", str(tmp_path / "o2")]) == 1  # fmt: skip
    assert "release-protocol option" in capsys.readouterr().err
