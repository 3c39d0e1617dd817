"""The pictures of a result: ``RUN/result.png`` puts the cold start against RL (held-out accuracy, crops where the
overview missed the needle and where it showed it, the recoloured check), read from the run's evaluations; an
evaluation's ``report.png`` adds the overview split to its accuracy panels."""

import json

import matplotlib.pyplot as plt
import pytest

from paravt.evaluation.heldout import plot_result, result_figures
from paravt.evaluation.report import write_report


def _summary(accuracy, crops_missed, crops_showed):
    return {"n": 40, "accuracy": accuracy, "correct_rate": accuracy, "avg_tool_calls": crops_missed * 0.7,
            "tool_usage_rate": 0.7, "avg_turns": 1.5, "errors": 0, "failed": [], "wall_s": 1.0,
            "by_question_type": {"oe": {"n": 40, "accuracy": accuracy, "avg_tool_calls": 1.0}},
            "by_duration": {"0-2 min": {"n": 32, "accuracy": accuracy}, "2-10 min": {"n": 8, "accuracy": accuracy}},
            "by_overview": {"showed": {"n": 12, "accuracy": 1.0, "avg_tool_calls": crops_showed, "tool_usage_rate": 0.0},
                            "missed": {"n": 28, "accuracy": accuracy, "avg_tool_calls": crops_missed, "tool_usage_rate": 1.0}}}  # fmt: skip


@pytest.fixture
def run(tmp_path):
    for name, summary in (("eval_coldstart", _summary(0.45, 0.0, 0.0)), ("eval", _summary(0.975, 4.46, 0.0))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(summary))
    return tmp_path


def _bars(ax):
    return [round(p.get_height(), 3) for p in ax.patches]


def test_the_result_picture_puts_the_cold_start_against_rl(run, monkeypatch):
    figures = result_figures(run)
    assert list(figures) == ["cold start", "RL"]
    assert figures["RL"]["by_overview"]["missed"] == {"n": 28, "crops": 4.46, "accuracy": 0.975}
    assert figures["RL"]["follows"] is None  # no recoloured evaluation in this run
    monkeypatch.setattr(plt, "close", lambda fig: None)  # keep the figure to read it back
    path = plot_result(run, title="run")
    assert path == run / "result.png" and path.read_bytes()[:4] == b"\x89PNG"
    accuracy, crops, recoloured = plt.gcf().axes
    assert _bars(accuracy) == [0.45, 0.975]
    assert _bars(crops) == [0.0, 0.0, 4.46, 0.0]  # cold start missed / showed, then RL missed / showed
    assert [t.get_text() for t in crops.get_xticklabels()] == ["overview missed it (28)", "overview showed it (12)"]
    assert {t.get_text() for t in recoloured.texts} == {"n/a"}  # said, not drawn as 0
    plt.close("all")


def test_an_evaluation_report_shows_where_the_overview_missed(run, monkeypatch):
    monkeypatch.setattr(plt, "close", lambda fig: None)
    write_report(_summary(0.975, 4.46, 0.0), run)
    axes = plt.gcf().axes
    assert len(axes) == 4  # question type, duration, the overview split and its crops axis
    assert _bars(axes[2]) == [0.975, 1.0] and _bars(axes[3]) == [4.46, 0.0]
    plt.close("all")
