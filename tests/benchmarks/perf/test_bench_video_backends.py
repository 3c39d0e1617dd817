"""The video benchmark runs where decord is missing (Python 3.12, the GPU machine, has no decord wheel): decord's
rows and the decord-based reference skip, saying why, instead of failing with an ImportError, and the PyAV rows
still run."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "perf" / "test_bench_video.py"


def _load_without_decord(monkeypatch):
    monkeypatch.setitem(sys.modules, "decord", None)  # None in sys.modules: decord does not import
    spec = importlib.util.spec_from_file_location("bench_video_without_decord", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_decord_rows_skip_and_pyav_rows_stay_where_decord_is_missing(monkeypatch):
    bench = _load_without_decord(monkeypatch)
    assert not bench.HAS_DECORD
    pyav, decord = bench.BACKENDS
    assert pyav == "pyav"  # unmarked: it runs
    (mark,) = decord.marks
    assert decord.values == ("decord",) and mark.name == "skipif" and mark.args == (True,)
    assert mark.kwargs["reason"] == "decord is not installed"
    with pytest.raises(pytest.skip.Exception, match="decodes with decord, which is not installed"):
        bench._reference_fetch_video()


def test_every_backend_parametrisation_uses_the_guarded_list():
    text = BENCH.read_text()
    assert '["pyav", "decord"]' not in text and text.count('parametrize("backend", BACKENDS)') == 5
