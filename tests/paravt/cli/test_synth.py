"""``paravt synth`` into a used directory: the same dataset is reused, another one is refused unless ``--replace``,
which replaces it whole (no old video left behind beside the new ``samples.jsonl``), and a directory holding
files synth did not write is never emptied."""

import json

import pytest

from paravt.cli import main
from paravt_env import load_samples

SMALL = ["--n", "2", "--min-duration", "20", "--max-duration", "22", "--size", "64", "--no-progress"]


def _synth(out, seed, *extra):
    return main(["synth", "--out", str(out), "--seed", str(seed), *SMALL, *extra])


def _videos(out):
    return sorted(p.name for p in out.glob("*.mp4"))


def test_another_seed_is_refused_then_replaced_whole(tmp_path, capsys):
    out = tmp_path / "synth"
    assert _synth(out, 0) == 0
    first, samples = _videos(out), (out / "samples.jsonl").read_bytes()
    stamps = {name: (out / name).stat().st_mtime_ns for name in first}

    # the same command again: the dataset is reused, its videos untouched, and the line says none were new
    capsys.readouterr()
    assert _synth(out, 0) == 0
    assert "0 new, 2 already there" in capsys.readouterr().out
    assert {name: (out / name).stat().st_mtime_ns for name in first} == stamps

    # another seed: refused, naming the setting that differs and the way out; nothing written
    assert _synth(out, 1) == 1
    err = capsys.readouterr().err
    assert "holds another synthetic dataset" in err and "seed: 0 there, 1 now" in err and "--replace" in err
    assert _videos(out) == first and (out / "samples.jsonl").read_bytes() == samples

    # --replace: only the new dataset's files remain, and samples.jsonl names exactly them
    assert _synth(out, 1, "--replace") == 0
    assert "replaced the dataset there" in capsys.readouterr().out
    now = _videos(out)
    assert len(now) == 2 and not set(now) & set(first)
    assert sorted(p.name for p in out.iterdir()) == sorted([*now, "samples.jsonl", "synth_config.json"])
    assert sorted(s.video_path.rsplit("/", 1)[-1] for s in load_samples(out)) == now
    assert json.loads((out / "synth_config.json").read_text())["seed"] == 1


def test_fewer_videos_of_the_same_seed_would_orphan_some_so_they_are_refused(tmp_path, capsys):
    out = tmp_path / "synth"
    assert _synth(out, 0) == 0
    assert main(["synth", "--out", str(out), "--seed", "0", *SMALL, "--n", "1"]) == 1
    assert "n: 2 there, 1 now" in capsys.readouterr().err


def test_a_directory_with_other_files_is_never_emptied(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert _synth(out, 0, "--replace") == 1
    err = capsys.readouterr().err
    assert "holds files paravt synth did not write (notes.txt)" in err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    (tmp_path / "afile").write_text("")
    assert _synth(tmp_path / "afile", 0) == 1
    assert "afile is a file, not a directory" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "value", "words"), [
    ("--max-duration", "inf", "argument --max-duration: must be a finite number of seconds > 0, got inf"),
    ("--min-duration", "nan", "argument --min-duration: must be a finite number of seconds > 0, got nan"),
    ("--seed", "-1", "argument --seed: must be >= 0, got -1"),
    ("--n", "0", "argument --n: must be >= 1, got 0"),
    ("--crf", "52", "argument --crf: must be in [0, 51], got 52"),
    ("--workers", "two", "argument --workers: 'two' is not an integer"),
    ("--size", "16", "argument --size: must be >= 32, got 16"),
])  # fmt: skip
def test_every_numeric_flag_is_checked_and_named(tmp_path, capsys, flag, value, words):
    with pytest.raises(SystemExit) as exit_:
        main(["synth", "--out", str(tmp_path / "s"), flag, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()  # refused before anything was written


def test_a_duration_beyond_a_day_is_refused_by_the_config(tmp_path, capsys):
    assert main(["synth", "--out", str(tmp_path / "s"), "--n", "1", "--min-duration", "30", "--max-duration", "1e9"]) == 1
    assert "durations must be finite seconds up to 86400" in capsys.readouterr().err
