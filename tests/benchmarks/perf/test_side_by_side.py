"""``benchmarks/perf/side_by_side.py`` reads the two checkouts' runs: steps 2-6 only, the ratios the new checkout's,
and a difference in any evaluation row reported."""

import json

from benchmarks.perf.side_by_side import main


def write(root, version, step_s, tokens, eval_s, rows):
    run = root / f"{version}_train_1"
    run.mkdir()
    lines = [{"step": 1, "wall_s": 100.0, "train_tokens": 1}] + [{"step": i, "wall_s": step_s, "train_tokens": tokens} for i in range(2, 7)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    ev = root / f"{version}_eval_1"
    ev.mkdir()
    (ev / "summary.json").write_text(json.dumps({"wall_s": eval_s}))
    (ev / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))


def test_ratios_leave_out_the_first_step_and_a_changed_row_is_said(tmp_path, capsys):
    row = {"id": "a", "prediction": "red", "correct": True, "tool_calls": 5}
    write(tmp_path, "ref", 8.0, 2000, 15.0, [row])
    write(tmp_path, "new", 4.0, 3000, 6.0, [{**row, "prediction": "blue"}])
    (tmp_path / "eval_process_s.txt").write_text("ref 1 20.0\nnew 1 10.0\n")
    main(str(tmp_path))
    out = json.loads(capsys.readouterr().out)
    assert out["new_over_ref"] == {"step": 2.0, "per_training_token": 3.0, "eval": 2.5, "eval_process": 2.0}
    assert out["eval_rows_identical"] is False
