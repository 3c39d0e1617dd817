"""``protocol="release"``: the requests the released eval driver sends, for fixture samples of every benchmark.

The expected strings are written by hand from the release's ``paravt/eval/driver.py`` and ``utils.py``
(``load_samples``, ``eval_one``), including its quirks (Video-MME options lettered twice, MMVU open-ended rows
as multiple choice, the ``direct`` mode's instruction that mentions a tool it does not offer).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from paravt_env import EnvConfig, VideoQASample, VideoToolEnv, load_samples
from paravt_env.data.index_video import decode_index, make_index_video
from paravt_env.protocol.release import release_calls, release_system_prompt, release_time
from paravt_env.rewards.release_scores import release_letter, release_score, release_span
from paravt_env.video import open_video
from paravt_env.video.qwen_frames import linspace_indices, qwen_frames, release_crop, release_overview

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"
N_FRAMES, FPS = 150, 10  # a 15 s index video, 96 x 128
LETTER = "Answer with the option letter only."
PATH_LINE = " The video path for this video is: "


@pytest.fixture(scope="module")
def index_video(tmp_path_factory):
    return make_index_video(tmp_path_factory.mktemp("rel") / "index.mp4", N_FRAMES, fps=FPS, size=(96, 128))


def place(video: Path, root: Path, *names: str) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(video, root / name)


def own_sample(video: Path) -> VideoQASample:
    return VideoQASample("own-1", str(video), "What colour is the star?", "C", "mcq", ["red", "blue", "green", "cyan"])


def opening(sample, mode="agentic_general", **kw):
    env = VideoToolEnv([sample], EnvConfig(protocol="release", prompt_mode=mode, **kw))
    try:
        obs, info = env.reset(options={"sample": sample})
    finally:
        env.close()
    return obs, info


def user_text(info) -> str:
    return info["messages"][1]["text"].replace("<image>", "")


# --- question texts, benchmark by benchmark ----------------------------------------------------------------
def test_videomme_letters_options_twice_and_subtitles(tmp_path, index_video):
    root = tmp_path / "videomme"
    shutil.copytree(FIXTURES / "videomme", root)
    place(index_video, root, "data/aaaaaaaaaa1.mp4")
    (root / "subtitle").mkdir()
    (root / "subtitle" / "aaaaaaaaaa1.srt").write_text(
        "1\n00:00:00,000 --> 00:00:02,000\n<i>Hello</i> there\n\n2\n00:00:02,500 --> 00:00:04,000\nsecond\n  line  \n"
    )
    with pytest.warns(UserWarning, match="skipped 2 of 4"):  # only one of the fixture's videos is made
        [s, _] = load_samples(root / "videomme_test_rows.json")
    body = (
        "Question: How many candles are lit at the start of the video?\nOptions:\n"
        "A. A. One.\nB. B. Two.\nC. C. Three.\nD. D. Four.\n"
    )
    _, info = opening(s)
    assert user_text(info) == body + LETTER + PATH_LINE + "aaaaaaaaaa1.mp4"
    _, info = opening(s, subtitles=True)
    subs = "This video's subtitles are listed below:\nHello there\nsecond\nline\n\n"
    assert user_text(info) == subs + body + LETTER + PATH_LINE + "aaaaaaaaaa1.mp4"
    _, info = opening(s, mode="direct")
    direct = ("Think step by step, use crop_video if needed, then provide your answer in <answer>X</answer> tags "
              "where X is the option letter.")  # fmt: skip
    assert user_text(info) == body + direct  # no video path outside the agentic modes
    assert info["messages"][0] == {"role": "system", "text": release_system_prompt("direct"), "frames": 0, "parts": False}


def test_longvideobench_lvbench_mlvu_mmvu_texts(tmp_path, index_video):
    root = tmp_path / "data"
    shutil.copytree(FIXTURES, root)
    place(index_video, root / "longvideobench", "videos/86CxyhFV9MI.mp4", "videos/Xb1kd9QwLqE.mp4")
    lvb = load_samples(root / "longvideobench" / "lvb_validation_rows.json")
    _, info = opening(lvb[0])
    assert user_text(info) == (
        "Question: In the video, which subtitles appear at the same time as the man in the blue shirt?\nOptions:\n"
        "A. the show is over\nB. that is a good question\nC. run the command again\nD. in the corner\n"
        + LETTER + PATH_LINE + "86CxyhFV9MI.mp4"
    )
    assert lvb[0].extra["release"]["answer"] == "C" and lvb[1].extra["release"]["answer"] == "E"

    place(index_video, root / "lvbench", "videos/k9Qm2LxV0aA.mp4")
    [lv] = load_samples(root / "lvbench" / "lvbench_lmms_rows.json")[:1]
    _, info = opening(lv, mode="agentic_minimal")
    assert user_text(info) == (
        "What does the fox carry?\n(A) a lantern\n(B) a basket\n(C) a key\n(D) a map\n" + LETTER + PATH_LINE
        + "k9Qm2LxV0aA.mp4"
    )  # fmt: skip
    assert lv.extra["release"]["answer"] == "(C)"  # compared as stored: a reply "C" never matches it

    place(index_video, root / "mlvu", "needle_32.mp4")
    [ml] = load_samples(root / "mlvu" / "mlvu_dev_lmms_rows.json")
    _, info = opening(ml)
    assert user_text(info) == (
        "Question: What does the hand do in the inserted clip?\n(A) Delivers a product\n(B) Shakes the woman's hand\n"
        "(C) Takes the credit card\n(D) Points at the screen\n\nOptions:\nA. Delivers a product\n"
        "B. Shakes the woman's hand\nC. Takes the credit card\nD. Points at the screen\n" + LETTER + PATH_LINE
        + "needle_32.mp4"
    )  # fmt: skip
    assert ml.extra["release"]["answer"] == "?"  # a letter answer matches no candidate text

    place(index_video, root / "mmvu", "videos/Art/0.mp4", "videos/Chemistry/0.mp4")
    oe, mc = load_samples(root / "mmvu" / "validation.json")
    _, info = opening(oe)
    assert user_text(info) == (
        "Question: Which cinematic shooting technique is shown in the video?\nOptions:\n\n" + LETTER + PATH_LINE + "0.mp4"
    )
    assert oe.question_type == "oe" and oe.extra["release"]["is_mcq"] and oe.extra["release"]["answer"] == "Dolly Zoom"
    _, info = opening(mc)
    assert user_text(info).startswith(
        "Question: How many grams of precipitate are produced approximately?\nOptions:\nA. 10.0\nB. 5.0\nC. 12.0\n"
    )


def test_charades_text_and_raw_span(tmp_path, index_video):
    root = tmp_path / "charades"
    root.mkdir()
    rows = [{"video": "3MSZA.mp4", "caption": "person turn a light on.", "timestamp": [24.296875, 30.40625]}]
    (root / "rows.json").write_text(json.dumps(rows))
    place(index_video, root, "Charades_v1_480/3MSZA.mp4")
    [s] = load_samples(root / "rows.json")
    _, info = opening(s, mode="agentic_minimal")
    assert user_text(info) == (
        "Please find the visual event described by a sentence in the video, determining its starting and ending times. "
        "The format should be: 'The event happens in the start time - end time'. For example, The event 'person turn "
        "a light on' happens in the 24.3 - 30.4 seconds. Now I will give you the textual sentence: \"person turn a light "
        "on.\". Please return its start time and end time. The video path for this video is: 3MSZA.mp4"
    )
    assert s.answer == "[24.3, 30.4]" and s.extra["release"]["span"] == [24.296875, 30.40625]


# --- frames ------------------------------------------------------------------------------------------------
def test_overview_frames_are_qwen_vl_utils_indices_at_the_default_video_budget(index_video):
    s = own_sample(index_video)
    obs, info = opening(s)
    assert obs["frames"].shape == (64, 280, 392, 3)  # 96 x 128 grows to the 128-token minimum
    want = np.round(np.linspace(0, N_FRAMES - 1, 64)).astype(int)
    assert [decode_index(f) for f in obs["frames"]] == list(want)
    assert info["messages"][1]["text"].startswith("<image>" * 64 + "Question: ")
    assert info["messages"][1]["frames"] == 64 and info["messages"][1]["parts"]


def test_a_video_shorter_than_the_overview_gets_no_frame(tmp_path):
    short = make_index_video(tmp_path / "short.mp4", 40, fps=FPS, size=(96, 128))
    with open_video(short) as reader:
        assert len(release_overview(reader, 64)) == 0  # qwen-vl-utils refuses; the driver sends the text alone
        assert len(release_overview(reader, 40)) == 40


def test_linspace_matches_torch():
    torch = pytest.importorskip("torch")
    for first, last, n in [(0, 149, 64), (0, 299, 64), (13, 47, 16), (0, 8999, 64), (7, 9, 2), (0, 5, 6), (101, 256, 14)]:
        want = torch.linspace(first, last, n).round().long().tolist()
        assert linspace_indices(first, last, n).tolist() == want, (first, last, n)


def test_frames_match_qwen_vl_utils_fetch_video(tvshim_on_path, index_video, monkeypatch):
    monkeypatch.setenv("FORCE_QWENVL_VIDEO_READER", "decord")
    qwen = pytest.importorskip("qwen_vl_utils.vision_process")
    monkeypatch.setattr(qwen, "FORCE_QWENVL_VIDEO_READER", "decord")
    qwen.get_video_reader_backend.cache_clear()
    requests = [{"nframes": 64}, {"nframes": 32}]
    for st, et in [(1.0, 3.5), (2.0, 6.0), (0.0, 15.0), (12.34, 40.0), (-3.0, 1.0), (3.3, 3.45), (5.0, 5.04), (9.0, 4.0)]:
        requests.append({"fps": 1, "min_frames": 1, "max_frames": 16, "min_pixels": 784, "max_pixels": 50176,
                         "video_start": st, "video_end": et})  # fmt: skip
    with open_video(index_video) as reader:
        for req in requests:
            args = {k: req.get(k) for k in ("nframes", "fps", "min_frames", "max_frames", "min_pixels", "max_pixels")}
            ours = None
            with contextlib.suppress(ValueError):
                ours = qwen_frames(reader, **args, start=req.get("video_start"), end=req.get("video_end"))
            try:
                video, meta = qwen.fetch_video({"type": "video", "video": str(index_video), **req},
                                               return_video_metadata=True)  # fmt: skip
            except Exception:  # noqa: BLE001 - qwen-vl-utils refused: so must we
                assert ours is None, req
                if "video_start" in req:
                    assert len(release_crop(reader, req["video_start"], req["video_end"])) == 0
                continue
            assert ours is not None, req
            assert list(ours.indices) == list(meta["frames_indices"]), req
            assert ours.images.shape[1:3] == tuple(video.shape[2:4]), req


# --- turns ------------------------------------------------------------------------------------------------
CALLS = (
    '<think>two windows</think>\n<tool_call>\n{"name": "crop_video", "arguments": {"video_path": "x.mp4", '
    '"start_time": 1.0, "end_time": 3.5}}\n</tool_call>\n'
    '<tool_call>{"name": "crop_video", "arguments": {"start_time": "0:02", "end_time": 6}}</tool_call>'
)


def test_turns_crops_round_budget_and_forced_final(index_video):
    s = own_sample(index_video)
    env = VideoToolEnv([s], EnvConfig(protocol="release", max_turns=2, max_parallel=2))
    env.reset(options={"sample": s})
    obs, r, done, trunc, info = env.step(CALLS)
    assert not done and info["tool_calls"]["executed"] == 2
    m1, m2 = info["messages"]
    assert m1["text"] == "<image>" * 2 + "<tool_response>\n2 frames from 1.0s to 3.5s.\n</tool_response>"
    assert m2["text"] == "<image>" * 4 + "<tool_response>\n4 frames from 2.0s to 6.0s.\n</tool_response>"
    assert [decode_index(f) for f in obs["frames"]] == [10, 35, 20, 33, 47, 60]  # linspace(10, 35, 2), (20, 60, 4)
    assert obs["frames"].shape[1:3] == (84, 140)  # the crops' 784-50176 pixel budget keeps 96 x 128 near size
    assert "max_new_tokens" not in info
    # Calls beside an answer run; an empty range errors; <tool_code> calls come after every <tool_call> in the
    # release's parser, so crop_video(2, 4.25) is the third call here and is dropped (max_parallel=2).
    action = ('<tool_call>{"arguments": {"start_time": 5, "end_time": 5}}</tool_call>'
              "<tool_code>crop_video(start_time=2, end_time=4.25)</tool_code><answer>B</answer>"
              '<tool_call>{"arguments": {"start_time": 0, "end_time": 9}}</tool_call>')  # fmt: skip
    obs, r, done, trunc, info = env.step(action)
    assert not done and info["tool_calls"] == {"requested": 2, "executed": 2, "rejected": 0, "failed": 1}
    texts = [m["text"] for m in info["messages"]]
    assert texts == [
        "<tool_response>\n[Error cropping 5.0s-5.0s]\n</tool_response>",
        "<image>" * 8 + "<tool_response>\n8 frames from 0.0s to 9.0s.\n</tool_response>",
        "Based on the video and cropped segments above, answer with ONLY the letter.",
    ]
    assert [m["parts"] for m in info["messages"]] == [False, True, False]
    assert info["max_new_tokens"] == 64
    obs, r, done, trunc, info = env.step(CALLS)  # the forced turn is final whatever it holds
    assert done and info["final_response"] == CALLS and info["tool_calls"]["executed"] == 0
    env.close()


def test_a_turn_without_a_call_is_final_and_a_non_object_call_fails_the_sample(index_video):
    s = own_sample(index_video)
    env = VideoToolEnv([s], EnvConfig(protocol="release"))
    env.reset(options={"sample": s})
    *_, done, _, info = env.step("<tool_call>not json</tool_call> so: <answer>A</answer>")
    assert done and info["final_response"].endswith("<answer>A</answer>") and "error" not in info
    env.reset(options={"sample": s})
    *_, done, _, info = env.step("<tool_call>[1, 2]</tool_call>")
    assert done and info["final_response"] == "" and "not an object" in info["error"]
    env.close()


def test_release_time_calls_and_scores():
    assert [release_time(v) for v in (3, "4.5", "01:05", "1:00:02", "soon", None, [1])] == [3.0, 4.5, 65.0, 3602.0, 0.0, 0.0, 0.0]
    [call] = release_calls('<tool_call>{"name": "anything", "arguments": {"start": 4}}</tool_call>', 5)
    assert (call.start, call.end) == (4.0, 14.0)  # the name is never checked; end defaults to start + 10
    assert release_calls("<tool_code>crop_video('v.mp4', 1, 2)</tool_code>", 5) == []  # positional: unread
    assert release_letter("<answer>B</answer>") == "B"
    assert release_letter("<answer>I think (C) fits</answer>") == "I"  # "I" is a standalone letter in A-J
    assert release_letter("The answer is D because") == "D"
    assert release_letter("none of these") == "n"
    assert release_span("<time>00:19.7 - 00:25.6</time>") == (19.7, 25.6)
    assert release_span("The event happens in the 3.1 - 4.7 seconds.") == (3.1, 4.7)
    assert release_span("starts at 5 and ends at 9") == (5.0, 9.0)
    assert release_span("nothing") is None
    assert release_score("happens in 24.3 - 30.4 seconds", is_mcq=False, answer="", span=(24.296875, 30.40625)) == (
        pytest.approx((30.4 - 24.3) / (30.40625 - 24.296875)), "24.3-30.4")
    assert release_score("<answer>Dolly Zoom</answer>", is_mcq=True, answer="Dolly Zoom")[0] == 0.0  # MMVU open-ended


def test_unknown_protocol_is_refused():
    with pytest.raises(ValueError, match="protocol must be one of"):
        EnvConfig(protocol="lmms")


# --- the RL workflow (tool_result="subagent") ---------------------------------------------------------------
def test_rl_episode_starts_from_the_parquet_prompt_and_prompts_the_subagent_as_released(tmp_path, index_video):
    from paravt_env.protocol.release import RL_TOOLS_SYSTEM, release_subagent_prompt

    rows = json.loads((FIXTURES / "paravt" / "paravt_rl_rows.json").read_text())[:1]
    (tmp_path / "rl.json").write_text(json.dumps(rows))
    place(index_video, tmp_path, "longvt_source/longvideoreason_1/clips/v1.mp4")
    [s] = load_samples(tmp_path / "rl.json")
    asked = []

    def subagent(request):
        asked.append(request)
        return "<think>hm</think>A red car parks."

    env = VideoToolEnv([s], EnvConfig(protocol="release", tool_result="subagent", subagent=subagent, max_turns=1))
    obs, info = env.reset(options={"sample": s})
    system, user = info["messages"]
    assert system["text"] == "You are a helpful assistant.\n\n" + RL_TOOLS_SYSTEM
    # 15 s at the base config's 1 fps: 14 frames (floored to even), each after its <index / fps seconds> tag.
    want = np.round(np.linspace(0, N_FRAMES - 1, 14)).astype(int)
    tags = "".join(f"<{i / FPS:.1f} seconds><image>" for i in want)
    assert user["text"] == tags + "\nWhat colour is the car that parks last?\nOptions:\n(A) red\n(B) blue\n(C) white\n(D) black"
    assert [decode_index(f) for f in obs["frames"]] == list(want) and obs["frames"].shape[1:3] == (84, 140)
    assert info["frame_budget"] == 14  # fps: 1 overrides the budget (and with it nFrames Gating)
    action = ('<think>look</think><tool_call>{"name": "crop_video", "arguments": {"video_path": "v.mp4", '
              '"start_time": 2, "end_time": 30}}</tool_call>'
              '<tool_call>{"name": "crop_video", "arguments": {"start_time": 9, "end_time": 4}}</tool_call>')  # fmt: skip
    obs, r, done, trunc, info = env.step(action)
    assert not done and [m["text"] for m in info["messages"]] == [
        "<tool_response>\n<think>hm</think>A red car parks.\n</tool_response>",  # the whole reply, as released
        "[Error: crop_video failed]",  # start >= end
    ]
    [req] = asked
    assert (req.start, req.end, req.style) == (2.0, 15.0, "release")  # the end clamped to the video
    assert req.user_text() == "<image>" * len(req.frames) + release_subagent_prompt(2.0, 15.0)
    assert release_subagent_prompt(65.5, 130.2).startswith(
        "You are analyzing a video segment from 01:05 to 02:10 (duration: 64.7 seconds).\n\n")
    *_, done, _, info = env.step(action)  # max_turns + 1 generations: its calls run, then the episode ends
    assert done and len(asked) == 2 and info["final_response"] == action and info["tool_calls"]["executed"] == 1
    assert info["reward_breakdown"]["accuracy"] == 0.0  # no answer: no task reward
    env.close()


def test_rl_calls_are_read_all_or_nothing_as_the_release_hermes_parser_reads_them():
    from paravt_env.protocol.release import hermes_calls

    good = '<tool_call>{"name": "crop_video", "arguments": {"start_time": 1, "end_time": "4"}}</tool_call>'
    [call] = hermes_calls("<think>x</think>" + good)
    assert (call.name, call.start_time, call.end_time) == ("crop_video", 1.0, 4.0)
    # one malformed block: no call at all (the parser fails as a whole and the episode ends)
    assert hermes_calls(good + '<tool_call>{"name": "crop_video", "arguments": {"start_time": 1,</tool_call>') == []
    assert hermes_calls(good + '<tool_call>{"name": "crop_video"}</tool_call>') == []  # no arguments
    assert hermes_calls(good + '<tool_call>["crop_video"]</tool_call>') == []
    # an unclosed last block counts when what follows it is one JSON object, and fails the turn when it is cut
    assert len(hermes_calls(good + '<tool_call>{"name": "crop_video", "arguments": {"start_time": 5, "end_time": 9}}')) == 2
    assert hermes_calls(good + '<tool_call>{"name": "crop_video", "argu') == []
    # <tool_code> is the eval driver's form, not the RL workflow's
    assert hermes_calls("<tool_code>crop_video(start_time=1, end_time=4)</tool_code>") == []
