import json

from paravt.cli import main


def test_bench_dispatch_cli_writes_json_markdown_and_png(synth_small, tmp_path, capsys):
    data, _ = synth_small
    out = tmp_path / "dispatch.json"
    rc = main(["bench", "dispatch", "--data", str(data), "--policy", "detector", "--frame-budget", "4",
               "--max-turns", "3", "--out", str(out), "--no-progress"])  # fmt: skip
    assert rc == 0
    results = json.loads(out.read_text())
    assert set(results) == {"parallel", "sequential", "no_tool"}
    for r in results.values():
        assert {"accuracy", "mean_turns", "mean_tool_calls", "wall_s", "n"} <= set(r)
        assert r["n"] == 8
    assert results["no_tool"]["mean_tool_calls"] == 0
    assert results["sequential"]["mean_tool_calls"] <= 2
    assert results["parallel"]["accuracy"] >= results["no_tool"]["accuracy"]
    assert "| parallel | detector |" in out.with_suffix(".md").read_text()
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| sequential |" in capsys.readouterr().out


def test_bench_dispatch_rejects_unknown_policy(synth_small, tmp_path, capsys):
    data, _ = synth_small
    rc = main(["bench", "dispatch", "--data", str(data), "--policy", "nope", "--out", str(tmp_path / "x.json")])
    assert rc == 1
    assert "'nope'" in capsys.readouterr().err


def test_bench_dispatch_counts_a_corrupt_video_as_an_error_row_like_eval(synth_small, tmp_path, capsys):
    import pytest

    data, _ = synth_small
    rows = [json.loads(x) for x in (data / "samples.jsonl").read_text().splitlines()][:2]
    for r in rows:
        r["video_path"] = str(data / r["video_path"])
    (tmp_path / "corrupt.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"junk" * 100)
    rows.append({**rows[0], "id": "broken", "video_path": str(tmp_path / "corrupt.mp4")})
    listing = tmp_path / "samples.jsonl"
    listing.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "d.json"
    with pytest.warns(UserWarning, match="sample 'broken' not played.*corrupt.mp4"):
        assert main(["bench", "dispatch", "--data", str(listing), "--frame-budget", "4", "--out", str(out), "--no-progress"]) == 0
    results = json.loads(out.read_text())
    # one denominator with paravt eval: the broken row is in n and scores 0
    assert all(r["n"] == 3 and r["errors"] == 1 and r["failed"] == ["broken"] for r in results.values())
    assert main(["eval", "--policy", "detector", "--data", str(listing), "--frame-budget", "4", "--out",
                 str(tmp_path / "ev"), "--no-progress"]) == 0  # fmt: skip
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert (summary["n"], summary["errors"]) == (3, 1)
    assert abs(summary["accuracy"] - results["parallel"]["accuracy"]) < 1e-9
    only_bad = tmp_path / "bad.jsonl"
    only_bad.write_text(json.dumps(rows[-1]) + "\n")
    capsys.readouterr()
    with pytest.warns(UserWarning):
        assert main(["bench", "dispatch", "--data", str(only_bad), "--out", str(tmp_path / "e.json"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "no sample could be played" in err and "Traceback" not in err
