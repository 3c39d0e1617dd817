"""paravt.learners.threads: the thread count comes from --threads, then PARAVT_THREADS, then half the usable
cores; a bad value is refused naming where it came from; the commands that run a model set it."""

import logging

import pytest

from paravt.cli import main
from paravt.learners import threads as th


@pytest.fixture
def restore_threads():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    yield torch
    torch.set_num_threads(before)


@pytest.mark.parametrize(("cores", "workers", "expected"), [(1, 1, 1), (2, 1, 1), (16, 1, 8), (16, 2, 4), (16, 32, 1)])
def test_the_default_is_half_the_usable_cores_shared_by_the_jobs(monkeypatch, cores, workers, expected):
    monkeypatch.delenv(th.ENV, raising=False)
    monkeypatch.setattr(th, "available_cpus", lambda: cores)
    assert th.resolve_threads(None, workers)[0] == expected


def test_the_flag_wins_over_the_variable_which_wins_over_the_default(monkeypatch):
    monkeypatch.setenv(th.ENV, "3")
    assert th.resolve_threads(5) == (5, "--threads")
    assert th.resolve_threads(None) == (3, th.ENV)


@pytest.mark.parametrize("bad", ["0", "-2", "two", "1.5"])
def test_a_bad_variable_is_refused_naming_it(monkeypatch, bad):
    monkeypatch.setenv(th.ENV, bad)
    with pytest.raises(ValueError, match=th.ENV):
        th.resolve_threads(None)


def test_a_bad_flag_is_one_line_naming_it(synth_small, tmp_path, capsys):
    data, _ = synth_small
    assert main(["eval", "--policy", "hf:nowhere", "--data", str(data), "--out", str(tmp_path), "--threads", "0"]) == 1
    err = capsys.readouterr().err
    assert "--threads must be an integer >= 1" in err and "Traceback" not in err


def test_eval_of_a_model_runs_with_the_threads_asked(synth_small, tiny_qwen3, tmp_path, restore_threads, caplog):
    torch = restore_threads
    data, _ = synth_small
    want = 2 if torch.get_num_threads() != 2 else 1
    with caplog.at_level(logging.INFO, logger="paravt.learners.threads"):
        code = main(["eval", "--policy", f"hf:{tiny_qwen3}", "--data", str(data), "--out", str(tmp_path / "e"),
                     "--limit", "1", "--max-new-tokens", "8", "--threads", str(want), "--no-progress"])  # fmt: skip
    assert code == 0 and torch.get_num_threads() == want
    assert f"torch threads: {want} (--threads)" in caplog.text
