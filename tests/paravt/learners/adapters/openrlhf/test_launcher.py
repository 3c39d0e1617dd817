import json
import shlex
from pathlib import Path

import pytest
from engine_env import engine_import  # tests/engine_env.py

from paravt.cli import main
from paravt.learners.adapters.openrlhf.label import check_files, make_label, parse_label, read_label
from paravt.learners.adapters.openrlhf.launcher import (
    AGENT_FUNC,
    export_prompts,
    launch,
    max_images,
    openrlhf_command,
)
from paravt.learners.adapters.recipe_env import env_options
from paravt.learners.config import load_recipe
from paravt_env import EnvConfig, RewardConfig


def test_export_rows_carry_the_sample_and_the_recipes_env(synth_small, tmp_path, capsys):
    data, samples = synth_small
    assert main(["export", "openrlhf", "--recipe", "paragrpo_qwen3vl_8b", "--data", str(data),
                 "--out", str(tmp_path / "p.jsonl")]) == 0  # fmt: skip
    rows = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(rows) == len(samples)
    want = env_options(load_recipe("paragrpo_qwen3vl_8b"), "openrlhf")
    for row, s in zip(rows, samples, strict=True):
        sample, options, epoch = read_label(row["label"])
        assert sample == s and options == want and epoch == 0
        assert row["prompt"] == s.question_with_options()
    # the PARA-GRPO recipe's env: gating, sub-agents, the think prefix, the released reward
    assert want["nframes_gating"] and want["tool_result"] == "subagent" and want["response_prefix"] == "<think>\n"
    assert EnvConfig.from_kwargs(**{**want, "tool_result": "frames"}).reward == RewardConfig.paravt()
    cfg = load_recipe("tiny_cpu")
    assert export_prompts(samples[:1], tmp_path / "one.jsonl", cfg).read_text().count("\n") == 1


def test_a_label_without_its_env_is_refused_not_defaulted(synth_small):
    _, samples = synth_small
    with pytest.raises(ValueError, match="paravt export openrlhf --recipe"):
        read_label(samples[0].to_json())  # an old export: the sample alone
    with pytest.raises(ValueError, match="JSON"):
        read_label("{not json")
    with pytest.raises(ValueError, match="'env' must be an object"):
        read_label(json.dumps({"sample": samples[0].to_dict(), "env": 3}))
    assert read_label(make_label(samples[0], {"frame_budget": 4}, 2))[1:] == ({"frame_budget": 4}, 2)


def test_labels_name_files_by_absolute_paths(synth_small, tmp_path, monkeypatch):
    """A rollout actor runs in its Ray node's directory: ``--data data`` must not reach it as ``data/...``."""
    data, samples = synth_small
    (tmp_path / "data").symlink_to(data)
    monkeypatch.chdir(tmp_path)
    assert main(["export", "openrlhf", "--recipe", "paragrpo_qwen3vl_8b", "--data", "data", "--out", "p.jsonl",
                 "env.max_pixels=12544"]) == 0  # fmt: skip
    rows = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    labels = [parse_label(row["label"]) for row in rows]
    assert all(lb.sample.video_path == str(tmp_path / "data" / Path(s.video_path).name) for lb, s in zip(labels, samples, strict=True))
    # the local trainer's processor budget travels with the sample (the recipe's env at 784-12,544 pixels)
    assert {lb.processor_pixels for lb in labels} == {(784, 12544)}
    monkeypatch.chdir(data)  # elsewhere, the same label still names the same file
    check_files(labels[0].sample)
    # a subtitle file named relatively is made absolute too
    relative = samples[0].to_dict() | {"video_path": "data/v.mp4", "extra": {"subtitle_path": "subs/v.srt"}}
    made = json.loads(make_label(relative, {}))["sample"]
    assert made["video_path"] == str(data / "data" / "v.mp4") and made["extra"]["subtitle_path"] == str(data / "subs" / "v.srt")


def test_a_relative_or_missing_file_is_refused_by_name(synth_small, tmp_path):
    _, samples = synth_small
    relative = json.dumps({"sample": samples[0].to_dict() | {"video_path": "data/v.mp4"}, "env": {}})
    with pytest.raises(ValueError, match=rf"sample '{samples[0].id}' .*relative path .*'sample.video_path': 'data/v.mp4'"):
        parse_label(relative)
    missing = parse_label(make_label(samples[0].to_dict() | {"video_path": str(tmp_path / "gone.mp4")}, {})).sample
    with pytest.raises(FileNotFoundError, match=r"'sample.video_path' names .*gone.mp4.*host .*working directory"):
        check_files(missing)
    with pytest.raises(ValueError, match=r"'processor_pixels' must be \[min, max\]"):
        parse_label(json.dumps({"sample": samples[0].to_dict(), "env": {}, "processor_pixels": 12544}))


def test_command_maps_the_released_recipe():
    cfg = load_recipe("paragrpo_qwen3vl_8b")
    cmd = openrlhf_command(cfg, "prompts.jsonl", "out")
    assert cmd[1:3] == ["-m", "openrlhf.cli.train_ppo_ray"]
    args = " ".join(cmd)
    for expected in ("--rollout.n_samples_per_prompt 8", "--rollout.temperature 0.7", "--actor.adam.lr 2e-06",
                     "--algo.kl.init_coef 0.01", "--actor.eps_clip 0.2", "--algo.advantage.estimator group_norm",
                     "--actor.gradient_checkpointing_enable", "--ds.param_dtype bf16"):  # fmt: skip
        assert expected in args, expected
    assert cmd[cmd.index("--train.agent_func_path") + 1].endswith("paravt/learners/adapters/openrlhf/agent_func.py")
    # OpenRLHF opens these inside Ray actors, in their node's directory: absolute, whatever they were given as
    for flag, name in (("--data.prompt_dataset", "prompts.jsonl"), ("--ckpt.output_dir", "out"),
                       ("--train.agent_func_path", "agent_func.py")):  # fmt: skip
        assert Path(cmd[cmd.index(flag) + 1]).is_absolute() and cmd[cmd.index(flag) + 1].endswith(name), flag
    # the release's KL form (k1 in the reward: no --algo.kl.use_loss), token-mean loss, the ±20 clip on scaled
    # rewards as the same clip on the raw rewards the agent function returns ((±20 + 0.2) / 10)
    assert "--algo.kl.estimator k1" in args and "--algo.kl.use_loss" not in cmd
    assert "--actor.loss_agg_mode token-mean" in args and "--reward.clip_range -1.98 2.02" in args
    loss_form = openrlhf_command(load_recipe("paragrpo_qwen3vl_8b", ["grpo.kl_in_reward=false", "grpo.kl_estimator=k3",
                                 "grpo.loss_aggregation=sequence_mean"]), "p.jsonl", "out")  # fmt: skip
    assert "--algo.kl.use_loss" in loss_form and "seq-mean-token-mean" in loss_form
    assert max_images(cfg) == 64  # sub-agent mode: only the overview reaches the main agent
    frames = load_recipe("paragrpo_qwen3vl_8b", ["env.tool_result=frames"])
    assert max_images(frames) == 64 + 5 * 16 * 2


def test_command_names_a_local_checkpoint_absolutely_and_a_hub_id_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ckpt").mkdir()
    local = openrlhf_command(load_recipe("paragrpo_qwen3vl_8b", ["model.path=ckpt"]), "p.jsonl", "out")
    assert local[local.index("--actor.model_name_or_path") + 1] == str(tmp_path / "ckpt")
    hub = openrlhf_command(load_recipe("paragrpo_qwen3vl_8b", ["model.path=Qwen/Qwen3-VL-8B-Instruct"]), "p.jsonl", "out")
    assert hub[hub.index("--actor.model_name_or_path") + 1] == "Qwen/Qwen3-VL-8B-Instruct"


def test_launch_refuses_a_checkpoint_that_would_resize_every_frame(tmp_path, capsys):
    """Qwen3-VL's processor (65,536 pixels at least) would upscale every frame of paragrpo_qwen3vl_8b (at most 50,176),
    in vLLM and in OpenRLHF's processor alike: refused before Ray starts, with the fix."""
    ckpt = tmp_path / "qwen3vl8b_sft"
    ckpt.mkdir()
    size = {"shortest_edge": 65536, "longest_edge": 16777216}
    (ckpt / "preprocessor_config.json").write_text(json.dumps({"size": size, "patch_size": 16, "merge_size": 2}))
    cfg = load_recipe("paragrpo_qwen3vl_8b", [f"model.path={ckpt}"])
    with pytest.raises(ValueError, match=r"65536-16777216 pixels .*784-50176.*model.processor_min_pixels=65536"):
        launch(cfg, None, tmp_path / "run", dry_run=True)
    matching = load_recipe("paragrpo_qwen3vl_8b", [f"model.path={ckpt}", "model.processor_min_pixels=65536",
                                                   "model.processor_max_pixels=16777216"])  # fmt: skip
    assert launch(matching, None, tmp_path / "run", dry_run=True) == 0
    assert launch(load_recipe("paragrpo_qwen3vl_8b_release", [f"model.path={ckpt}"]), None, tmp_path / "run", dry_run=True) == 0


def test_env_options_rebuild_the_env_config():
    opts = env_options(load_recipe("paragrpo_qwen3vl_8b"), "openrlhf")
    cfg = EnvConfig.from_kwargs(**{**opts, "tool_result": "frames"})
    assert cfg.nframes_gating and cfg.reward == RewardConfig.paravt()
    vanilla = EnvConfig.from_kwargs(**{**env_options(load_recipe("vanilla_grpo_qwen3vl_8b"), "openrlhf"), "tool_result": "frames"})
    assert not vanilla.nframes_gating and vanilla.reward == RewardConfig.vanilla()
    for engine in ("openrlhf", "verl", "trl"):
        with pytest.raises(ValueError, match="local-only: .*one scalar"):
            env_options(load_recipe("paragrpo_qwen3vl_8b", ["para.anchoring=token"]), engine)
    assert env_options(load_recipe("paragrpo_qwen3vl_8b", ["para.anchoring=token"]), "local")["nframes_gating"]


def test_dry_run_prints_the_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    rc = main(["train", "--backend", "openrlhf", "--recipe", "paragrpo_qwen3vl_8b", "--out", str(tmp_path / "run"),
               "--dry-run", "data.synth_n=2"])  # fmt: skip
    assert rc == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    parts = shlex.split(line)
    assert "PARAVT_ENV_OPTIONS" not in line  # the env travels in the labels, not the driver's environment
    assert parts[1:3] == ["-m", "openrlhf.cli.train_ppo_ray"]
    # complete for one node: the vLLM engines the executor runs in, as many as GPUs
    assert parts[parts.index("--vllm.num_engines") + 1] == "8" and "--train.colocate_all" in parts
    # a dry run reads no data and writes nothing (the prompts file is written when the run is real)
    assert str(tmp_path / "run" / "openrlhf_prompts.jsonl") in parts
    assert not (tmp_path / "run").exists() and not (tmp_path / "cache").exists()


def test_agent_func_loads_by_file_path_like_openrlhf():
    """OpenRLHF imports --train.agent_func_path as a file, outside any package: no relative imports."""
    engine_import("openrlhf", "openrlhf.utils.agent")
    import importlib.util

    from openrlhf.utils.agent import AgentExecutorBase


    spec = importlib.util.spec_from_file_location("agent_func", AGENT_FUNC)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert issubclass(module.AgentExecutor, AgentExecutorBase)


def test_launch_says_the_local_selection_is_not_carried(tmp_path, capsys):
    """A recipe's validation selection (select.every) is the local trainer's: an OpenRLHF launch says it reports its
    last checkpoint instead of dropping the setting without a word."""
    assert launch(load_recipe("paragrpo_qwen3vl_8b", ["select.every=10", "data.validation_n=4"]), None, tmp_path / "a",
                  dry_run=True) == 0  # fmt: skip
    assert "select.every=10" in capsys.readouterr().err
    assert launch(load_recipe("paragrpo_qwen3vl_8b"), None, tmp_path / "b", dry_run=True) == 0
    assert "select.every" not in capsys.readouterr().err


def test_a_setting_openrlhf_would_drop_is_refused_by_name():
    cfg = load_recipe("paragrpo_qwen3vl_8b", ["rollout.include_subagents=true"])
    with pytest.raises(ValueError, match="rollout.include_subagents=true cannot run under OpenRLHF"):
        openrlhf_command(cfg, "prompts.jsonl", "out")


def test_the_recipes_steps_become_whole_passes_and_a_split_below_one_step_is_refused(synth_small, tmp_path, capsys):
    """OpenRLHF runs whole passes over the prompts; the launch sizes them to the recipe's steps, caps the prompts at
    whole steps (every step the recipe's size) and says when the passes round the steps up."""
    from paravt.learners.adapters.openrlhf.launcher import schedule

    cfg = load_recipe("paragrpo_qwen3vl_8b", ["rollout.prompts_per_step=3"])  # 8 prompts: 2 whole steps a pass
    assert schedule(cfg, 8) == {"max_samples": 6, "num_episodes": 350, "total": 700}
    assert schedule(load_recipe("paragrpo_qwen3vl_8b", ["steps=5", "rollout.prompts_per_step=3"]), 8)["total"] == 6
    cmd = openrlhf_command(cfg, "p.jsonl", "out", n_samples=8)
    assert cmd[cmd.index("--train.num_episodes") + 1] == "350" and cmd[cmd.index("--data.max_samples") + 1] == "6"
    assert cmd[cmd.index("--train.batch_size") + 1] == str(3 * cfg.rollout.group_size)  # one update a step
    with pytest.raises(ValueError, match="8 samples, fewer than rollout.prompts_per_step=16"):
        openrlhf_command(load_recipe("paragrpo_qwen3vl_8b"), "p.jsonl", "out", n_samples=8)
    data, _ = synth_small
    run = tmp_path / "run"
    assert main(["train", "--backend", "openrlhf", "--recipe", "paragrpo_qwen3vl_8b", "--out", str(run),
                 f"data.path={data / 'samples.jsonl'}", "model.path=Qwen/Qwen3-VL-8B-Instruct"]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "fewer than rollout.prompts_per_step=16" in err and "Traceback" not in err and not run.exists()


def gpu_request(line: str) -> bool:
    """Ray's report of a request no node can place: the actor's placement group bundle of one GPU and one CPU."""
    return "No available node types can fulfill resource request" in line and "'GPU': 1.0" in line


def test_the_launched_command_reaches_openrlhfs_gpu_request_and_no_earlier(tiny_qwen3, synth_small, tmp_path):
    """``paravt train --backend openrlhf`` as a user runs it, in OpenRLHF's environment: the prompts written, the
    command launched, and OpenRLHF's ``train_ppo_ray`` parses every flag (its own argparse and checks), starts a local
    Ray, builds its DeepSpeed strategy, and stops at its first GPU request (the actor's placement group), which Ray
    reports it cannot place. vLLM and flash-attn, CUDA-only, are the stand-ins on the path (``vllm_standin``,
    ``flash_attn_standin``, whose functions refuse to run); DeepSpeed is the real package."""
    engine_import("openrlhf", "deepspeed")
    import os
    import signal
    import subprocess
    import sys
    import time

    here = Path(__file__).parent
    data, _ = synth_small
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here / "vllm_standin"), str(here / "flash_attn_standin")]),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", "OMP_NUM_THREADS": "1"}
    run = tmp_path / "run"
    proc = subprocess.Popen(["paravt", "train", "--backend", "openrlhf", "--recipe", "paragrpo_qwen3vl_8b", "--out",
                             str(run), "--gpus", "1", f"data.path={data / 'samples.jsonl'}", f"model.path={tiny_qwen3}",
                             "rollout.prompts_per_step=3"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    log, deadline = [], time.monotonic() + 300
    try:
        for line in proc.stdout:  # the GPU request is the last thing it does: read until Ray reports it
            log.append(line)
            if gpu_request(line) or time.monotonic() > deadline:
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    text = "".join(log)
    assert any(gpu_request(x) for x in log), text[-3000:]
    assert "Traceback" not in text
    printed = next(x for x in log if "-m openrlhf.cli.train_ppo_ray" in x)
    cmd = shlex.split(printed)
    assert cmd[cmd.index("--data.prompt_dataset") + 1] == str(run / "openrlhf_prompts.jsonl")
    # OpenRLHF's parsed arguments (it prints them before the request): the recipe's passes and batch
    assert "num_episodes=350" in text and "max_samples=6" in text and "batch_size=24" in text
    assert len((run / "openrlhf_prompts.jsonl").read_text().splitlines()) == 8
