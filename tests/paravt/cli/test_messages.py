"""What the commands say, as a newcomer reads it: a warning is one line naming the command (no source path, no
``UserWarning``), said once; an OS error names the path and what is wrong with it (no ``[Errno 17]``); a data
directory with nothing in it is described, not listed as ``[]``; a rerun over a finished evaluation says that
nothing ran."""

import logging
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from paravt.cli import main, said_once

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def data(synth_small, tmp_path):
    """A copy of the small synthetic set, three samples, one of whose videos is missing."""
    src, samples = synth_small
    out = tmp_path / "data"
    out.mkdir()
    lines = (src / "samples.jsonl").read_text().splitlines()[:3]
    (out / "samples.jsonl").write_text("\n".join(lines) + "\n")
    for s in samples[1:3]:
        shutil.copy(s.video_path, out)
    return out


def test_a_warning_is_one_line_naming_the_command_and_the_finished_rerun_says_nothing_ran(data, tmp_path):
    out = tmp_path / "eval"
    argv = [sys.executable, "-m", "paravt", "eval", "--policy", "no_tool", "--data", str(data), "--out", str(out),
            "--frame-budget", "4", "--no-progress"]  # fmt: skip
    # as a user runs it (a fresh interpreter: pytest records warnings instead of printing them)
    got = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    warned = [line for line in got.stderr.splitlines() if "video not found" in line]
    assert warned == [warned[0]] and warned[0].startswith("paravt eval: warning: kept 1 of 3 samples")
    assert "UserWarning" not in got.stderr and ".py:" not in got.stderr
    assert got.stdout.rstrip().endswith(f"{out}: 3 samples scored now")

    # the same command again: the table is reprinted and the line says it is the earlier rows'
    again = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and got.stdout.split("\n\n")[0] in again.stdout
    assert again.stdout.rstrip().endswith(f"{out}: nothing to evaluate, 3 rows already scored (the table is theirs)")


def test_a_file_where_a_directory_is_needed_is_said_so(data, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    for out in (afile, afile / "below"):
        assert main(["eval", "--policy", "no_tool", "--data", str(data), "--out", str(out), "--no-progress"]) == 1
        err = capsys.readouterr().err
        assert f"paravt eval: error: {afile} is a file where a directory is needed" in err and "Errno" not in err


def test_an_empty_data_directory_is_described_not_listed(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["eval", "--policy", "no_tool", "--data", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "holds no samples.jsonl and no data file" in err and "[]" not in err
    (tmp_path / "empty" / "rows.jsonl").write_text("")
    assert main(["eval", "--policy", "no_tool", "--data", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 1
    assert "pass one of its files instead: rows.jsonl" in capsys.readouterr().err


def test_every_warning_is_said_once(caplog):
    log = logging.getLogger("paravt.test")
    with caplog.at_level(logging.INFO), said_once("train"):
        texts = []
        for _ in range(2):
            log.warning("resuming the cold start from RUN: perception at step 3/600")
            log.info("step done")
            texts.append(warnings.formatwarning("skipped 2 rows", UserWarning, "/src/paravt/x.py", 12))
    assert [r.getMessage() for r in caplog.records].count("resuming the cold start from RUN: perception at step 3/600") == 1
    assert [r.getMessage() for r in caplog.records].count("step done") == 2  # information is not deduplicated
    assert texts == ["paravt train: warning: skipped 2 rows\n", ""]  # one line, no source path, then nothing
    assert "UserWarning" in warnings.formatwarning("x", UserWarning, "/src/x.py", 1)  # Python's own again after
    log.warning("resuming the cold start from RUN: perception at step 3/600")  # the next command says it again
    assert [r.getMessage() for r in caplog.records].count("resuming the cold start from RUN: perception at step 3/600") == 2
