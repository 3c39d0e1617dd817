"""``paravt repro``'s arms change only what the paper changes, from one shared cold start."""

import dataclasses
import json

import pytest

from paravt.experiments.repro.arms import ARMS, ReproConfig, arm_config
from paravt.experiments.repro.train import check_config, finished_runs
from paravt.learners.run_setup import env_config


def _knobs(cfg):
    env = env_config(cfg)
    reward = env.reward
    return {"think_prefix": cfg.think_prefix, "gating": env.nframes_gating,
            "answer_suffix": reward.answer_suffix, "anchor": reward.anchor_weight,
            "prefix_scored": reward.score_forced_prefix, "tool_credit": reward.tool_credit}  # fmt: skip


def test_each_arm_turns_exactly_its_components_on(tmp_path):
    repro = ReproConfig(steps=7)
    knobs = {arm: _knobs(arm_config(repro, arm, 3, tmp_path / "cs")) for arm in ARMS}
    off = {"prefix_scored": False, "tool_credit": True}
    assert knobs["vanilla_grpo"] == {"think_prefix": False, "gating": False, "answer_suffix": False, "anchor": 0.0, **off}
    assert knobs["para_grpo"] == {"think_prefix": True, "gating": True, "answer_suffix": True, "anchor": 0.5, **off}
    assert knobs["ea_only"] == {"think_prefix": True, "gating": False, "answer_suffix": True, "anchor": 0.5, **off}
    assert knobs["gating_only"] == {"think_prefix": False, "gating": True, "answer_suffix": False, "anchor": 0.0, **off}
    # the EA claim again under the reward that scores the forced <think> as the policy's opening tag
    on = {"prefix_scored": True, "tool_credit": True}
    assert knobs["para_grpo_scored"] == {"think_prefix": True, "gating": True, "answer_suffix": True, "anchor": 0.5, **on}
    assert knobs["ea_only_scored"] == {"think_prefix": True, "gating": False, "answer_suffix": True, "anchor": 0.5, **on}
    # the four arms of the paper's comparison again, each changed in its reward's tool credit only
    for arm in ("vanilla_grpo", "ea_only", "gating_only", "para_grpo"):
        assert knobs[f"{arm}_neutral"] == {**knobs[arm], "tool_credit": False}
    assert ReproConfig().arms == tuple(a for a in ARMS if not a.endswith("_neutral"))  # not run by default
    # everything else is shared: the cold start, the seed, the steps, the optimiser and rollout settings
    cfgs = [arm_config(repro, arm, 3, tmp_path / "cs") for arm in ARMS]
    for cfg in cfgs:
        assert cfg.model.path == str(tmp_path / "cs") and cfg.seed == 3 and cfg.steps == 7
        assert cfg.sft.steps == 0 and cfg.perception.steps == 0
        assert (cfg.optim, cfg.rollout, cfg.env) == (cfgs[0].optim, cfgs[0].rollout, cfgs[0].env)
        assert dataclasses.replace(cfg.grpo, tool_credit=True) == cfgs[0].grpo


def test_config_errors_and_resume_rules(tmp_path):
    with pytest.raises(ValueError, match="unknown arm"):
        ReproConfig(arms=("ppo",))
    with pytest.raises(ValueError, match="at least 1"):
        ReproConfig(steps=0)
    with pytest.raises(ValueError, match="gate_habit must be a share"):
        ReproConfig(gate_habit=1.5)
    with pytest.raises(ValueError, match=r"dispatch must name.*\['parallel', 'sequential'\], got \['serial'\]"):
        ReproConfig(dispatch=("serial",))
    with pytest.raises(ValueError, match="dispatch must name"):
        ReproConfig(dispatch=())
    check_config(ReproConfig(seeds=(0,), arms=("para_grpo",), dispatch=("parallel",)), tmp_path)
    # adding seeds, arms or dispatch modes extends the run; changing what every run was trained with is refused
    check_config(ReproConfig(seeds=(1,), arms=("vanilla_grpo",), dispatch=("sequential",)), tmp_path)
    saved = json.loads((tmp_path / "repro.json").read_text())
    assert saved["seeds"] == [0, 1] and saved["arms"] == ["para_grpo", "vanilla_grpo"]
    assert saved["dispatch"] == ["parallel", "sequential"]
    with pytest.raises(ValueError, match="steps"):
        check_config(ReproConfig(steps=3), tmp_path)


def test_only_runs_that_completed_their_steps_enter_the_report(tmp_path):
    def run(arm, seed, step, steps):
        d = tmp_path / "arms" / arm / f"seed{seed}"
        (d / "checkpoint").mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"steps": steps}))
        if step is not None:
            (d / "checkpoint" / "state.json").write_text(json.dumps({"step": step}))
        return d

    done = run("vanilla_grpo", 0, 150, 150)
    run("vanilla_grpo", 1, 40, 150)  # still training (or interrupted): a checkpoint, not the last step
    run("para_grpo", 0, None, 150)  # killed before its first checkpoint
    assert finished_runs(tmp_path) == [("vanilla_grpo", 0, done)]


def _arm(tmp_path, *, step=3, metrics=(1, 2, 3), config=True):
    run = tmp_path / "arms" / "para_grpo" / "seed0"
    (run / "checkpoint").mkdir(parents=True)
    (run / "checkpoint" / "state.json").write_text(json.dumps({"step": step}))
    if config:
        (run / "config.json").write_text(json.dumps({"steps": 12}))
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "loss": 0.0}) + "\n" for s in metrics))
    return run


def test_a_run_whose_files_do_not_cover_its_checkpoint_is_damaged(tmp_path):
    from paravt.experiments.repro.train import damage

    assert damage(_arm(tmp_path)) is None
    assert "no config.json" in damage(_arm(tmp_path / "a", config=False))
    assert "metrics hold steps 4..12" in damage(_arm(tmp_path / "b", step=12, metrics=range(4, 13)))
    run = _arm(tmp_path / "c")
    (run / "checkpoint" / "state.json").write_text("{")
    assert "cannot be read" in damage(run)


def test_a_run_directory_is_never_touched_under_a_live_writer(tmp_path):
    import subprocess
    import sys
    import textwrap

    from paravt.experiments.repro.train import wait_for_writer
    from paravt_env.storage import OutputLocked

    run = _arm(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path[:0] = {sys.path!r}
        from paravt_env.storage import DirectoryLock
        lock = DirectoryLock({str(run)!r}, "train.lock", "trained")
        print("locked", flush=True)
        time.sleep({{}})
    """).replace("{}", "1.5")], stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(OutputLocked, match=r"being trained by pid \d+.*earlier paravt repro"), wait_for_writer(run, wait_s=0.2):
        pass
    with wait_for_writer(run, wait_s=30):  # the writer exits: the rerun goes on
        assert holder.poll() is not None
    holder.wait()


def test_a_damaged_or_checkpointless_arm_is_trained_again_a_sound_one_resumed(tmp_path, monkeypatch):
    """run_arm's decision, with the trainer replaced by one that records what it was asked (the real trainer's
    resume is tested bit for bit in tests/paravt/learners)."""
    import paravt.learners.trainer as trainer_module
    from paravt.experiments.repro import train as repro

    asked = []

    class Recording:
        def __init__(self, cfg, run, resume, progress):
            asked.append((sorted(p.name for p in run.iterdir()) if run.exists() else None, resume))

        def train(self):
            pass

        def close(self):
            pass

    monkeypatch.setattr(trainer_module, "Trainer", Recording)
    monkeypatch.setattr(repro, "arm_config", lambda cfg, arm, seed, cs: repro.base_config(cfg))
    cfg = repro.ReproConfig(steps=12)
    sound = _arm(tmp_path)
    repro.run_arm(cfg, tmp_path, "para_grpo", 0, progress=False)
    assert asked[-1] == (["checkpoint", "config.json", "metrics.jsonl", "train.lock"], True) and sound.exists()
    (sound / "config.json").unlink()
    repro.run_arm(cfg, tmp_path, "para_grpo", 0, progress=False)
    assert asked[-1] == (None, False)  # removed, trained from the start
    empty = tmp_path / "arms" / "para_grpo" / "seed0"
    empty.mkdir(parents=True)
    (empty / "metrics.jsonl").write_text("")
    repro.run_arm(cfg, tmp_path, "para_grpo", 0, progress=False)
    assert asked[-1] == (None, False)


def test_a_moved_repro_directory_points_its_arms_at_the_cold_start_where_it_is_now(tmp_path):
    """Copied elsewhere, an unfinished arm's saved config names the old cold start path; a resume must keep the
    run's settings, so the path is followed (only a path that is this repro's own cold start)."""
    from paravt.experiments.repro.train import follow_move

    run = tmp_path / "arms" / "para_grpo" / "seed0"
    run.mkdir(parents=True)
    here = tmp_path / "coldstart" / "coldstart" / "model"
    (run / "config.json").write_text(json.dumps({"model": {"path": "/elsewhere/repro/coldstart/coldstart/model"}, "steps": 9}))
    follow_move(run, here)
    assert json.loads((run / "config.json").read_text()) == {"model": {"path": str(here)}, "steps": 9}
    (run / "config.json").write_text(json.dumps({"model": {"path": "/elsewhere/another_checkpoint"}}))
    follow_move(run, here)  # not this repro's cold start: left for the resume check to refuse
    assert json.loads((run / "config.json").read_text())["model"]["path"] == "/elsewhere/another_checkpoint"
    follow_move(tmp_path / "arms" / "ea_only" / "seed0", here)  # no run yet: nothing to do
