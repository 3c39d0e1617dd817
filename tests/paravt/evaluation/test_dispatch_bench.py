"""``paravt bench dispatch``: both dispatch modes at matched crop budgets, each cell a resumable ``paravt eval``
run, accuracy and cost with their intervals, and paired differences."""

import json

import pytest

from paravt.cli import main
from paravt.evaluation.dispatch_bench import parse_budgets
from paravt.evaluation.store import read_results


def test_both_modes_spend_the_same_budget_and_the_costs_are_the_records(synth_small, tmp_path, capsys):
    data, samples = synth_small
    out = tmp_path / "dispatch"
    argv = ["bench", "dispatch", "--data", str(data), "--policy", "detector", "--frame-budget", "4", "--crop-budget", "1,3",
            "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    results = json.loads((out / "dispatch.json").read_text())
    assert results["budgets"] == [1, 3] and results["n"] == len(samples)
    cells = {(c["mode"], c["crop_budget"]): c for c in results["cells"]}
    assert set(cells) == {("parallel", 1), ("sequential", 1), ("parallel", 3), ("sequential", 3)}
    for (mode, budget), cell in cells.items():
        rows = read_results(out / f"{mode}_budget{budget}" / "results.jsonl")
        assert len(rows) == cell["n"] == len(samples)
        for r in rows:  # the budget holds in both modes, and the cost columns are what the records show
            turns = r["episode"]["turns"]
            crops = sum(c["status"] == "executed" for t in turns for c in t["crops"])
            assert crops <= budget and len(turns) <= budget + 1
            if mode == "sequential":
                assert all(sum(c["status"] == "executed" for c in t["crops"]) <= 1 for t in turns)
            assert r["episode"]["cost"]["crops"] == crops and r["episode"]["cost"]["turns"] == len(turns)
        assert cell["crops"]["mean"] == pytest.approx(sum(r["episode"]["cost"]["crops"] for r in rows) / len(rows))
        assert cell["accuracy"]["ci95"] is not None and cell["generated_tokens"] is None
    # at budget 3 the detector spends more crops than at 1 in both modes, and sequential needs more turns for them
    for mode in ("parallel", "sequential"):
        assert cells[mode, 3]["crops"]["mean"] > cells[mode, 1]["crops"]["mean"]
    assert cells["sequential", 3]["turns"]["mean"] > cells["parallel", 3]["turns"]["mean"]
    diff = {d["crop_budget"]: d for d in results["parallel_minus_sequential"]}
    assert diff[3]["n"] == len(samples)
    assert diff[3]["turns"]["mean"] == pytest.approx(cells["parallel", 3]["turns"]["mean"] - cells["sequential", 3]["turns"]["mean"])
    assert results["no_tool"]["crops"]["mean"] == 0
    assert "| sequential | 3 |" in (out / "dispatch.md").read_text() and "| sequential | 3 |" in capsys.readouterr().out
    assert (out / "dispatch.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # resumable like paravt eval: a rerun plays nothing again and gives the same table
    before = {p: read_results(p) for p in out.glob("*/results.jsonl")}
    assert main(argv) == 0
    assert {p: read_results(p) for p in out.glob("*/results.jsonl")} == before  # the same rows, none played again
    assert json.loads((out / "dispatch.json").read_text())["cells"] == results["cells"]


def test_a_model_policy_is_benchmarked_with_its_tokens(synth_small, tiny_qwen3, tmp_path):
    data, _ = synth_small
    out = tmp_path / "model"
    assert main(["bench", "dispatch", "--data", str(data), "--policy", f"hf:{tiny_qwen3}", "--frame-budget", "4",
                 "--crop-budget", "2", "--limit", "2", "--max-new-tokens", "16", "--out", str(out), "--no-progress"]) == 0  # fmt: skip
    results = json.loads((out / "dispatch.json").read_text())
    assert results["no_tool"] is None  # a model policy has no scripted floor in its table, but
    # the no-tool pass played first, at the cells' K, so that no cell paid for opening the videos
    warm = out / "no_tool"
    assert len(read_results(warm / "results.jsonl")) == 2
    assert json.loads((warm / "eval_config.json").read_text())["frame_budget"] == 4
    cells = [out / f"{m}_budget2" / "results.jsonl" for m in ("parallel", "sequential")]
    assert all((warm / "results.jsonl").stat().st_mtime_ns <= c.stat().st_mtime_ns for c in cells)
    for cell in results["cells"]:
        assert cell["n"] == 2 and cell["generated_tokens"]["mean"] > 0 and cell["prompt_tokens"]["mean"] > 0
        assert cell["model_calls"]["mean"] == cell["turns"]["mean"]


def test_bad_budgets_and_policies_are_refused_with_one_line(synth_small, tmp_path, capsys):
    data, _ = synth_small
    for bad in ("0,2", "2,2", "a,b", ""):
        with pytest.raises(ValueError, match="--crop-budget"):
            parse_budgets(bad)
    assert main(["bench", "dispatch", "--data", str(data), "--policy", "nope", "--out", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert "'nope'" in err and "Traceback" not in err
    assert main(["bench", "dispatch", "--data", str(data), "--crop-budget", "1,x", "--out", str(tmp_path / "y")]) == 1
    assert "--crop-budget" in capsys.readouterr().err


def test_a_corrupt_video_is_an_error_row_counted_like_eval(synth_small, tmp_path):
    data, _ = synth_small
    rows = [json.loads(x) for x in (data / "samples.jsonl").read_text().splitlines()][:2]
    for r in rows:
        r["video_path"] = str(data / r["video_path"])
    (tmp_path / "corrupt.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"junk" * 100)
    rows.append({**rows[0], "id": "broken", "video_path": str(tmp_path / "corrupt.mp4")})
    listing = tmp_path / "samples.jsonl"
    listing.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "d"
    assert main(["bench", "dispatch", "--data", str(listing), "--frame-budget", "4", "--crop-budget", "2", "--out", str(out),
                 "--no-progress"]) == 0  # fmt: skip
    results = json.loads((out / "dispatch.json").read_text())
    # one denominator with paravt eval: the broken row is in n and scores 0
    assert all(c["n"] == 3 and c["errors"] == 1 for c in results["cells"])
    assert main(["eval", "--policy", "detector", "--data", str(listing), "--frame-budget", "4", "--crop-budget", "2",
                 "--out", str(tmp_path / "ev"), "--no-progress"]) == 0  # fmt: skip
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    parallel = next(c for c in results["cells"] if c["mode"] == "parallel")
    assert (summary["n"], summary["errors"]) == (3, 1)
    assert summary["accuracy"] == pytest.approx(parallel["accuracy"]["mean"])


def test_cells_interleave_in_abba_order_over_chunks_of_the_samples():
    from paravt.evaluation.dispatch_bench import chunk_ends, interleaved_order

    order = interleaved_order(["p1", "s1", "p2", "s2"], 3)
    assert [c for _, c in order] == ["p1", "s1", "p2", "s2", "s2", "p2", "s1", "p1", "p1", "s1", "p2", "s2"]
    assert [r for r, _ in order] == [0] * 4 + [1] * 4 + [2] * 4
    assert chunk_ends(10, 3) == [3, 7, 10] and chunk_ends(2, 2) == [1, 2]


def test_the_pareto_front_keeps_what_nothing_beats():
    from paravt.evaluation.dispatch_bench import pareto_front

    points = [(1.0, 0.5), (2.0, 0.9), (3.0, 0.8), (2.0, 0.4), (4.0, 0.95)]
    assert pareto_front(points) == [(1.0, 0.5), (2.0, 0.9), (4.0, 0.95)]


def test_a_turn_budget_axis_on_the_multi_event_family(synth_two_colours, tmp_path):
    """On two_colours, at one crop budget the modes answer alike with budget + 1 turns, and at a turn budget of 2
    the sequential mode loses what parallel dispatch's one turn of crops finds; every cell reports visual tokens,
    the critical path, latency percentiles and the load it ran under, and the figure is written."""
    data, samples = synth_two_colours
    out = tmp_path / "turns"
    argv = ["bench", "dispatch", "--data", str(data), "--policy", "detector", "--frame-budget", "8", "--crop-budget", "4",
            "--turn-budget", "2", "--rounds", "3", "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    results = json.loads((out / "dispatch.json").read_text())
    assert results["turn_budgets"] == [2] and results["rounds"] == 3 and results["cores"] >= 1
    cells = {(c["mode"], c["turn_budget"]): c for c in results["cells"]}
    assert set(cells) == {("parallel", 2), ("sequential", 2)}
    for (mode, _), cell in cells.items():
        rows = read_results(out / f"{mode}_budget4_turns2" / "results.jsonl")
        assert len(rows) == len(samples) and all(len(r["episode"]["turns"]) <= 2 for r in rows)
        assert cell["visual_tokens"]["mean"] > 0 and cell["critical_path"]["mean"] >= cell["turns"]["mean"]
        assert cell["wall_s_p50"] <= cell["wall_s_p95"] and "load" in cell
    assert cells["parallel", 2]["accuracy"]["mean"] > cells["sequential", 2]["accuracy"]["mean"]
    diff = results["parallel_minus_sequential"][0]
    assert diff["turn_budget"] == 2 and diff["disagree"] > 0 and diff["accuracy"]["mean"] > 0
    assert "| sequential | 4 | 2 |" in (out / "dispatch.md").read_text()
    assert (out / "dispatch.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="--turn-budget"):
        parse_budgets("0", "--turn-budget")
