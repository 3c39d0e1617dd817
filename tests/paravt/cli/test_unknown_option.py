"""A misspelt flag is named, with the closest known one, instead of argparse naming the flag's value as an invalid
sub-command choice; an interrupt says how to continue."""

import pytest

from paravt.cli import CONTINUE, main


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["eval", "--frame-bugdet", "8", "--policy", "x", "--data", "y", "--out", "z"], "--frame-bugdet (did you mean --frame-budget?)"),
        (["train", "--stpes", "3"], "--stpes (did you mean --steps?)"),
        (["eval", "compare", "a", "b", "--colour=red"], "unrecognized option --colour"),
    ],
)
def test_a_misspelt_flag_is_named(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "invalid choice" not in err


def test_prefixes_argparse_accepts_still_pass(capsys):
    # --frame for --frame-budget is an abbreviation argparse expands: not refused here (the run fails later, on data)
    assert main(["eval", "--frame", "8", "--policy", "detector", "--data", "/no/such/dir", "--out", "/tmp/x"]) == 1
    assert "unrecognized" not in capsys.readouterr().err


def test_every_resumable_command_says_how_to_continue():
    assert {"train", "eval", "repro", "bench"} <= set(CONTINUE) and "--resume" in CONTINUE["train"]


def test_eval_fails_when_no_sample_could_be_scored(tmp_path, capsys):
    import json

    rows = [{"id": f"b{i}", "video_path": str(tmp_path / f"missing{i}.mp4"), "question": "What colour?", "answer": "red"}
            for i in range(3)]  # fmt: skip
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["eval", "--policy", "detector", "--data", str(tmp_path), "--out", str(tmp_path / "out"), "--no-progress"]) == 1
    assert "none of the 3 samples could be scored" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "words"), [
    (["train", "--gpus", "4", "--dry-run"], "--gpus applies to --backend openrlhf"),
    (["train", "--allow-config-change", "--dry-run"], "--allow-config-change applies with --resume"),
    (["train", "--dry-run", "--threads", "0"], "--threads must be an integer >= 1, got 0"),
    (["eval", "--policy", "detector", "--data", "x", "--out", "y", "--max-new-tokens", "5"], "--max-new-tokens applies to model policies"),
    (["bench", "dispatch", "--policy", "detector", "--data", "x", "--out", "y", "--max-new-tokens", "5"], "--max-new-tokens applies to model policies"),
])  # fmt: skip
def test_flags_that_would_be_ignored_are_refused_by_name(capsys, argv, words):
    from paravt.cli import main

    assert main(argv) == 1
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_paravt_has_a_version(capsys):
    from paravt.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith("paravt ")
