"""Loaders on the fixture files in ``tests/fixtures/data`` (each written in one public schema).

Videos are empty placeholder files at each benchmark's conventional place: loading never decodes.
"""

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paravt_env.data import DataFormatError, VideoQASample, detect_format, load_samples
from paravt_env.data.formats._common import RowContext, embedded_options, letter_of
from paravt_env.data.loaders import read_rows

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "data"


@pytest.fixture
def data(tmp_path):
    """A private copy of the fixtures, so tests can add placeholder videos beside them."""
    root = tmp_path / "data"
    shutil.copytree(FIXTURES, root)
    return root


def touch(root: Path, *names: str) -> None:
    for name in names:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"")


def to_parquet(json_path: Path, parquet_path: Path) -> Path:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(json.loads(json_path.read_text())), parquet_path)
    return parquet_path


def ids(samples):
    return [s.id for s in samples]


# --- our JSONL ----------------------------------------------------------------------------------------------
def test_ours_jsonl_file_and_directory(data):
    ours = data / "ours"
    touch(ours, "synth_a.mp4", "clips/synth_b.mp4")
    a, b = load_samples(ours)  # a directory holding samples.jsonl
    assert a.video_path == str(ours / "synth_a.mp4") and b.video_path == str(ours / "clips/synth_b.mp4")
    assert (a.answer, a.options, a.events[0].attributes["shape"]) == (
        "C",
        ["red", "blue", "green", "cyan"],
        "star",
    )
    assert a.question_with_options().endswith("\nC. green\nD. cyan")
    assert (b.question_type, b.answer) == ("tvg", "[40.0, 44.0]")
    assert load_samples(ours / "samples.jsonl", format="jsonl") == [a, b]
    # an explicit video_root replaces the file's folder
    other = data / "elsewhere"
    touch(other, "synth_a.mp4")
    with pytest.warns(UserWarning, match=r"skipped 1 of 2 samples .*synth_b\.mp4"):
        [only] = load_samples(ours, video_root=other)
    assert only.video_path == str(other / "synth_a.mp4")


def test_ours_rejects_unknown_fields(data, tmp_path):
    bad = tmp_path / "bad.jsonl"
    row = json.loads((data / "ours/samples.jsonl").read_text().splitlines()[0])
    bad.write_text(json.dumps({**row, "colour": "red"}) + "\n")
    with pytest.raises(DataFormatError, match=r"bad.jsonl: line 1: .*unknown field"):
        load_samples(bad)


# --- ParaVT RL parquet --------------------------------------------------------------------------------------
def test_paravt_parquet(data):
    path = to_parquet(data / "paravt/paravt_rl_rows.json", data / "paravt/paravt_rl_diverse.parquet")
    root = data / "source"
    touch(root, "longvt_source/longvideoreason_1/clips/v1.mp4", "museg/charades/ABC12.mp4", "selfqa/q42.mp4")
    assert detect_format(read_rows(path), path) == "paravt"
    with pytest.warns(UserWarning, match=r"skipped 1 of 4 samples .*selfqa/missing\.mp4"):
        mcq, tvg, oe = load_samples(path, video_root=root)
    assert (mcq.id, mcq.question_type, mcq.answer, mcq.options) == ("7", "mcq", "B", [])
    # the question is the user text without the placeholder, options and all (they are part of the prompt)
    assert mcq.question.startswith("What colour is the car that parks last?\nOptions:\n(A) red")
    assert "<video>" not in mcq.question and mcq.extra["system_prompt"] == "You are a helpful assistant."
    assert mcq.extra["data_source"] == "longvideoreason" and mcq.extra["extra_info"] == {"index": 7}
    assert mcq.video_path == str(root / "longvt_source/longvideoreason_1/clips/v1.mp4")
    assert (tvg.question_type, tvg.answer) == ("tvg", "[3.5, 9.0]")
    assert tvg.question == "When does the person open the fridge? Answer with [start, end]."
    # file:// is stripped; question types the ParaVT reward does not know are scored as open-ended
    assert oe.video_path == str(root / "selfqa/q42.mp4") and oe.question_type == "oe"
    assert oe.extra["question_type_raw"] == "open_ended"
    with pytest.raises(FileNotFoundError, match=r"skipped 1 of 4 .*missing\.mp4"):
        load_samples(path, video_root=root, strict=True)


def test_paravt_extra_info_as_struct_and_errors(tmp_path):
    touch(tmp_path, "v.mp4")
    rows = [
        {
            "prompt": [{"role": "user", "content": "<video>\nQ?"}],
            "videos": [{"video": "v.mp4"}],
            "extra_info": {"answer": "A", "question_type": "mcq", "id": "x1"},
        }
    ]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    [s] = load_samples(path, format="paravt")
    assert (s.id, s.answer, s.question) == ("x1", "A", "Q?")
    rows[0]["extra_info"] = json.dumps({"question_type": "mcq"})
    path.write_text(json.dumps(rows))
    with pytest.raises(DataFormatError, match=r"rows.json: row 0: no answer"):
        load_samples(path)


# --- Video-MME ----------------------------------------------------------------------------------------------
def test_videomme_parquet_json_and_nested(data):
    root = data / "videomme"
    touch(root, "data/aaaaaaaaaa1.mp4", "data/bbbbbbbbbb2.mkv", "subtitle/aaaaaaaaaa1.srt")
    path = to_parquet(root / "videomme_test_rows.json", root / "test-00000-of-00001.parquet")
    with pytest.warns(UserWarning, match=r"skipped 1 of 4 samples .*ccccccccc03"):
        samples = load_samples(path)
    a1, a2, b1 = samples
    assert ids(samples) == ["001-1", "001-2", "002-1"]
    assert (a1.answer, a1.options, a1.question_type) == ("C", ["One.", "Two.", "Three.", "Four."], "mcq")
    assert a1.video_path == str(root / "data/aaaaaaaaaa1.mp4") and b1.video_path.endswith("bbbbbbbbbb2.mkv")
    assert a1.extra["duration"] == "short" and a1.extra["task_type"] == "Counting Problem"
    assert a1.duration is None  # Video-MME's duration is a length class, not seconds
    assert a1.extra["subtitle_path"] == str(root / "subtitle/aaaaaaaaaa1.srt")
    assert "subtitle_path" not in b1.extra
    # the same rows as JSON, with the videos under an explicit root
    with pytest.warns(UserWarning):
        assert load_samples(root / "videomme_test_rows.json", video_root=root) == samples
    # the official nested JSON: one entry per video, questions inside
    nested = load_samples(root / "videomme_official.json", video_root=root / "data")
    assert [(s.id, s.answer, s.extra["domain"]) for s in nested] == [
        ("001-1", "C", "Knowledge"),
        ("001-2", "A", "Knowledge"),
    ]


# --- LongVideoBench -----------------------------------------------------------------------------------------
def test_longvideobench_json_and_parquet(data):
    root = data / "longvideobench"
    touch(root, "videos/86CxyhFV9MI.mp4", "videos/Xb1kd9QwLqE.mp4", "subtitles/86CxyhFV9MI_en.json")
    a, b = load_samples(root / "lvb_val.json")
    assert (a.id, a.answer, a.options[2], a.duration) == (
        "86CxyhFV9MI_0",
        "C",
        "run the command again",
        527.0,
    )
    assert (b.answer, len(b.options)) == ("E", 5)
    assert a.video_path == str(root / "videos/86CxyhFV9MI.mp4")
    assert a.extra["subtitle_path"] == str(root / "subtitles/86CxyhFV9MI_en.json")
    assert b.extra["subtitle_path"] == "Xb1kd9QwLqE_en.json"  # not downloaded: kept as the row names it
    assert a.extra["question_category"] == "TOS" and a.extra["duration_group"] == 600
    pa, pb = load_samples(
        to_parquet(root / "lvb_validation_rows.json", root / "validation-00000-of-00001.parquet")
    )
    assert (pa.options, pa.answer) == (a.options, "C")  # "N/A" option4 dropped
    assert (pb.options, pb.answer) == (b.options, "E")


def test_longvideobench_test_file_has_no_ground_truth(tmp_path):
    rows = [{"video_id": "v", "question": "Q?", "candidates": ["a", "b"], "id": "v_0", "video_path": "v.mp4",
             "duration_group": 15, "duration": 10.0}]  # fmt: skip
    path = tmp_path / "lvb_test_wo_gt.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(DataFormatError, match=r"row 0: missing field 'correct_choice'"):
        load_samples(path)


# --- LVBench ------------------------------------------------------------------------------------------------
def test_lvbench_meta_jsonl_and_flat(data):
    root = data / "lvbench"
    touch(root, "5Z4vvoXbvbk.mp4", "videos/k9Qm2LxV0aA.mp4")
    a, b, c = load_samples(root / "video_info.meta.jsonl")
    assert a.question == "What year appears in the opening caption of the video?"
    assert (a.options, a.answer, b.answer, c.answer) == (["1636", "1366", "1363", "1633"], "B", "A", "C")
    assert (a.id, a.duration) == ("0", pytest.approx(68.3 * 60))
    assert a.extra["time_reference"] == "00:15-00:19" and a.extra["type"] == "sport"
    assert (a.events[0].start, a.events[0].end) == (15.0, 19.0)  # the evidence window, for oracles
    assert (b.events[0].start, b.events[0].end) == (3723.0, 3760.0)  # HH:MM:SS
    assert b.extra["question_type"] == ["event understanding", "reasoning"]
    assert c.video_path == str(root / "videos/k9Qm2LxV0aA.mp4")
    [flat] = load_samples(root / "lvbench_lmms_rows.json")
    assert (flat.id, flat.answer, flat.options[2], flat.video_path) == (
        "7", "C", "a key", str(root / "videos/k9Qm2LxV0aA.mp4"),
    )  # fmt: skip


# --- MLVU ---------------------------------------------------------------------------------------------------
def test_mlvu_dev_json_in_its_own_layout(data):
    mlvu = data / "mlvu/MLVU"
    touch(mlvu, "video/1_plotQA/movie101_66.mp4", "video/1_plotQA/movie101_67.mp4", "video/4_count/count_1.mp4",
          "video/9_summary/summary_1.mp4")  # fmt: skip
    a, b = load_samples(mlvu / "json/1_plotQA.json")  # videos found in ../video/1_plotQA/
    assert (a.answer, a.options, a.duration) == ("A", ["Yellow", "Red", "Green", "Blue"], 246.0)
    assert b.answer == "B" and a.extra["task"] == "plotQA"
    assert a.video_path == str(mlvu / "video/1_plotQA/movie101_66.mp4")
    [count] = load_samples(mlvu / "json/4_count.json", video_root=mlvu / "video")
    assert (count.answer, count.options) == ("C", ["2", "3", "4", "5"])
    [summary] = load_samples(mlvu / "json/9_summary.json")
    assert (summary.question_type, summary.options) == ("oe", [])
    assert summary.answer.startswith("A chef prepares")


def test_mlvu_lmms_eval_rows(data):
    root = data / "mlvu"
    touch(root, "needle_32.mp4")
    path = to_parquet(root / "mlvu_dev_lmms_rows.json", root / "test-00000-of-00001.parquet")
    [s] = load_samples(path)
    assert (s.id, s.answer, s.extra["task"]) == ("needle_32_0", "A", "needle")
    assert s.question == "What does the hand do in the inserted clip?"  # options moved out of the text
    assert s.options[1] == "Shakes the woman's hand" and s.question_with_options().count("\n") == 4


# --- MMVU ---------------------------------------------------------------------------------------------------
def test_mmvu_validation_and_lmms_rows(data):
    root = data / "mmvu"
    touch(root, "videos/Art/0.mp4", "videos/Chemistry/0.mp4")
    oe, mc = load_samples(root / "validation.json")
    assert (oe.id, oe.question_type, oe.answer, oe.options) == ("validation_0", "oe", "Dolly Zoom", [])
    assert (mc.question_type, mc.answer, mc.options) == ("mcq", "A", ["10.0", "5.0", "12.0", "15.0", "20.0"])
    assert mc.video_path == str(root / "videos/Chemistry/0.mp4")
    assert mc.extra["metadata"]["subject"] == "Chemistry" and mc.extra["url"].startswith(
        "https://huggingface.co/"
    )
    [row] = load_samples(root / "mmvu_lmms_rows.json")
    assert (row.answer, row.video_path) == ("A", str(root / "videos/Chemistry/0.mp4"))


# --- Charades-STA -------------------------------------------------------------------------------------------
def test_charades_sta_txt_lmms_and_per_video_json(data):
    root = data / "charades_sta"
    touch(root, "Charades_v1_480/3MSZA.mp4", "Charades_v1_480/AO8RW.mp4")
    a, b, c = load_samples(root / "charades_sta_test.txt")
    assert (a.question_type, a.answer, c.answer) == ("tvg", "[24.3, 30.4]", "[0.0, 6.9]")
    assert (
        a.question
        == "When does 'person turn a light on' happen in the video? Answer with [start, end] in seconds."
    )
    assert (a.events[0].start, a.events[0].end, a.events[0].label) == (24.3, 30.4, "person turn a light on.")
    assert len(set(ids([a, b, c]))) == 3  # same video and span twice: ids still unique
    assert a.video_path == str(root / "Charades_v1_480/3MSZA.mp4")
    x, y = load_samples(root / "charades_lmms_rows.json")
    assert (x.answer, x.duration, y.answer, y.duration) == ("[24.3, 30.4]", 30.96, "[0.0, 6.9]", None)
    # lmms-eval's parquet stores the timestamps as float16: 24.3 reads back as 24.296875
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table(
        {"video": ["3MSZA.mp4"], "caption": ["person turn a light on."], "timestamp": [[24.3, 30.4]]},
        schema=pa.schema(
            [("video", pa.string()), ("caption", pa.string()), ("timestamp", pa.list_(pa.float16()))]
        ),
    )
    pq.write_table(table, root / "test-00000-of-00001.parquet")
    [h] = load_samples(root / "test-00000-of-00001.parquet")
    assert (h.answer, h.events[0].start, h.events[0].end) == ("[24.3, 30.4]", 24.3, 30.4)
    by_video = load_samples(root / "charades_test_by_video.json")
    assert [s.answer for s in by_video] == ["[24.3, 30.4]", "[24.3, 30.4]", "[0.0, 6.9]"]
    assert (
        by_video[2].duration == 33.67
        and by_video[2].extra["caption"] == "a person is putting a book on a shelf."
    )


# --- detection and errors -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, fmt",
    [
        ("ours/samples.jsonl", "jsonl"),
        ("paravt/paravt_rl_rows.json", "paravt"),
        ("videomme/videomme_test_rows.json", "videomme"),
        ("videomme/videomme_official.json", "videomme"),
        ("longvideobench/lvb_val.json", "longvideobench"),
        ("longvideobench/lvb_validation_rows.json", "longvideobench"),
        ("lvbench/video_info.meta.jsonl", "lvbench"),
        ("lvbench/lvbench_lmms_rows.json", "lvbench"),
        ("mlvu/MLVU/json/1_plotQA.json", "mlvu"),
        ("mlvu/MLVU/json/9_summary.json", "mlvu"),
        ("mlvu/mlvu_dev_lmms_rows.json", "mlvu"),
        ("mmvu/validation.json", "mmvu"),
        ("mmvu/mmvu_lmms_rows.json", "mmvu"),
        ("charades_sta/charades_sta_test.txt", "charades_sta"),
        ("charades_sta/charades_lmms_rows.json", "charades_sta"),
        ("charades_sta/charades_test_by_video.json", "charades_sta"),
    ],
)
def test_detect_format(name, fmt):
    path = FIXTURES / name
    assert detect_format(read_rows(path), path) == fmt


def test_missing_videos_warn_once_with_a_count(data):
    with pytest.warns(
        UserWarning, match=r"skipped 3 of 3 samples .*charades_sta_test.txt: video not found"
    ) as w:
        assert load_samples(data / "charades_sta/charades_sta_test.txt") == []
    assert len(w) == 1


def test_malformed_rows_name_file_row_and_field(tmp_path):
    def write(name, rows):
        p = tmp_path / name
        p.write_text(json.dumps(rows))
        return p

    with pytest.raises(DataFormatError, match=r"lvb.json: row 0: field 'correct_choice' = 5 is outside"):
        load_samples(
            write("lvb.json", [{"candidates": ["a"], "correct_choice": 5, "question": "q", "video_id": "v"}])
        )
    vmme = {"videoID": "x", "question_id": "1", "question": "q", "options": ["A. a", "B. b"], "answer": "E"}
    touch(tmp_path, "x.mp4")
    with pytest.raises(DataFormatError, match=r"vmme.json: row 0: field 'answer' = 'E' names none of the 2"):
        load_samples(write("vmme.json", [vmme]))
    with pytest.raises(DataFormatError, match=r"mlvu.json: row 0: field 'answer' = 'Purple' names none"):
        load_samples(
            write(
                "mlvu.json",
                [{"video": "v.mp4", "question": "q", "candidates": ["a", "b"], "answer": "Purple"}],
            )
        )
    with pytest.raises(DataFormatError, match=r"cha.json: row 1: field 'timestamp' must be \[start, end\]"):
        load_samples(write("cha.json", [{"video": "v", "caption": "c", "timestamp": [1, 2]},
                                        {"video": "v", "caption": "c", "timestamp": [5, 2]}]))  # fmt: skip
    with pytest.raises(DataFormatError, match=r"lvb2.json: row 0: missing field 'question'"):
        load_samples(write("lvb2.json", [{"candidates": ["a", "b"], "correct_choice": 0, "video_id": "v"}]))
    txt = tmp_path / "charades.txt"
    txt.write_text("3MSZA 24.3 30.4##ok\n3MSZA 24.3\n")
    with pytest.raises(DataFormatError, match=r"charades.txt: line 2: expected 'VIDEO START END##caption'"):
        load_samples(txt)
    broken = tmp_path / "x.jsonl"
    broken.write_text('{"id": 1}\n{not json\n')
    with pytest.raises(DataFormatError, match=r"x.jsonl: line 2: invalid JSON"):
        load_samples(broken)
    with pytest.raises(DataFormatError, match="cannot tell the format from the keys"):
        load_samples(write("weird.json", [{"foo": 1}]))
    with pytest.raises(ValueError, match="unknown data format 'nope'"):
        load_samples(write("ok.json", []), format="nope")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_samples(tmp_path / "nowhere.jsonl")
    with pytest.raises(FileNotFoundError, match="without samples.jsonl"):
        load_samples(tmp_path)


def test_json_lines_in_a_json_file_and_absolute_paths(tmp_path):
    video = tmp_path / "abs" / "clip.mp4"
    touch(tmp_path, "abs/clip.mp4")
    row = VideoQASample("a", str(video), "Q?", "yes").to_dict()
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, "id": "b"}) + "\n")
    assert [s.video_path for s in load_samples(path)] == [str(video), str(video)]


def test_pyarrow_is_imported_lazily():
    import subprocess
    import sys

    code = "import sys, paravt_env.data; print('pyarrow' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# --- option helpers (property-based) ------------------------------------------------------------------------
_option_text = (
    st.text(alphabet=st.characters(categories=("L", "N", "Zs"), max_codepoint=0x2FF), min_size=1)
    .map(str.strip)
    .filter(bool)
)


@given(
    options=st.lists(_option_text, min_size=2, max_size=6, unique_by=lambda o: " ".join(o.lower().split())),
    pick=st.integers(0, 5),
)
def test_embedded_options_round_trip(options, pick):
    pick %= len(options)
    text = "What is it?\n" + "\n".join(
        f"({letter}) {o}" for letter, o in zip("ABCDEF", options, strict=False)
    )
    stem, parsed = embedded_options(text)
    assert stem == "What is it?" and parsed == options
    ctx = RowContext(Path("f.json"), "f.json: row 0")
    letter = "ABCDEF"[pick]
    assert letter_of(letter, parsed, ctx) == letter
    assert letter_of(f"({letter})", parsed, ctx) == letter
    assert letter_of(pick, parsed, ctx) == letter
    if len(options[pick]) > 1:  # (an option whose text is a bare letter is ambiguous by nature)
        assert letter_of(options[pick], parsed, ctx) == letter


def test_ids_stay_unique_after_renaming_whatever_the_input(tmp_path):
    touch(tmp_path, "v.mp4")
    for given_ids, expected in ((["a", "a#2", "a"], ["a", "a#2", "a#3"]), (["a", "a", "a#2"], ["a", "a#3", "a#2"]),
                                (["a", "a", "a", "a#3"], ["a", "a#2", "a#4", "a#3"])):  # fmt: skip
        path = tmp_path / "rows.jsonl"
        path.write_text("".join(json.dumps({"id": i, "video_path": "v.mp4", "question": "q", "answer": "x"}) + "\n"
                                for i in given_ids))  # fmt: skip
        got = ids(load_samples(path))
        assert got == expected and len(set(got)) == len(given_ids)


@pytest.mark.parametrize("duration", [-5, 0, "NaN", float("inf"), "twelve", True, [3]])
def test_a_bad_duration_is_refused_at_load_naming_file_row_and_field(tmp_path, duration):
    touch(tmp_path, "v.mp4")
    path = tmp_path / "rows.jsonl"
    good = {"id": "ok", "video_path": "v.mp4", "question": "q", "answer": "x", "duration": "12.5"}
    bad = {"id": "b", "video_path": "v.mp4", "question": "q", "answer": "x", "duration": duration}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataFormatError, match=r"rows.jsonl: line 2: sample 'b': field 'duration' must be a"):
        load_samples(path)
    path.write_text(json.dumps(good) + "\n")
    assert load_samples(path)[0].duration == 12.5


def test_bad_event_times_are_refused_at_load(tmp_path):
    touch(tmp_path, "v.mp4")
    path = tmp_path / "rows.jsonl"
    row = {"id": "e", "video_path": "v.mp4", "question": "q", "answer": "x", "events": [{"start": 5, "end": float("nan")}]}
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(DataFormatError, match=r"line 1: sample 'e': field 'events': event end must be a finite"):
        load_samples(path)
