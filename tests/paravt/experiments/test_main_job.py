"""paravt.experiments.main_job: per-seed figures, the mean over seeds with its t-interval, the table."""

import json

import pytest

from paravt.experiments.main_job import main, summarise, to_markdown


def _run(root, seed, cold, rl):
    run = root / f"seed{seed}"
    for name, acc in (("eval_coldstart", cold), ("eval", rl)):
        (run / name).mkdir(parents=True)
        (run / name / "summary.json").write_text(json.dumps({"accuracy": acc, "avg_tool_calls": 2 * acc,
                                                            "tool_usage_rate": acc, "n": 40}))  # fmt: skip
    (run / "config.json").write_text(json.dumps({"seed": seed}))
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": i, "accuracy": rl, "tool_calls_per_rollout": 1.0,
                                                          "format_compliance": 1.0}) + "\n" for i in (1, 2)))  # fmt: skip
    return run


def test_the_mean_over_seeds_and_its_95_percent_interval(tmp_path):
    runs = [_run(tmp_path, s, c, r) for s, c, r in ((0, 0.5, 0.9), (1, 0.4, 0.6), (2, 0.45, 0.75))]
    data = summarise(runs)
    rl = data["mean"]["RL"]["accuracy"]
    assert data["seeds"] == ["0", "1", "2"] and rl["values"] == [0.9, 0.6, 0.75]
    assert rl["mean"] == pytest.approx(0.75) and rl["ci95"] == pytest.approx(4.303 * 0.15 / 3**0.5)
    assert data["mean"]["RL"]["follows"] is None  # no counterfactual evaluation in these runs
    table = to_markdown(data)
    assert "| RL | 0.750 ± 0.373 (0.900, 0.600, 0.750) |" in table and table.count("\n") == 5
    gain = data["mean"]["RL − cold start, paired"]["accuracy"]
    assert gain["values"] == pytest.approx([0.4, 0.2, 0.3]) and gain["mean"] == pytest.approx(0.3)
    assert gain["ci95"] == pytest.approx(4.303 * 0.1 / 3**0.5)
    assert data["curves"]["1"] == {"step": [1, 2], "accuracy": [0.6, 0.6], "tool_calls_per_rollout": [1.0, 1.0],
                                   "format_compliance": [1.0, 1.0]}  # fmt: skip
    # the committed JSON alone redraws the picture and the table
    (tmp_path / "figures.json").write_text(json.dumps(data))
    assert main(["--from", str(tmp_path / "figures.json"), "--figure", str(tmp_path / "fig.png")]) == 0
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"


def test_a_run_without_its_evaluations_is_one_line(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    assert main([str(tmp_path / "x")]) == 1
    assert "is missing" in capsys.readouterr().err


def test_the_picture_draws_each_seed_apart(tmp_path, monkeypatch):
    """The README's figure: every seed's held-out accuracy at its own place across its bar, in the colour of its
    curves, with a legend (seeds with equal values were drawn, labels and all, over each other)."""
    import matplotlib.pyplot as plt

    from paravt.experiments.main_job import plot

    runs = [_run(tmp_path, s, 0.4, 0.975) for s in range(4)]  # four seeds, one value: the case that overlapped
    monkeypatch.setattr(plt, "close", lambda fig: None)  # keep the figure to read it back
    plot(summarise(runs), tmp_path / "fig.png")
    left, middle = plt.gcf().axes[:2]
    points = [line for line in left.lines if line.get_marker() == "o"]
    for policy_x in (0, 1):
        xs = [float(line.get_xdata()[0]) for line in points if round(float(line.get_xdata()[0])) == policy_x]
        assert len(xs) == 4 and min(b - a for a, b in zip(sorted(xs), sorted(xs)[1:], strict=False)) > 0.1
    assert [t.get_text() for t in left.get_legend().get_texts()] == [f"seed {s}" for s in range(4)]
    colour = {line.get_label(): line.get_color() for line in middle.lines}
    assert all(line.get_markerfacecolor() == colour[f"seed {i % 4}"] for i, line in enumerate(points))
    plt.close("all")


def test_the_selected_checkpoint_is_the_headline_where_every_run_selected_one(tmp_path):
    """A run with a validation selection (``RUN/eval_selected``, ``RUN/select/best.json``) reports three policies, and
    the paired row is the selected checkpoint's gain; a run without one among them keeps the last step's headline."""
    runs = [_run(tmp_path, s, 0.4, r) for s, r in ((0, 0.75), (1, 0.9))]
    for run, (acc, step) in zip(runs, ((0.975, 30), (0.95, 60)), strict=True):
        (run / "eval_selected").mkdir()
        (run / "eval_selected" / "summary.json").write_text(json.dumps({"accuracy": acc, "avg_tool_calls": 1.0,
                                                                       "tool_usage_rate": 0.5, "n": 40}))  # fmt: skip
        (run / "select").mkdir()
        (run / "select" / "best.json").write_text(json.dumps({"step": step, "accuracy": 0.9, "n": 40}))
    data = summarise(runs)
    assert data["headline"] == "RL, selected" and data["selected_steps"] == {"0": 30, "1": 60}
    assert list(data["mean"]) == ["cold start", "RL", "RL, selected", "RL, selected − cold start, paired"]
    assert data["mean"]["RL, selected − cold start, paired"]["accuracy"]["values"] == pytest.approx([0.575, 0.55])
    table = to_markdown(data)
    assert "| RL, selected | 0.962 ± " in table and "| RL, selected − cold start, paired | 0.562" in table
    main([*map(str, runs), "--figure", str(tmp_path / "fig.png")])
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"
    # one run without a selection: every run's last step is the headline
    runs.append(_run(tmp_path, 2, 0.4, 0.8))
    data = summarise(runs)
    assert "headline" not in data and list(data["mean"]) == ["cold start", "RL", "RL − cold start, paired"]
