"""``paravt export verl`` from the command line (verl itself is not needed to write its files; its own reading of them
is tested in verl's environment, tests/paravt/learners/adapters/verl)."""

import yaml

from paravt.cli import main
from paravt.learners.adapters.recipe_env import processor_pixels
from paravt.learners.config import load_recipe


def test_export_verl_for_a_serve_env_from_the_command_line(synth_small, tmp_path, capsys):
    data, samples = synth_small
    out = tmp_path / "verl"
    assert main(["export", "verl", "--recipe", "paragrpo_qwen3vl_8b", "--data", str(data / "samples.jsonl"),
                 "--out", str(out), "--env-url", "http://env-host:8100", "rollout.prompts_per_step=3"]) == 0  # fmt: skip
    [loop] = yaml.safe_load((out / "agent_loops.yaml").read_text())
    assert loop["env_url"] == "http://env-host:8100" and "data" not in loop  # the workers reset the server
    printed = capsys.readouterr().out
    assert f"train with: python -m verl.trainer.main_ppo --config-path {out.resolve()} --config-name paravt_verl" in printed
    config = yaml.safe_load((out / "paravt_verl.yaml").read_text())
    # verl's own default val_files names its GSM8K example: the export sets it, and turns verl's validation off
    assert config["data"]["val_files"] == config["data"]["train_files"]
    recipe = load_recipe("paragrpo_qwen3vl_8b")
    # nothing left to verl's example defaults: the recipe's 700 steps (8 samples at 3 prompts a step: 2 steps an
    # epoch, 350 epochs), its checkpoint interval and seed, this run's names and directory, console logging (verl's
    # default also logs to wandb, which stops a machine without a wandb login)
    assert config["trainer"] == {"val_before_train": False, "test_freq": -1, "total_training_steps": recipe.steps,
                                 "total_epochs": 350, "save_freq": recipe.save_every, "project_name": "paravt",
                                 "experiment_name": "verl", "logger": ["console"],
                                 "default_local_dir": str(out.resolve() / "checkpoints")}  # fmt: skip
    assert recipe.steps == 700 and config["data"]["seed"] == recipe.seed
    # one TransferQueue storage unit: verl's 8 each hold a CPU, and fewer free CPUs stop Ray before the GPU check
    assert config["transfer_queue"]["backend"]["SimpleStorage"]["num_data_storage_units"] == 1
    # the local trainer's pixel budget and GRPO settings, in verl's keys
    assert config["data"]["mm_processor_kwargs"] == processor_pixels(recipe)
    assert config["algorithm"]["adv_estimator"] == "grpo" and config["algorithm"]["use_kl_in_reward"] is True
    assert config["actor_rollout_ref"]["actor"]["ppo_micro_batch_size_per_gpu"] == 1
    assert config["actor_rollout_ref"]["actor"]["clip_ratio_low"] == recipe.grpo.eps_clip


def test_export_verl_reads_its_samples_from_data(synth_small, tmp_path):
    data, _ = synth_small
    out = tmp_path / "verl"
    assert main(["export", "verl", "--recipe", "paragrpo_qwen3vl_8b", "--data", str(data / "samples.jsonl"),
                 "--out", str(out), "rollout.prompts_per_step=8"]) == 0  # fmt: skip
    [loop] = yaml.safe_load((out / "agent_loops.yaml").read_text())
    assert loop["data"] == str((data / "samples.jsonl").resolve()) and "env_url" not in loop


def test_export_verl_refuses_a_split_smaller_than_one_step(synth_small, tmp_path, capsys):
    """verl drops an epoch's last incomplete batch: 8 samples at the recipe's 16 prompts a step would train 0 steps
    without a word. Refused by name, nothing written."""
    data, _ = synth_small
    out = tmp_path / "verl"
    assert main(["export", "verl", "--recipe", "paragrpo_qwen3vl_8b", "--data", str(data / "samples.jsonl"),
                 "--out", str(out)]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "8 samples, fewer than rollout.prompts_per_step=16" in err and "Traceback" not in err
    assert not out.exists()
