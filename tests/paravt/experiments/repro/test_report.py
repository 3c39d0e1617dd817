"""``paravt repro`` end to end at smoke scale: shared cold start, two arms (trained at once, ``--jobs 2``),
evaluation, report, resume."""

import json

from paravt.cli import main
from paravt.experiments.repro.report import halved_at

FAST = ["sft.steps=4", "sft.episodes=4", "rollout.group_size=2", "rollout.prompts_per_step=1",
        "rollout.max_new_tokens=24", "data.synth_n=3", "perception.steps=2", "perception.videos=2",
        "data.heldout_n=2", "env.max_turns=2"]  # fmt: skip


def test_repro_smoke_resumes_and_reports(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "repro"
    args = ["repro", "--out", str(out), "--arms", "vanilla_grpo,para_grpo", "--seeds", "0", "--steps", "1",
            "--no-progress", *FAST]  # fmt: skip
    assert main([*args, "--jobs", "2"]) == 0
    cold = out / "coldstart" / "coldstart" / "model" / "paravt.json"
    assert cold.is_file()
    for arm in ("vanilla_grpo", "para_grpo"):
        run = out / "arms" / arm / "seed0"
        config = json.loads((run / "config.json").read_text())
        assert config["model"]["path"] == str(cold.parent) and config["sft"]["steps"] == 0
        for d in ("parallel", "sequential"):
            assert json.loads((run / f"eval_{d}" / "summary.json").read_text())["n"] == 2
    report = (out / "report.md").read_text()
    for part in ("(A) Format", "(B) Tool use", "(C) Held-out accuracy", "Which of the paper's directions",
                 "| PARA-GRPO |", "| Vanilla GRPO |", "0.13"):  # fmt: skip
        assert part in report, part
    assert (out / "report.png").read_bytes()[:4] == b"\x89PNG"
    assert "opposite direction" not in report  # equal figures (0 vs 0 here) are not a contradiction
    mtime = cold.stat().st_mtime
    # rerun: nothing is retrained, the report is rewritten; changed shared settings are refused
    assert main(args) == 0 and cold.stat().st_mtime == mtime
    assert main([*args[:-len(FAST)], *FAST[:-1]]) == 1
    assert "other settings" in capsys.readouterr().err
    # --report-only rewrites the report under the settings the run was made with
    (out / "report.md").unlink()
    assert main(["repro", "--out", str(out), "--report-only"]) == 0
    assert "sft.steps=4" in (out / "report.md").read_text() and "seeds: 0;" in (out / "report.md").read_text()
    # a report directory that keeps only the summaries (as docs/repro/ does) still reports the cold start
    assert "| cold start (shared) |" in (out / "report.md").read_text()
    (out / "coldstart" / "eval_parallel" / "results.jsonl").unlink()
    assert main(["repro", "--out", str(out), "--report-only"]) == 0
    assert "| cold start (shared) |" in (out / "report.md").read_text()
    assert main(["repro", "--out", str(tmp_path / "none"), "--report-only"]) == 1


def test_halved_at_finds_the_step_where_tool_use_fell_to_half():
    # early mean 1.0; the 10-step running mean first drops below 0.5 when 6 zeros have entered the window
    assert halved_at([1.0] * 10 + [0.0] * 20) == 16
    assert halved_at([1.0] * 30) is None  # never fell
    assert halved_at([0.0] * 30) is None  # nothing to halve
    assert halved_at([1.0] * 5) is None  # too short to say
    assert halved_at([2.0, None] * 10 + [0.0] * 10, window=4) == 13  # missing steps are skipped
