"""paravt.experiments.repro.step1: seed lists and a clear error for a directory that is not a cold start."""

import argparse

import pytest

from paravt.experiments.repro.step1 import main, seed_range


def test_seed_ranges_and_lists():
    assert seed_range("3-6") == [3, 4, 5, 6]
    assert seed_range("0,5,7") == [0, 5, 7]
    assert seed_range("2") == [2]
    for bad in ("3-", "a,b", "9-3", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="expected a range"):
            seed_range(bad)


def test_malformed_seeds_are_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--coldstart", str(tmp_path), "--seeds", "x-y"])
    assert exit_.value.code == 2 and "expected a range" in capsys.readouterr().err


def test_a_directory_without_a_saved_cold_start_is_refused(tmp_path, capsys):
    assert main(["--coldstart", str(tmp_path), "--seeds", "0"]) == 1
    assert "not a saved cold start" in capsys.readouterr().err
