import json

from scripts.cli import main


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
