"""benchmarks.gpu.openrlhf_episode plays the OpenRLHF executor's episode and checks its alignment (here: CPU, tiny)."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("openrlhf.utils.agent")

from benchmarks.gpu.openrlhf_episode import main  # noqa: E402

TINY = ["model.size=tiny", "model.device=cpu", "model.dtype=fp32", "env.frame_budget=4", "rollout.max_new_tokens=32",
        "data.synth_n=1", "data.size=112", "data.min_duration=70", "data.max_duration=80"]  # fmt: skip


@pytest.mark.parametrize("engine", ["scripted", "sampled"])
def test_the_episode_lines_up_and_is_reported(engine, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "report.json"
    assert main(["--engine", engine, "--out", str(out), *TINY]) == 0
    report = json.loads(out.read_text())
    assert report["problems"] == [] and report["action_tokens"] > 0 and report["max_abs_diff"] < 1e-4
    assert report["tolerance"] == 1e-4 and report["size"] == "tiny"
    if engine == "scripted":
        assert report["kappa"] == 2.0 and len(report["action_ranges"]) == 2  # the parallel calls ran
    assert "max |Δ log-prob|" in capsys.readouterr().out


def test_a_log_prob_off_by_more_than_the_tolerance_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    assert main(["--engine", "sampled", "--tolerance", "0", *TINY]) == 1  # a KV-cached generation vs one pass: rounding
    assert "NOT ALIGNED: max |Δ log-prob|" in capsys.readouterr().out
