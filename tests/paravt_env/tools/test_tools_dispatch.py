"""``paravt_env.tools.dispatch``: one turn's calls, all at once or one per turn, on a real video; sub-agents that
answer, fail, hang or miscount never sink the turn."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from paravt_env.protocol import parse_response
from paravt_env.tools import CropSettings, run_tool_calls
from paravt_env.tools.dispatch import call_with_timeout, subagent_replies
from paravt_env.tools.subagent import SubAgentRequest
from paravt_env.video import Frames, open_video

SETTINGS = CropSettings(fps=1.0, max_frames=4, min_pixels=784, max_pixels=50176)


def calls(*windows):
    text = "".join(f'<tool_call>{{"name": "crop_video", "arguments": {{"start_time": {a}, "end_time": {b}}}}}</tool_call>'
                   for a, b in windows)  # fmt: skip
    return list(parse_response(text).tool_calls)


@pytest.fixture
def video(env_samples):
    sample = env_samples[0]
    reader = open_video(sample.video_path)
    with ThreadPoolExecutor(4) as pool:
        yield sample, reader, pool
    reader.close()


def run(video, windows, **kw):
    sample, reader, pool = video
    return run_tool_calls(calls(*windows), reader=reader, video_path=sample.video_path, settings=SETTINGS, pool=pool, **kw)


def test_parallel_runs_every_call_up_to_the_limit_in_call_order(video):
    report = run(video, [(0, 4), (5, 9), (10, 14), (1, 2)], max_parallel=3)
    assert [r.call_index for r in report.results] == [0, 1, 2, 3]
    assert [r.status for r in report.results] == ["executed", "executed", "executed", "rejected"]
    assert "at most 3 crops" in report.results[3].error
    for r, (a, b) in zip(report.results[:3], [(0, 4), (5, 9), (10, 14)], strict=True):
        assert 1 <= len(r.frames) <= SETTINGS.max_frames
        assert all(a <= t <= b for t in r.frames.timestamps)
    assert report.count("executed") == 3 and report.decode_s > 0 and report.wall_s > 0


def test_sequential_runs_the_first_call_and_says_to_ask_again(video):
    report = run(video, [(0, 4), (5, 9)], mode="sequential")
    assert [r.status for r in report.results] == ["executed", "rejected"]
    assert "sequential dispatch runs one crop per turn" in report.results[1].error


def test_an_invalid_call_is_rejected_with_its_reason_and_the_others_run(video):
    report = run(video, [(9, 3), (0, 4)])
    assert [r.status for r in report.results] == ["rejected", "executed"]
    assert report.results[0].error and report.results[0].request is None


def test_a_batch_subagent_summarises_every_executed_crop_in_one_call(video):
    seen = []

    class Batch:
        def batch(self, requests):
            seen.append([(r.start, r.end, len(r.frames)) for r in requests])
            return [f"<tool_response>crop {r.start:g}-{r.end:g}</tool_response>" for r in requests]

    report = run(video, [(0, 4), (9, 3), (5, 9)], tool_result="subagent", subagent=Batch(), question="What?")
    assert len(seen) == 1 and [w[:2] for w in seen[0]] == [(0, 4), (5, 9)] and all(n > 0 for _, _, n in seen[0])
    assert [r.summary for r in report.results] == ["crop 0-4", None, "crop 5-9"]  # tags stripped: the env writes them


def test_one_failing_subagent_fails_its_crop_only(video):
    def subagent(request):
        if request.start == 5:
            raise RuntimeError("server down")
        return "a red circle"

    report = run(video, [(0, 4), (5, 9)], tool_result="subagent", subagent=subagent)
    assert [r.status for r in report.results] == ["executed", "failed"]
    assert report.results[0].summary == "a red circle" and "server down" in report.results[1].error


def test_a_hung_subagent_costs_its_timeout_not_the_rollout(video):
    release = threading.Event()
    t0 = time.perf_counter()
    report = run(video, [(0, 4)], tool_result="subagent", subagent=lambda r: release.wait(30) and "late",
                 subagent_timeout=0.3)  # fmt: skip
    release.set()
    assert time.perf_counter() - t0 < 10
    assert report.results[0].status == "failed" and "no reply within 0.3 s" in report.results[0].error


def test_a_batch_with_the_wrong_number_of_replies_fails_every_crop():
    class Short:
        def batch(self, requests):
            return ["one"]

    requests = [SubAgentRequest("q", 0, 1, Frames.empty()), SubAgentRequest("q", 1, 2, Frames.empty())]
    replies = subagent_replies(Short(), requests, timeout=None)
    assert [reply for reply, _, _ in replies] == [None, None]
    assert all("returned 1 summaries for 2 crops" in str(error) for _, error, _ in replies)


def test_call_with_timeout_returns_and_reraises():
    assert call_with_timeout(lambda: 7, 1.0) == 7
    with pytest.raises(KeyError):
        call_with_timeout(lambda: {}["x"], 1.0)


@pytest.mark.parametrize(("kw", "match"), [({"mode": "sideways"}, "dispatch"), ({"tool_result": "pixels"}, "tool_result"),
                                            ({"tool_result": "subagent"}, "sub-agent")])  # fmt: skip
def test_bad_modes_are_value_errors_that_name_them(video, kw, match):
    with pytest.raises(ValueError, match=match):
        run(video, [(0, 4)], **kw)
