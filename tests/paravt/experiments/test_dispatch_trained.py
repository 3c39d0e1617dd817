"""paravt.experiments.dispatch_trained: the trained parallel-against-sequential comparison, paired by seed, from
the runs' own files."""

import json

import pytest

from paravt.experiments.dispatch_trained import compare, main, to_markdown

VIDEOS = ["v0", "v1", "v2", "v3"]


def _run(root, name, *, seed, dispatch, scores, crops_per_turn, budget=8, steps=60, videos=VIDEOS):
    """A finished run's files as ``paravt train`` writes them (config, evaluation summary and rows)."""
    run = root / name
    (run / "eval").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"seed": seed, "steps": steps, "env": {"dispatch": dispatch, "crop_budget": budget}}))
    rows = []
    for video, score in zip(videos, scores, strict=True):
        turns = [{"crops": [{"status": "executed"}] * n + [{"status": "rejected"}] * 3} for n in crops_per_turn]
        rows.append({"id": video, "score": score, "episode": {"turns": turns}})
    (run / "eval" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    turns = len(crops_per_turn)
    cost = {"turns": turns, "crops": sum(crops_per_turn), "frames_decoded": 8 + 8 * sum(crops_per_turn),
            "generated_tokens": 100.0 * turns, "prompt_tokens": 500.0 * turns, "model_calls": turns,
            "wall_s": 1.0 * turns, "wall_s_serial": 1.5 * turns}  # fmt: skip
    (run / "eval" / "summary.json").write_text(json.dumps({"n": len(videos), "accuracy": sum(scores) / len(scores),
                                                           "errors": 0, "cost": cost}))  # fmt: skip
    return run


def test_the_sides_are_paired_by_seed_with_every_cost_column(tmp_path):
    par = [_run(tmp_path, "p0", seed=0, dispatch="parallel", scores=[1, 1, 1, 0], crops_per_turn=[5, 0]),
           _run(tmp_path, "p1", seed=1, dispatch="parallel", scores=[1, 1, 0, 0], crops_per_turn=[4, 0])]  # fmt: skip
    seq = [_run(tmp_path, "q1", seed=1, dispatch="sequential", scores=[1, 0, 0, 0], crops_per_turn=[1, 1, 1, 0]),
           _run(tmp_path, "q0", seed=0, dispatch="sequential", scores=[1, 1, 0, 0], crops_per_turn=[1, 1, 0])]  # fmt: skip
    result = compare(par, seq)
    assert result["seeds"] == [0, 1] and result["videos"] == 4 and result["crop_budget"] == 8
    seed0 = result["per_seed"][0]
    assert seed0["parallel"]["accuracy"] == 0.75 and seed0["sequential"]["accuracy"] == 0.5
    assert (seed0["parallel"]["most_crops_in_a_turn"], seed0["sequential"]["most_crops_in_a_turn"]) == (5, 1)
    diff = result["parallel_minus_sequential"]
    assert diff["accuracy"]["mean"] == pytest.approx(0.25)  # (0.75 - 0.5 + 0.5 - 0.25) / 2
    assert diff["accuracy"]["ci95"] == pytest.approx(0.0)  # the same difference on both seeds
    assert diff["turns"]["mean"] == pytest.approx(((2 - 3) + (2 - 4)) / 2)
    assert result["over_seeds"]["crops"]["parallel"]["mean"] == pytest.approx(4.5)
    pooled = result["accuracy_paired_by_seed_and_video"]
    assert pooled["mean"] == pytest.approx(0.25) and result["smallest_resolvable"]["pairs"] == 8
    assert result["disagree"] == 2  # v2 on seed 0, v1 on seed 1: the pairs off ceiling
    text = to_markdown(result)
    assert "(Seed, video) pairs whose scores differ: 2 of 8." in text
    assert "| 0 | sequential | 0.500 |" in text and "| accuracy | 0.625 ± " in text


@pytest.mark.parametrize(("change", "message"), [
    ({"dispatch": "parallel"}, "trained with parallel dispatch, given as a sequential run"),
    ({"budget": 4}, "the runs differ in crop_budget"),
    ({"steps": 30}, "the runs differ in steps"),
    ({"seed": 5}, r"seed\(s\) \[0, 5\] have a run on one side only"),
    ({"videos": ["v0", "v1", "v2", "x"]}, "different held-out videos"),
])  # fmt: skip
def test_what_does_not_match_is_refused_and_named(tmp_path, change, message):
    par = [_run(tmp_path, "p0", seed=0, dispatch="parallel", scores=[1, 1, 1, 0], crops_per_turn=[5, 0])]
    settings = {"seed": 0, "dispatch": "sequential", "scores": [1, 0, 1, 0], "crops_per_turn": [1, 0], **change}
    seq = [_run(tmp_path, "q0", **settings)]
    with pytest.raises(ValueError, match=message):
        compare(par, seq)


def test_the_command_writes_both_files_and_a_missing_run_is_a_usage_error(tmp_path, capsys):
    par = _run(tmp_path, "p0", seed=0, dispatch="parallel", scores=[1, 1, 1, 0], crops_per_turn=[5, 0])
    seq = _run(tmp_path, "q0", seed=0, dispatch="sequential", scores=[1, 0, 1, 0], crops_per_turn=[1, 0])
    assert main(["--parallel", str(par), "--sequential", str(seq), "--out", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "comparison.json").read_text())["seeds"] == [0]
    assert "none with one seed" in (tmp_path / "out" / "comparison.md").read_text()
    with pytest.raises(SystemExit) as exc:
        main(["--parallel", str(tmp_path / "nothing"), "--sequential", str(seq), "--out", str(tmp_path / "o2")])
    assert exc.value.code == 2 and "is missing" in capsys.readouterr().err


def test_an_evaluation_is_named_never_a_path(tmp_path, capsys):
    par = [_run(tmp_path, "p0", seed=0, dispatch="parallel", scores=[1, 1, 1, 0], crops_per_turn=[5, 0])]
    seq = [_run(tmp_path, "q0", seed=0, dispatch="sequential", scores=[1, 1, 0, 0], crops_per_turn=[1, 1, 0])]
    with pytest.raises(SystemExit):
        main(["--parallel", *map(str, par), "--sequential", *map(str, seq), "--out", str(tmp_path / "c"), "--eval", "../x"])
    assert "is not an evaluation of a run" in capsys.readouterr().err
    # a turn-budget evaluation already made is read, not played again (no weights needed)
    for run in (*par, *seq):
        (run / "eval_turns3").mkdir()
        for name in ("summary.json", "results.jsonl"):
            (run / "eval_turns3" / name).write_text((run / "eval" / name).read_text())
    assert main(["--parallel", *map(str, par), "--sequential", *map(str, seq), "--out", str(tmp_path / "c"),
                 "--turn-budget", "3"]) == 0  # fmt: skip
    assert json.loads((tmp_path / "c" / "comparison_turns3.json").read_text())["evaluation"] == "eval_turns3"
