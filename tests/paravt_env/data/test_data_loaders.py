"""Loaders on small files written in each public schema (videos are empty placeholder files: loading
never decodes)."""

import json

import pytest

from paravt_env.data import DataFormatError, VideoQASample, detect_format, load_samples


def _touch(root, *names):
    for name in names:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"")


def _write_json(path, data):
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _write_parquet(path, rows):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_our_jsonl_and_directory(tmp_path):
    _touch(tmp_path, "a.mp4")
    s = VideoQASample("1", "a.mp4", "Q?", "B", "mcq", options=["x", "y", "z", "w"], duration=60.0)
    (tmp_path / "samples.jsonl").write_text(s.to_json() + "\n")
    [loaded] = load_samples(tmp_path)
    assert loaded.video_path == str(tmp_path / "a.mp4") and loaded.options == ["x", "y", "z", "w"]
    assert loaded.question_with_options() == "Q?\nA. x\nB. y\nC. z\nD. w"


def test_paravt_parquet(tmp_path):
    videos = tmp_path / "videos"
    _touch(videos, "clips/v1.mp4")
    rows = [
        {
            "prompt": [
                {"role": "system", "content": "You are helpful."},
                {"role": "user", "content": "<video>\nWhat colour is the car?\nA. red\nB. blue"},
            ],
            "videos": [{"video": "clips/v1.mp4"}],
            "extra_info": json.dumps({"answer": "B", "question_type": "mcq", "index": 7}),
        },
        {
            "prompt": [{"role": "user", "content": "<video>When does he jump?"}],
            "videos": [{"video": "clips/missing.mp4"}],
            "extra_info": json.dumps({"answer": "[1.0, 2.0]", "question_type": "tvg"}),
        },
    ]
    path = _write_parquet(tmp_path / "train.parquet", rows)
    with pytest.warns(UserWarning, match=r"skipped 1 of 2 .*missing.mp4"):
        samples = load_samples(path, video_root=videos)
    [s] = samples
    assert (s.question_type, s.answer, s.id) == ("mcq", "B", "7")
    assert s.question.startswith("What colour is the car?") and "<video>" not in s.question
    assert s.video_path == str(videos / "clips/v1.mp4")
    with pytest.raises(FileNotFoundError, match="missing.mp4"):
        load_samples(path, video_root=videos, strict=True)


def test_videomme(tmp_path):
    _touch(tmp_path, "data/fFjv93ACGo8.mp4")
    rows = [
        {
            "video_id": "001", "duration": "short", "domain": "Knowledge", "sub_category": "Humanity & History",
            "url": "https://www.youtube.com/watch?v=fFjv93ACGo8", "videoID": "fFjv93ACGo8",
            "question_id": "001-1", "task_type": "Counting Problem",
            "question": "When demonstrating the Germany modern Christmas tree is initially decorated with apples, candles and berries, which kind of the decoration has the largest number?",
            "options": ["A. Apples.", "B. Candles.", "C. Berries.", "D. The three kinds are of the same number."],
            "answer": "C",
        }
    ]  # fmt: skip
    path = _write_parquet(tmp_path / "test-00000-of-00001.parquet", rows)
    assert detect_format(rows, path) == "videomme"
    [s] = load_samples(path)
    assert (s.id, s.answer, s.options[0], s.question_type) == ("001-1", "C", "Apples.", "mcq")
    assert s.extra["duration"] == "short" and s.extra["subtitle_path"] == "subtitle/fFjv93ACGo8.srt"
    # the same rows as JSON load the same way
    assert load_samples(_write_json(tmp_path / "videomme.json", rows)) == [s]


def test_longvideobench(tmp_path):
    _touch(tmp_path, "videos/86CxyhFV9MI.mp4")
    rows = [
        {
            "video_id": "86CxyhFV9MI", "question": "In the video, which subtitles appear at the same time as the man?",
            "question_wo_referring_query": "Which subtitles appear?",
            "candidates": ["promisc has come to an end", "that's a good question", "run ifconfig", "in the corner"],
            "correct_choice": 2, "position": [4.0], "topic_category": "NP-News-Programs",
            "question_category": "TOS", "level": "L2-Relation", "id": "86CxyhFV9MI_0",
            "video_path": "86CxyhFV9MI.mp4", "subtitle_path": "86CxyhFV9MI_en.json", "duration_group": 600,
            "starting_timestamp_for_subtitles": 0, "duration": 527.0, "view_count": 1234,
        }
    ]  # fmt: skip
    [s] = load_samples(_write_json(tmp_path / "lvb_val.json", rows))
    assert (s.answer, s.options[2], s.duration, s.id) == ("C", "run ifconfig", 527.0, "86CxyhFV9MI_0")
    assert s.video_path.endswith("videos/86CxyhFV9MI.mp4")


def test_lvbench_nested_and_flat(tmp_path):
    _touch(tmp_path, "5Z4vvoXbvbk.mp4")
    nested = {
        "key": "5Z4vvoXbvbk", "type": "sport",
        "qa": [
            {"uid": "0", "question": "What year appears in the opening caption of the video?\n(A) 1636\n(B) 1366\n(C) 1363\n(D) 1633",
             "answer": "B", "question_type": ["key information retrieval"], "time_reference": "00:15-00:19"},
            {"uid": "1", "question": "Who wins?\n(A) red\n(B) blue\n(C) nobody\n(D) both", "answer": "(D)",
             "question_type": ["reasoning"], "time_reference": "10:00-10:30"},
        ],
        "video_info": {"duration_minutes": 68.3},
    }  # fmt: skip
    path = tmp_path / "video_info.meta.jsonl"
    path.write_text(json.dumps(nested) + "\n")
    a, b = load_samples(path)
    assert a.question == "What year appears in the opening caption of the video?"
    assert a.options == ["1636", "1366", "1363", "1633"] and a.answer == "B" and b.answer == "D"
    assert a.extra["time_reference"] == "00:15-00:19"
    flat = [{"uid": "9", "key": "5Z4vvoXbvbk", "question": "Q?\n(A) a\n(B) b", "answer": "A"}]
    [c] = load_samples(_write_json(tmp_path / "flat.json", flat))
    assert c.options == ["a", "b"] and c.video_path.endswith("5Z4vvoXbvbk.mp4")


def test_mlvu_dev_and_test_rows(tmp_path):
    _touch(tmp_path, "video/1_plotQA/movie101_66.mp4", "test_video.mp4")
    dev = [
        {"video": "movie101_66.mp4", "duration": 246.0, "question": "What color is the main male character in the video?",
         "candidates": ["Yellow", "Red", "Green", "Blue"], "answer": "Yellow", "question_type": "plotQA"}
    ]  # fmt: skip
    [s] = load_samples(_write_json(tmp_path / "1_plotQA.json", dev), video_root=tmp_path / "video" / "1_plotQA")
    assert (s.answer, s.options, s.duration) == ("A", ["Yellow", "Red", "Green", "Blue"], 246.0)
    test_rows = [{"video_name": "test_video.mp4", "question": "How many?\n(A) 1\n(B) 2\n(C) 3\n(D) 4", "answer": "(C) 3",
                  "task_type": "count", "question_id": "q7"}]  # fmt: skip
    [t] = load_samples(_write_json(tmp_path / "test.json", test_rows), format="mlvu")
    assert (t.answer, t.options, t.id) == ("C", ["1", "2", "3", "4"], "q7")


def test_mmvu(tmp_path):
    _touch(tmp_path, "videos/Art/0.mp4", "videos/Biology/3.mp4")
    rows = [
        {"id": "7a2b", "video": "https://huggingface.co/datasets/yale-nlp/MMVU/resolve/main/videos/Art/0.mp4",
         "question": "Which technique is shown?", "choices": {"A": "fresco", "B": "etching", "C": "collage", "D": "mosaic", "E": "batik"},
         "answer": "B", "question_type": "multiple-choice", "metadata": {"subject": "Art"}},
        {"id": "9c1d", "video": "https://huggingface.co/datasets/yale-nlp/MMVU/resolve/main/videos/Biology/3.mp4",
         "question": "What process is shown?", "choices": {}, "answer": "mitosis", "question_type": "open-ended",
         "metadata": {"subject": "Biology"}},
    ]  # fmt: skip
    a, b = load_samples(_write_json(tmp_path / "validation.json", rows))
    assert (a.question_type, a.answer, len(a.options)) == ("mcq", "B", 5)
    assert (b.question_type, b.answer) == ("oe", "mitosis")
    assert a.video_path == str(tmp_path / "videos/Art/0.mp4")


def test_charades_sta_json_and_txt(tmp_path):
    _touch(tmp_path, "3MSZA.mp4")
    rows = [{"video": "3MSZA.mp4", "caption": "person turn a light on.", "timestamp": [24.3, 30.4], "duration": 30.96}]
    [s] = load_samples(_write_json(tmp_path / "charades.json", rows))
    assert (s.question_type, s.answer, s.duration) == ("tvg", "[24.3, 30.4]", 30.96)
    assert "person turn a light on" in s.question
    txt = tmp_path / "charades_sta_test.txt"
    txt.write_text("3MSZA 24.3 30.4##person turn a light on.\n3MSZA 0.0 6.9##person opening a door.\n")
    a, b = load_samples(txt)
    assert a.answer == "[24.3, 30.4]" and b.answer == "[0.0, 6.9]" and a.id != b.id


def test_errors_name_file_row_and_field(tmp_path):
    bad = _write_json(tmp_path / "lvb.json", [{"candidates": ["a"], "correct_choice": 5, "question": "q", "video_id": "v"}])
    with pytest.raises(DataFormatError, match=r"lvb.json: row 0: correct_choice 5"):
        load_samples(bad)
    broken = tmp_path / "x.jsonl"
    broken.write_text('{"id": 1}\n{not json\n')
    with pytest.raises(DataFormatError, match=r"x.jsonl: line 2: invalid JSON"):
        load_samples(broken)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_samples(tmp_path / "nowhere.jsonl")
    weird = _write_json(tmp_path / "weird.json", [{"foo": 1}])
    with pytest.raises(DataFormatError, match="cannot tell the format"):
        load_samples(weird)
