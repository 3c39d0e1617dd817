import json

import pytest

torch = pytest.importorskip("torch")

from paravt.cli import main  # noqa: E402
from paravt.learners.config import load_recipe  # noqa: E402

KEYS = {"step", "reward_mean", "reward_std", "accuracy", "format_reward", "format_compliance", "tool_calls_per_rollout",
        "parallel_calls_per_turn", "frame_budget_mean", "kl", "loss", "clip_fraction", "entropy", "tokens_per_s", "wall_s",
        "rollout_s", "reference_s", "update_s", "train_tokens", "train_tokens_per_s", "peak_memory_mb"}  # fmt: skip
FAST = ["sft.steps=10", "sft.episodes=4", "rollout.group_size=3", "rollout.prompts_per_step=2", "rollout.max_new_tokens=48", "data.synth_n=4",
        "perception.steps=3", "perception.videos=3", "data.heldout_n=2"]


@pytest.fixture
def cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path_factory.getbasetemp() / "paravt_cache"))


def _rows(run):
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def test_tiny_cpu_runs_then_resumes_without_gaps(tmp_path, cache, capsys):
    run = tmp_path / "run"
    assert main(["train", "--recipe", "tiny_cpu", "--steps", "3", "--out", str(run), "--no-progress", *FAST]) == 0
    # both checkpoints are also evaluated on the recoloured copy of the split, and the table says how often they
    # follow the new colour (paravt.evaluation.counterfactual)
    printed = capsys.readouterr().out
    assert "needles recoloured: follows the new colour | keeps the old one |" in printed
    from paravt.evaluation.counterfactual import follow_rates

    for name in ("eval", "eval_coldstart"):
        rates = follow_rates(run / "heldout", run / "heldout_counterfactual", run / f"{name}_counterfactual")
        assert rates["n"] == 2 and rates["not_counterfactual"] == 0
    assert not (run / "heldout_blank").exists()
    assert [r["step"] for r in _rows(run)] == [1, 2, 3]
    assert (run / "curves.png").read_bytes()[:4] == b"\x89PNG" and (run / "sft_metrics.jsonl").exists()
    assert (run / "checkpoint" / "model" / "model.safetensors").exists()
    # the cold start is its own checkpoint (what every arm of a comparison starts from), with a policy card
    card = json.loads((run / "coldstart" / "model" / "paravt.json").read_text())
    assert card["think_prefix"] is True and card["env"]["crop_fps"] == 0.5
    stages = {json.loads(x)["stage"] for x in (run / "sft_metrics.jsonl").read_text().splitlines()}
    assert stages == {"perception", "sft"}
    # the held-out split is written and evaluated at the end, as paravt eval writes it
    assert len((run / "heldout" / "samples.jsonl").read_text().splitlines()) == 2
    summary = json.loads((run / "eval" / "summary.json").read_text())
    assert summary["n"] == 2 and 0.0 <= summary["accuracy"] <= 1.0
    # a sample of each step's rollouts is kept as episode records (2 by default, one per prompt group first)
    assert sorted(p.name for p in (run / "rollouts").iterdir()) == [f"step_00000{i}.jsonl" for i in (1, 2, 3)]
    rows = [json.loads(x) for x in (run / "rollouts" / "step_000002.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and len({r["episode"]["sample_id"] for r in rows}) == 2
    for r in rows:
        ep = r["episode"]
        assert ep["schema"] == "paravt-episode/1" and ep["step"] == 2 and ep["turns"] and len(ep["overview"]) == ep["frame_budget"]
        assert all(t["tokens"] > 0 and t["text"] for t in ep["turns"])
    assert main(["view", str(run), "--no-thumbnails"]) == 0 and "rollouts/step_000003" in (run / "view.html").read_text()
    assert main(["train", "--recipe", "tiny_cpu", "--steps", "5", "--out", str(run), "--resume", "--no-progress", *FAST]) == 0
    rows = _rows(run)
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    for r in rows:
        assert set(r) >= KEYS
        assert all(isinstance(r[k], (int, float)) for k in KEYS)
    # the checkpoint is a loadable transformers checkpoint
    from paravt.policies.hf import HFPolicy

    HFPolicy.from_pretrained(run / "checkpoint" / "model")
    # a second fresh run into the same directory is refused rather than mixing metrics
    assert main(["train", "--recipe", "tiny_cpu", "--steps", "1", "--out", str(run), "--no-progress", *FAST]) == 1


def test_vanilla_grpo_and_token_anchoring_steps(tmp_path, cache):
    for extra in (["algorithm=grpo", "sft.steps=0"], ["para.anchoring=token", "grpo.kl_coef=0"]):
        run = tmp_path / extra[0].replace("=", "_")
        assert main(["train", "--recipe", "tiny_cpu", "--steps", "1", "--out", str(run), "--no-progress", *FAST, *extra]) == 0
        [row] = _rows(run)
        assert row["step"] == 1 and set(row) >= KEYS
    cfg = json.loads((tmp_path / "algorithm_grpo" / "config.json").read_text())
    assert cfg["algorithm"] == "grpo"


def test_gradient_checkpointing_trains_the_same_step(tmp_path, cache):
    """Every real-size recipe checkpoints; its update scores a group's rows whole (a checkpointed model in training
    keeps no cache for the shared prompt: the 2B step on a GPU broke there) and takes the step the plain model takes."""
    rows = {}
    for on in ("true", "false"):
        run = tmp_path / f"checkpointing_{on}"
        assert main(["train", "--recipe", "tiny_cpu", "--steps", "1", "--out", str(run), "--no-progress", *FAST,
                     "sft.steps=0", "perception.steps=0", f"model.gradient_checkpointing={on}"]) == 0  # fmt: skip
        [rows[on]] = _rows(run)
    assert rows["true"]["reward_mean"] == rows["false"]["reward_mean"]  # the same rollouts (sampled in eval)
    for key in ("loss", "kl", "entropy"):
        assert rows["true"][key] == pytest.approx(rows["false"][key], rel=1e-4, abs=1e-6), key


def test_recipes_load_and_reject_unknown_keys():
    for name in ("tiny_cpu", "paragrpo_qwen3vl_8b", "vanilla_grpo_qwen3vl_8b"):
        cfg = load_recipe(name)
        assert cfg.grpo.eps_clip == 0.2 and cfg.grpo.reward_scale == 10.0
    paper = load_recipe("paragrpo_qwen3vl_8b")
    assert (paper.optim.lr, paper.rollout.group_size, paper.rollout.temperature, paper.env.max_parallel) == (2e-6, 8, 0.7, 5)
    assert load_recipe("vanilla_grpo_qwen3vl_8b").para.nframes_gating is False
    with pytest.raises(ValueError, match="'optim.learning_rate'"):
        load_recipe("tiny_cpu", ["optim.learning_rate=1"])
    with pytest.raises(FileNotFoundError, match="tiny_gpu"):
        load_recipe("tiny_gpu")
    assert load_recipe("tiny_cpu", ["optim.lr=3e-3"]).optim.lr == 3e-3


def test_missing_metric_sink_fails_fast_with_the_package_name(tmp_path, cache, capsys):
    pytest.importorskip("torch")
    try:
        import tensorboard  # noqa: F401

        pytest.skip("tensorboard is installed here")
    except ImportError:
        pass
    rc = main(["train", "--recipe", "tiny_cpu", "--steps", "1", "--out", str(tmp_path / "r"), "--no-progress",
               "log.tensorboard=true", *FAST])  # fmt: skip
    assert rc == 1 and "pip install tensorboard" in capsys.readouterr().err
    assert not (tmp_path / "r" / "sft_metrics.jsonl").exists()


def test_a_metrics_log_keeps_its_objects_and_counts_what_it_leaves_out(tmp_path, caplog):
    from paravt.learners.metrics import read_jsonl

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n[1, 2]\n' + "[" * 50_000 + "\n" + '{"step": 2}\n{"step": 3, "acc')
    with caplog.at_level("WARNING"):
        assert read_jsonl(path) == [{"step": 1}, {"step": 2}]
    assert "3 line(s) that are not JSON objects left out" in caplog.text and str(path) in caplog.text
