import json
import os
import shutil

import pytest

from paravt.baselines import make_baseline
from paravt.cli import main
from paravt.evaluation.harness import evaluate
from paravt.evaluation.report import summarize
from paravt.evaluation.scoring import grounding_span, score_prediction
from paravt.evaluation.store import read_results
from paravt_env import EnvConfig
from paravt_env.data import VideoQASample


@pytest.mark.parametrize(
    ("pred", "gt", "qt", "score"),
    [
        ("B", "B", "mcq", 1.0),
        ("(B) a red circle", "B", "mcq", 1.0),
        ("C", "B", "mcq", 0.0),
        ("", "B", "mcq", 0.0),
        ("[10, 20]", "[15, 25]", "tvg", 5 / 15),
        ("10.0 - 20.0 seconds", "[10, 20]", "tvg", 1.0),
        ("from 12 to 18", "[10, 20]", "tvg", 0.6),
        ("never", "[10, 20]", "tvg", 0.0),
        ("a red square", "red circle", "oe", 0.5),
    ],
)
def test_scoring(pred, gt, qt, score):
    assert score_prediction(pred, gt, qt) == pytest.approx(score)


def test_grounding_span_forms():
    assert grounding_span("[1.5, 2.5]") == (1.5, 2.5)
    assert grounding_span("12.0s - 18.5s") == (12.0, 18.5)
    assert grounding_span("no span") is None


def test_summary_numbers():
    rows = [
        {"id": "a", "question_type": "mcq", "duration": 60, "score": 1.0, "correct": True, "tool_calls": 2, "turns": 2, "wall_s": 1, "error": None},
        {"id": "b", "question_type": "mcq", "duration": 700, "score": 0.0, "correct": False, "tool_calls": 0, "turns": 1, "wall_s": 1, "error": "boom"},
        {"id": "c", "question_type": "tvg", "duration": 200, "score": 0.6, "correct": True, "tool_calls": 3, "turns": 3, "wall_s": 1, "error": None},
        {"id": "d", "question_type": "tvg", "duration": 200, "score": 0.4, "correct": False, "tool_calls": 0, "turns": 1, "wall_s": 1, "error": None},
    ]  # fmt: skip
    s = summarize(rows)
    assert s["n"] == 4 and s["errors"] == 1
    assert s["accuracy"] == pytest.approx(0.5)
    assert s["avg_tool_calls"] == pytest.approx(1.25) and s["tool_usage_rate"] == 0.5
    assert s["grounding"] == {"n": 2, "mIoU": pytest.approx(0.5), "R@0.3": 1.0, "R@0.5": 0.5, "R@0.7": 0.0}
    assert s["by_question_type"]["mcq"]["n"] == 2
    assert list(s["by_duration"]) == ["0-2 min", "2-10 min", "10-30 min"]


def test_resume_after_interruption_runs_every_sample_once(synth_small, tmp_path):
    data, samples = synth_small
    out = tmp_path / "eval"
    args = ["eval", "--policy", "detector", "--data", str(data), "--out", str(out), "--frame-budget", "8", "--no-progress"]
    assert main(args) == 0
    full = (out / "results.jsonl").read_text().splitlines()
    first = json.loads((out / "summary.json").read_text())
    assert first["n"] == len(samples) and {"accuracy", "avg_tool_calls", "tool_usage_rate"} <= set(first)
    # Interrupted run: three complete lines and half of the fourth.
    (out / "results.jsonl").write_text("\n".join(full[:3]) + "\n" + full[3][: len(full[3]) // 2])
    assert main(args) == 0
    rows = read_results(out / "results.jsonl")
    assert sorted(r["id"] for r in rows) == sorted(s.id for s in samples)
    assert len((out / "results.jsonl").read_text().splitlines()) == len(samples)
    again = json.loads((out / "summary.json").read_text())
    assert again["accuracy"] == pytest.approx(first["accuracy"])
    assert (out / "report.md").exists() and (out / "report.png").exists()
    # Resuming with different settings is refused rather than mixing two evaluations.
    assert main([*args[:-3], "--frame-budget", "16", "--no-progress"]) == 1


def test_a_corrupt_video_is_recorded_and_counted(synth_small, tmp_path):
    _, samples = synth_small
    bad_video = tmp_path / "corrupt.mp4"
    bad_video.write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"junk" * 100)
    bad = VideoQASample(id="broken", video_path=str(bad_video), question="Q?", answer="A", question_type="mcq", options=["x", "y"])
    summary = evaluate([*samples[:2], bad], lambda: make_baseline("detector"), tmp_path / "ev", EnvConfig(frame_budget=8), progress=False)
    rows = {r["id"]: r for r in read_results(tmp_path / "ev" / "results.jsonl")}
    assert summary["n"] == 3 and summary["errors"] == 1
    assert "corrupt.mp4" in rows["broken"]["error"] and rows["broken"]["score"] == 0.0


def test_concurrency_gives_the_same_results(synth_small, tmp_path):
    _, samples = synth_small
    one = evaluate(samples, lambda: make_baseline("detector"), tmp_path / "c1", EnvConfig(frame_budget=8), progress=False)
    two = evaluate(samples, lambda: make_baseline("detector"), tmp_path / "c2", EnvConfig(frame_budget=8), concurrency=2, progress=False)
    assert one["accuracy"] == two["accuracy"] and one["avg_tool_calls"] == two["avg_tool_calls"]


def test_compare_renders_runs_side_by_side(synth_small, tmp_path, capsys):
    data, _ = synth_small
    for dispatch in ("parallel", "sequential"):
        main(["eval", "--policy", "detector", "--data", str(data), "--out", str(tmp_path / dispatch), "--dispatch", dispatch,
              "--frame-budget", "8", "--limit", "3", "--no-progress"])  # fmt: skip
    capsys.readouterr()
    assert main(["eval", "compare", str(tmp_path / "parallel"), str(tmp_path / "sequential")]) == 0
    table = capsys.readouterr().out
    assert "| detector | parallel | 8 | 3 |" in table and "| detector | sequential | 8 | 3 |" in table
    shutil.rmtree(tmp_path / "parallel")
    assert main(["eval", "compare", str(tmp_path / "parallel")]) == 1


def test_unknown_policy_is_an_error(synth_small, tmp_path, capsys):
    data, _ = synth_small
    assert main(["eval", "--policy", "psychic", "--data", str(data), "--out", str(tmp_path / "x")]) == 1
    assert "'psychic'" in capsys.readouterr().err


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(synth_small, tmp_path, capsys):
    from paravt.evaluation.store import exclusive_lock
    from paravt_env.storage import OutputLocked

    data, samples = synth_small
    out = tmp_path / "locked"
    out.mkdir()
    with exclusive_lock(out):
        with pytest.raises(OutputLocked, match=r"pid \d+ on"):
            evaluate(samples[:1], lambda: make_baseline("detector"), out, EnvConfig(frame_budget=8), progress=False)
        args = ["eval", "--policy", "detector", "--data", str(data), "--out", str(out), "--limit", "1", "--no-progress"]
        assert main(args) == 1
        assert "is being written by pid" in capsys.readouterr().err
    assert main(args) == 0  # released: the next run goes ahead


class _FlakyServer:
    """An agent whose model server is down the first time (a transient failure), then answers."""

    up = False

    def reset(self, obs, info, sample=None):
        if not _FlakyServer.up:
            raise ConnectionRefusedError("[Errno 111] Connection refused")

    def act(self, obs):
        return "<think>x</think><answer>A</answer>"


def test_transient_failures_are_retried_on_resume_and_permanent_ones_are_not(synth_small, tmp_path):
    _, samples = synth_small
    bad_video = tmp_path / "corrupt.mp4"
    bad_video.write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"junk" * 100)
    bad = VideoQASample(id="broken", video_path=str(bad_video), question="Q?", answer="A", question_type="mcq", options=["x", "y"])
    todo = [*samples[:2], bad]
    first = evaluate(todo, _FlakyServer, tmp_path / "ev", EnvConfig(frame_budget=8), progress=False)
    assert first["n"] == 3 and first["errors"] == 3
    assert [f["transient"] for f in first["failed"]] == [True, True, False]
    _FlakyServer.up = True
    try:
        again = evaluate(todo, _FlakyServer, tmp_path / "ev", EnvConfig(frame_budget=8), progress=False)
    finally:
        _FlakyServer.up = False
    assert again["n"] == 3 and again["errors"] == 1 and again["failed"][0]["id"] == "broken"
    assert "broken" in (tmp_path / "ev" / "report.md").read_text()


def test_missing_videos_count_in_n_and_a_dead_server_fails_at_once(synth_small, tmp_path, capsys):
    data, samples = synth_small
    rows = [json.loads(x) for x in (data / "samples.jsonl").read_text().splitlines()][:3]
    rows[1]["video_path"] = str(tmp_path / "gone.mp4")
    listing = tmp_path / "with_missing.jsonl"
    listing.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "ev"
    with pytest.warns(UserWarning, match="kept 1 of 3"):
        assert main(["eval", "--policy", "detector", "--data", str(listing), "--video-root", str(data), "--out", str(out),
                     "--frame-budget", "8", "--no-progress"]) == 0  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 3 and summary["errors"] == 1 and "gone.mp4" in summary["failed"][0]["error"]
    capsys.readouterr()
    assert main(["eval", "--policy", "openai:http://127.0.0.1:9/v1#m", "--data", str(data), "--out", str(tmp_path / "srv"),
                 "--no-progress"]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "cannot reach the policy server at http://127.0.0.1:9/v1" in err and "Traceback" not in err
    assert not (tmp_path / "srv" / "results.jsonl").exists()


def test_a_full_disk_stops_the_evaluation_at_once_with_its_results_intact(synth_small, tmp_path, monkeypatch):
    import errno

    from paravt.evaluation import harness as evaluation

    _, samples = synth_small
    assert len(samples) >= 4
    real_write, writes, agents = evaluation.ResultsWriter.write, [], []

    def write(self, row):
        writes.append(row["id"])
        if len(writes) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(self, row)

    def make_agent():
        agents.append(1)
        return make_baseline("detector")

    monkeypatch.setattr(evaluation.ResultsWriter, "write", write)
    out = tmp_path / "ev"
    with pytest.raises(OSError, match=r"the disk is full\): the evaluation stopped; its 2 results are intact"):
        evaluate(samples, make_agent, out, EnvConfig(frame_budget=8), progress=False)
    assert len(agents) == 3  # no episode ran after the failed write
    assert len(read_results(out / "results.jsonl")) == 2
    monkeypatch.setattr(evaluation.ResultsWriter, "write", real_write)
    summary = evaluate(samples, make_agent, out, EnvConfig(frame_budget=8), progress=False)
    assert summary["n"] == len(samples) and len(agents) == 3 + len(samples) - 2


def test_fingerprint_and_diff_name_what_differs_between_two_runs(synth_small, tmp_path, capsys):
    data, samples = synth_small
    runs = {}
    for k in (8, 16):
        out = tmp_path / f"k{k}"
        assert main(["eval", "--policy", "detector", "--data", str(data), "--out", str(out), "--frame-budget", str(k),
                     "--no-progress"]) == 0  # fmt: skip
        runs[k] = json.loads((out / "summary.json").read_text())["fingerprint"]
    a, b = runs[8], runs[16]
    assert a["frame_budget"] == 8 and b["frame_budget"] == 16 and a["frames_sha"] != b["frames_sha"]
    assert a["system_prompt_sha"] == b["system_prompt_sha"] and len(a["system_prompt_sha"]) == 1
    assert a["versions"]["av"] and a["scorer"] == "paravt-score/1" and a["samples_with_records"] == len(samples)
    capsys.readouterr()
    assert main(["eval", "diff", str(tmp_path / "k8"), str(tmp_path / "k16")]) == 0
    report = capsys.readouterr().out
    assert "| frame_budget | 8 | 16 |" in report and "| frames_sha |" in report
    assert f"A saw 8 overview frames, B 16 on {len(samples)} samples" in report
    assert f"## Samples ({len(samples)} in both" in report
    assert "system_prompt_sha" not in report.split("## Samples")[0]  # the same prompt: not listed as a difference
    assert main(["eval", "diff", str(tmp_path / "k8"), str(tmp_path / "k8")]) == 0
    assert "The fingerprints agree." in capsys.readouterr().out


def test_one_ctrl_c_stops_the_evaluation_after_the_samples_in_flight(synth_small, tmp_path):
    """Every sample is submitted to the pool at once; an interrupt must not wait for all of them to run."""
    import signal
    import threading
    import time

    _, samples = synth_small
    samples = (list(samples) * 4)[:12]
    samples = [VideoQASample.from_dict({**s.to_dict(), "id": f"{s.id}-{i}"}) for i, s in enumerate(samples)]

    class Slow:
        def __init__(self):
            self.agent = make_baseline("detector")

        def reset(self, *a, **k):
            return self.agent.reset(*a, **k)

        def act(self, obs):
            time.sleep(0.4)
            return self.agent.act(obs)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's process has it
    timer = threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    try:
        t0 = time.perf_counter()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            evaluate(samples, Slow, tmp_path / "ev", EnvConfig(frame_budget=8), concurrency=2, progress=False)
        stopped = time.perf_counter() - t0
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    kept = read_results(tmp_path / "ev" / "results.jsonl")
    assert 0 < len(kept) < len(samples) - 4, len(kept)  # the queued samples never ran
    assert stopped < 1.5 + 3 * 0.4 * 3 + 5  # at most the two samples in flight after the signal
    again = evaluate(samples, lambda: make_baseline("detector"), tmp_path / "ev", EnvConfig(frame_budget=8), progress=False)
    assert again["n"] == len(samples)  # and the same --out resumes from what was kept


def test_the_summary_splits_tool_use_by_whether_the_overview_showed_the_asked_event():
    from paravt.evaluation.report import overview_split

    def row(i, overview, calls, score, asked=None):
        events = [{"start": 10.0, "end": 12.0, "label": "a", "asked": asked}, {"start": 50.0, "end": 52.0, "label": "b", "asked": None if asked is None else not asked}]  # fmt: skip
        return {"id": str(i), "score": score, "tool_calls": calls, "error": None, "episode": {"overview": overview, "events": events}}

    rows = [row(0, [11.0, 30.0], 0, 1.0), row(1, [5.0, 30.0], 3, 1.0), row(2, [5.0, 30.0], 0, 0.0),
            row(3, [51.0], 2, 0.5, asked=True),  # shows an event, but not the asked one: a miss
            {"id": "x", "score": 0.0, "tool_calls": 0, "error": "boom", "episode": None}]  # fmt: skip
    split = overview_split(rows)
    assert split["showed"] == {"n": 1, "accuracy": 1.0, "avg_tool_calls": 0.0, "tool_usage_rate": 0.0}
    assert split["missed"]["n"] == 3 and split["missed"]["tool_usage_rate"] == pytest.approx(2 / 3)
    assert overview_split([{"id": "r", "score": 1.0, "tool_calls": 0, "error": None, "episode": {"overview": [1.0], "events": []}}]) == {}


def test_a_real_evaluation_splits_by_what_its_overview_frames_show(synth_small, tmp_path):
    from paravt_env.video.sampling import overview_times

    data, samples = synth_small
    out = tmp_path / "eval"
    assert main(["eval", "--policy", "detector", "--data", str(data), "--out", str(out), "--frame-budget", "4", "--no-progress"]) == 0
    split = json.loads((out / "summary.json").read_text())["by_overview"]
    rows = {r["id"]: r for r in read_results(out / "results.jsonl")}
    shown = 0
    for s in samples:
        times = rows[s.id]["episode"]["overview"]
        d = rows[s.id]["episode"]["duration"]  # each frame anywhere in its own segment (keyframes first)
        assert times == pytest.approx(list(overview_times(d, 4)), abs=d / 8)
        shown += any(e.start <= t < e.end for e in s.events for t in times)
    assert split["showed"]["n"] == shown and split["showed"]["n"] + split["missed"]["n"] == len(samples)


def test_a_sampled_evaluation_draws_the_same_episodes_when_rerun_or_resumed(synth_small, tiny_qwen3, tmp_path, capsys):
    """``paravt eval --temperature T --seed S``: each episode is seeded from the seed and its sample's id, so a
    second run, and a run resumed after losing its last rows, write the same episodes; the settings are part of
    the run's config (a greedy directory is not resumed with sampling)."""
    data, _ = synth_small
    base = ["eval", "--policy", f"hf:{tiny_qwen3}", "--data", str(data), "--limit", "3", "--frame-budget", "2",
            "--max-new-tokens", "12", "--no-progress"]  # fmt: skip

    def texts(out):
        return {r["id"]: [t["text"] for t in r["episode"]["turns"]] for r in read_results(out / "results.jsonl")}

    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert main([*base, "--out", str(a), "--temperature", "1.0", "--seed", "3"]) == 0
    assert main([*base, "--out", str(b), "--temperature", "1.0", "--seed", "3"]) == 0
    assert texts(a) == texts(b)
    lines = (b / "results.jsonl").read_text().splitlines()
    (b / "results.jsonl").write_text("\n".join(lines[:1]) + "\n")  # interrupted after its first episode
    assert main([*base, "--out", str(b), "--temperature", "1.0", "--seed", "3"]) == 0
    assert texts(b) == texts(a)
    assert main([*base, "--out", str(c), "--temperature", "1.0", "--seed", "4"]) == 0
    assert texts(c) != texts(a)  # another seed, other draws (12 sampled tokens a turn from a random model)
    config = json.loads((a / "eval_config.json").read_text())
    assert config["temperature"] == 1.0 and config["seed"] == 3
    greedy = tmp_path / "greedy"
    assert main([*base, "--out", str(greedy)]) == 0
    assert "temperature" not in json.loads((greedy / "eval_config.json").read_text())
    capsys.readouterr()
    assert main([*base, "--out", str(greedy), "--temperature", "1.0"]) == 1
    assert "temperature" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "d"), "--temperature", "-1"]) == 1
    assert main(["eval", "--policy", "detector", "--data", str(data), "--out", str(tmp_path / "e"), "--temperature", "0.7"]) == 1
    assert "does not sample" in capsys.readouterr().err


def test_a_checkpoint_is_evaluated_with_the_tokens_per_turn_it_was_trained_with(synth_small, tiny_qwen3, tmp_path,
                                                                                 capsys):  # fmt: skip
    """``--max-new-tokens`` defaults to the card's ``max_new_tokens`` (the RL rollouts' cap), else 2048; the cap
    is recorded, a directory evaluated under another cap is not resumed, and one written before the cap was
    recorded resumes."""
    from paravt.evaluation.harness import resolve_turn_tokens
    from paravt.policies.card import read_card, write_card

    data, _ = synth_small
    model = tmp_path / "model"
    shutil.copytree(tiny_qwen3, model)
    assert resolve_turn_tokens(f"hf:{model}", None) == 2048  # a card without a cap: the release's budget
    card = read_card(model)
    write_card(model, think_prefix=card.get("think_prefix", False), env=card.get("env", {}), max_new_tokens=6)
    assert resolve_turn_tokens(f"hf:{model}", None) == 6 and resolve_turn_tokens(f"hf:{model}", 9) == 9
    assert resolve_turn_tokens("detector", None) == 2048
    with pytest.raises(ValueError, match="max-new-tokens"):
        resolve_turn_tokens(f"hf:{model}", 0)
    base = ["eval", "--policy", f"hf:{model}", "--data", str(data), "--limit", "2", "--frame-budget", "2", "--no-progress"]
    out = tmp_path / "out"
    assert main([*base, "--out", str(out)]) == 0
    assert json.loads((out / "eval_config.json").read_text())["max_new_tokens"] == 6
    assert all(t["tokens"] <= 6 for r in read_results(out / "results.jsonl") for t in r["episode"]["turns"])
    capsys.readouterr()
    assert main([*base, "--out", str(out), "--max-new-tokens", "12"]) == 1
    assert "max_new_tokens: 6 -> 12" in capsys.readouterr().err
    config = json.loads((out / "eval_config.json").read_text())
    del config["max_new_tokens"]  # written before the cap was recorded
    (out / "eval_config.json").write_text(json.dumps(config))
    assert main([*base, "--out", str(out)]) == 0


@pytest.mark.parametrize("damage", ["[1, 2]", "{cut", "[" * 50_000 + "]" * 50_000])
def test_a_damaged_eval_config_is_named_and_left_as_it_is(synth_small, tmp_path, capsys, damage):
    from paravt.cli import main

    data, _ = synth_small
    out = tmp_path / "ev"
    out.mkdir()
    (out / "eval_config.json").write_text(damage)
    assert main(["eval", "--policy", "no_tool", "--data", str(data), "--limit", "1", "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "eval_config.json: damaged" in err and "Traceback" not in err
    assert (out / "eval_config.json").read_text() == damage
