"""``PARAVT_*`` environment variables: parsed in one place, refused by name before any work; the orphan watcher
cannot die silently."""

import multiprocessing
import time

import pytest

from paravt.cli import main
from paravt_env.environ import (
    VARIABLES,
    EnvironmentVariableError,
    check_environment,
    directory,
    flag,
    positive_int,
    positive_seconds,
)


@pytest.mark.parametrize("bad", ["-5", "0", "nan", "inf", "-inf", "abc", "1e999"])
def test_seconds_must_be_finite_and_positive(monkeypatch, bad):
    monkeypatch.setenv("PARAVT_ORPHAN_GRACE_S", bad)
    with pytest.raises(EnvironmentVariableError, match=r"PARAVT_ORPHAN_GRACE_S must be a finite number of seconds > 0"):
        positive_seconds("PARAVT_ORPHAN_GRACE_S", 120.0)


def test_good_values_and_defaults(monkeypatch, tmp_path):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert positive_seconds("PARAVT_ORPHAN_GRACE_S", 120.0) == 120.0 and positive_int("PARAVT_THREADS") is None
    assert flag("PARAVT_NATIVE_NUMERICS") is False and directory("PARAVT_CACHE") is None
    monkeypatch.setenv("PARAVT_ORPHAN_GRACE_S", " 1.5 ")
    monkeypatch.setenv("PARAVT_THREADS", "2")
    monkeypatch.setenv("PARAVT_NATIVE_NUMERICS", "1")
    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "new"))
    check_environment()
    assert positive_seconds("PARAVT_ORPHAN_GRACE_S", 120.0) == 1.5 and positive_int("PARAVT_THREADS") == 2
    assert flag("PARAVT_NATIVE_NUMERICS") is True


@pytest.mark.parametrize(("name", "value", "message"), [
    ("PARAVT_THREADS", "two", "PARAVT_THREADS must be an integer >= 1, got 'two'"),
    ("PARAVT_THREADS", "0", "PARAVT_THREADS must be an integer >= 1"),
    ("PARAVT_NATIVE_NUMERICS", "yes", "PARAVT_NATIVE_NUMERICS must be 0 or 1, got 'yes'"),
    ("PARAVT_ORPHAN_GRACE_S", "abc", "PARAVT_ORPHAN_GRACE_S must be a finite number of seconds > 0, got 'abc'"),
])  # fmt: skip
def test_every_command_refuses_a_bad_variable_by_name_before_any_work(monkeypatch, tmp_path, capsys, name, value, message):
    monkeypatch.setenv(name, value)
    out = tmp_path / "synth"
    assert main(["synth", "--out", str(out), "--n", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()  # nothing was done


def test_a_cache_that_is_a_file_is_refused(monkeypatch, tmp_path):
    blocker = tmp_path / "cache"
    blocker.write_text("x")
    monkeypatch.setenv("PARAVT_CACHE", str(blocker))
    with pytest.raises(EnvironmentVariableError, match="PARAVT_CACHE=.* is a file"):
        check_environment()


def _child_whose_watcher_fails() -> None:
    import multiprocessing.connection

    from paravt.experiments.repro.jobs import watch_parent

    def broken(*_args, **_kwargs):
        raise RuntimeError("the sentinel could not be waited on")

    multiprocessing.connection.wait = broken
    watch_parent(grace_s=60.0)
    time.sleep(30)  # an unwatched orphan would sleep on; the failed watcher ends it at once


def test_a_watcher_that_fails_ends_its_worker_rather_than_die_silently():
    proc = multiprocessing.get_context("fork").Process(target=_child_whose_watcher_fails)
    start = time.monotonic()
    proc.start()
    proc.join(20)
    assert proc.exitcode == 143 and time.monotonic() - start < 20
