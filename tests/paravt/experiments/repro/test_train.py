"""``paravt repro``'s arms change only what the paper changes, from one shared cold start."""

import json

import pytest

from paravt.experiments.repro.train import ARMS, ReproConfig, arm_config, check_config, finished_runs
from paravt.learners.run_setup import env_config


def _knobs(cfg):
    env = env_config(cfg)
    reward = env.reward
    return {"think_prefix": cfg.think_prefix, "gating": env.nframes_gating,
            "answer_suffix": reward.answer_suffix, "anchor": reward.anchor_weight,
            "prefix_scored": reward.score_forced_prefix}  # fmt: skip


def test_each_arm_turns_exactly_its_components_on(tmp_path):
    repro = ReproConfig(steps=7)
    knobs = {arm: _knobs(arm_config(repro, arm, 3, tmp_path / "cs")) for arm in ARMS}
    off = {"prefix_scored": False}
    assert knobs["vanilla_grpo"] == {"think_prefix": False, "gating": False, "answer_suffix": False, "anchor": 0.0, **off}
    assert knobs["para_grpo"] == {"think_prefix": True, "gating": True, "answer_suffix": True, "anchor": 0.5, **off}
    assert knobs["ea_only"] == {"think_prefix": True, "gating": False, "answer_suffix": True, "anchor": 0.5, **off}
    assert knobs["gating_only"] == {"think_prefix": False, "gating": True, "answer_suffix": False, "anchor": 0.0, **off}
    # the EA claim again under the reward that scores the forced <think> as the policy's opening tag
    on = {"prefix_scored": True}
    assert knobs["para_grpo_scored"] == {"think_prefix": True, "gating": True, "answer_suffix": True, "anchor": 0.5, **on}
    assert knobs["ea_only_scored"] == {"think_prefix": True, "gating": False, "answer_suffix": True, "anchor": 0.5, **on}
    # everything else is shared: the cold start, the seed, the steps, the optimiser and rollout settings
    cfgs = [arm_config(repro, arm, 3, tmp_path / "cs") for arm in ARMS]
    for cfg in cfgs:
        assert cfg.model.path == str(tmp_path / "cs") and cfg.seed == 3 and cfg.steps == 7
        assert cfg.sft.steps == 0 and cfg.perception.steps == 0
        assert (cfg.optim, cfg.rollout, cfg.grpo, cfg.env) == (cfgs[0].optim, cfgs[0].rollout, cfgs[0].grpo, cfgs[0].env)


def test_config_errors_and_resume_rules(tmp_path):
    with pytest.raises(ValueError, match="unknown arm"):
        ReproConfig(arms=("ppo",))
    with pytest.raises(ValueError, match="at least 1"):
        ReproConfig(steps=0)
    check_config(ReproConfig(seeds=(0,), arms=("para_grpo",)), tmp_path)
    # adding seeds or arms extends the run; changing what every run was trained with is refused
    check_config(ReproConfig(seeds=(1,), arms=("vanilla_grpo",)), tmp_path)
    saved = json.loads((tmp_path / "repro.json").read_text())
    assert saved["seeds"] == [0, 1] and saved["arms"] == ["para_grpo", "vanilla_grpo"]
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
