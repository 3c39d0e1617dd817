"""``paravt.learners.selection``: the run's checkpoint chosen on a validation split. The choice (highest accuracy,
earliest on a tie), the files it keeps, a run with a selection training the same steps bit for bit as one without,
and an interrupt inside a validation resumed."""

import json
import random

import pytest

torch = pytest.importorskip("torch")

import paravt.evaluation.harness as harness  # noqa: E402
from paravt.cli import main  # noqa: E402
from paravt.learners import selection  # noqa: E402
from paravt.learners.config import load_recipe  # noqa: E402

FAST = ["sft.steps=4", "sft.episodes=6", "sft.batch=2", "rollout.group_size=2", "rollout.prompts_per_step=2",
        "rollout.max_new_tokens=16", "rollout.temperature=1.0", "data.synth_n=5", "perception.steps=3",
        "perception.videos=2", "perception.batch=2", "data.heldout_n=2", "save_every=50"]  # fmt: skip
SELECT = ["select.every=1", "select.after=2", "data.validation_n=3"]
CLOCK = ("wall_s", "tokens_per_s", "rollout_s", "reference_s", "update_s", "train_tokens_per_s", "peak_memory_mb")


def _rows(run):
    return [{k: v for k, v in json.loads(x).items() if k not in CLOCK} for x in (run / "metrics.jsonl").read_text().splitlines()]


def _weights(run):
    from safetensors.torch import load_file

    return load_file(next((run / "checkpoint" / "model").glob("model*.safetensors")))


def _candidate(out, step, accuracy, n=3, model=True):
    folder = selection.step_dir(out, step)
    (folder / "eval").mkdir(parents=True)
    (folder / "eval" / "summary.json").write_text(json.dumps({"accuracy": accuracy, "n": n}))
    if model:
        (folder / "model").mkdir()
        (folder / "model" / "model.safetensors").write_bytes(b"w")
    return folder


def test_choose_takes_the_highest_accuracy_and_the_earliest_step_on_a_tie():
    rows = [{"step": 10, "accuracy": 0.5}, {"step": 20, "accuracy": 0.9}, {"step": 30, "accuracy": 0.9}, {"step": 40, "accuracy": 0.2}]
    assert selection.choose(rows)["step"] == 20
    assert selection.choose([]) is None


def test_the_choice_keeps_the_chosen_weights_only_and_names_them(tmp_path):
    sel = selection.Selection(10, 10, tmp_path)
    for step, acc in ((10, 0.4), (20, 0.8), (30, 0.6)):
        _candidate(tmp_path, step, acc)
    # a candidate whose validation an interrupt cut short (no summary) is not one, and keeps its weights
    (selection.step_dir(tmp_path, 40) / "model").mkdir(parents=True)
    best = sel.choose()
    assert best == {"step": 20, "accuracy": 0.8, "n": 3}
    assert sorted(p.parent.name for p in (tmp_path / "select").glob("step_*/model")) == ["step_000020", "step_000040"]
    chosen = selection.selected(tmp_path)
    assert chosen["step"] == 20 and chosen["model"] == selection.step_dir(tmp_path, 20) / "model"
    # weights removed behind its back: said, not evaluated as something else
    import shutil

    shutil.rmtree(chosen["model"])
    with pytest.raises(FileNotFoundError, match="step 20"):
        selection.selected(tmp_path)


def test_schedule():
    sel = selection.Selection(10, 30, "unused")
    assert [s for s in range(0, 61) if sel.due(s)] == [30, 40, 50, 60]
    assert [s for s in range(0, 7) if selection.Selection(2, 0, "unused").due(s)] == [2, 4, 6]
    with pytest.raises(ValueError, match="select.every"):
        selection.Selection(0, 0, "unused")


def test_rng_preserved_restores_every_rng_the_trainer_draws_from():
    import numpy as np

    torch.manual_seed(3)
    np.random.seed(3)
    random.seed(3)
    expected = (torch.rand(2), np.random.rand(), random.random())
    torch.manual_seed(3)
    np.random.seed(3)
    random.seed(3)
    with selection.rng_preserved():
        torch.rand(5), np.random.rand(3), random.random()
    assert torch.equal(torch.rand(2), expected[0]) and np.random.rand() == expected[1] and random.random() == expected[2]


def test_recipe_refuses_a_selection_without_a_validation_split_or_on_a_test_seed():
    with pytest.raises(ValueError, match="data.validation_n"):
        load_recipe("tiny_cpu", ["select.every=10", "data.validation_n=0"])
    with pytest.raises(ValueError, match="validation_seed"):
        load_recipe("tiny_cpu", ["select.every=10", "data.validation_n=4", "data.validation_seed=1000"])
    with pytest.raises(ValueError, match="select.after"):
        load_recipe("tiny_cpu", ["select.after=-1"])
    # on real data there is no validation split to draw: no selection (the trainer says so), as no held-out split
    cfg = load_recipe("tiny_cpu", ["data.path=/some/samples.jsonl"])
    assert cfg.select.every == 10 and not selection.selects(cfg) and selection.selects(load_recipe("tiny_cpu"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("select")
    mp.setenv("PARAVT_CACHE", str(root / "cache"))
    plain, chosen = root / "plain", root / "selected"
    assert main(["train", "--out", str(plain), "--steps", "3", "--no-progress", *FAST]) == 0
    assert main(["train", "--out", str(chosen), "--steps", "3", "--no-progress", *FAST, *SELECT]) == 0
    yield root, plain, chosen
    mp.undo()


def test_a_run_with_a_selection_trains_the_same_steps_and_evaluates_its_choice_held_out(runs, capsys):
    root, plain, chosen = runs
    assert _rows(chosen) == _rows(plain)
    assert all(torch.equal(a, b) for a, b in zip(_weights(chosen).values(), _weights(plain).values(), strict=True))
    # steps 2 and 3 were candidates, scored on the 3 validation videos (their own split, not the held-out one)
    rows = selection.candidates(chosen)
    assert [r["step"] for r in rows] == [2, 3] and all(r["n"] == 3 for r in rows)
    assert len((chosen / "validation" / "samples.jsonl").read_text().splitlines()) == 3
    held = {json.loads(x)["id"] for x in (chosen / "heldout" / "samples.jsonl").read_text().splitlines()}
    val = {json.loads(x)["id"] for x in (chosen / "validation" / "samples.jsonl").read_text().splitlines()}
    assert not held & val and all(i.startswith("synth-2000-") for i in val)
    best = selection.selected(chosen)
    assert best["step"] == selection.choose(rows)["step"]
    # the chosen step's weights only; its held-out evaluation beside the last step's
    assert [p.parent.name for p in (chosen / "select").glob("step_*/model")] == [f"step_{best['step']:06d}"]
    summary = json.loads((chosen / "eval_selected" / "summary.json").read_text())
    assert summary["n"] == 2 and (chosen / "eval_selected_counterfactual" / "summary.json").is_file()
    # the selected step-3 policy is the last step's: the same weights as the checkpoint's
    if best["step"] == 3:
        from safetensors.torch import load_file

        saved = load_file(next(best["model"].glob("model*.safetensors")))
        assert all(torch.equal(saved[k], v) for k, v in _weights(chosen).items())
    from paravt.evaluation.heldout import result_figures

    assert set(result_figures(chosen)) == {"cold start", "RL", "RL, selected"}
    assert not (plain / "select").exists() and not (plain / "validation").exists()


def test_an_interrupt_inside_a_validation_resumes_it(runs, monkeypatch):
    root, _, chosen = runs
    run = root / "interrupted"
    original, calls = harness.evaluate_checkpoint, {"n": 0}

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # the second candidate's validation (step 3), half way: Ctrl-C
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(harness, "evaluate_checkpoint", interrupted)
    assert main(["train", "--out", str(run), "--steps", "3", "--no-progress", *FAST, *SELECT]) == 130
    assert [r["step"] for r in selection.candidates(run)] == [2]
    monkeypatch.setattr(harness, "evaluate_checkpoint", original)
    assert main(["train", "--out", str(run), "--steps", "3", "--resume", "--no-progress", *FAST, *SELECT]) == 0
    assert selection.candidates(run) == selection.candidates(chosen)
    assert _rows(run) == _rows(chosen)
    assert selection.selected(run)["step"] == selection.selected(chosen)["step"]


def test_the_plan_names_the_validation_split_and_the_first_candidate(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    assert main(["train", "--out", str(tmp_path / "new"), "--dry-run", "select.every=10", "select.after=35", "data.validation_n=40"]) == 0
    out = capsys.readouterr().out
    assert f"data, validation: 40 synthetic videos of 30-150 s, seed 2000, in {tmp_path / 'new' / 'validation'}" in out
    assert "during RL: every 10 steps from step 40, the policy scored on" in out
    assert "then: the cold start, the RL checkpoint, the selected checkpoint evaluated" in out
    assert not (tmp_path / "new").exists()
    # a run that stops before its first candidate builds no validation videos and plans no selection
    assert main(["train", "--out", str(tmp_path / "new"), "--dry-run", "--steps", "39", "select.every=10", "select.after=35"]) == 0
    out = capsys.readouterr().out
    assert "data, validation" not in out and "during RL" not in out and "the selected checkpoint" not in out
