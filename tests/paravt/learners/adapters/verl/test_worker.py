"""ParaVT trajectories through verl's own pipeline, under verl's own pins (``nox -s "engine(name='verl')"``):
``paravt export verl`` writes the parquet and the config; verl's Hydra composes ``paravt_verl.yaml`` on its
``ppo_trainer``; verl's ``RLHFDataset`` and ``collate_fn`` read the parquet into a ``DataProto``; a real
``AgentLoopWorker`` (no Ray: the class the manager wraps) runs ``generate_sequences``: our loop per trajectory,
then verl's ``_agent_loop_postprocess`` (padding, multimodal inputs, M-RoPE position ids) and ``_postprocess``
(the batch). The batch then goes through the tiny model's forward as verl's actor feeds it, and every generated
token's log-prob must match what the server reported: pads and features agree, positions are right.

The server is the tiny Qwen3-VL behind verl's ``generate`` contract (``scripted_server``), with the main agent's
turns scripted (a random model writes no valid call) and scored by the model. verl's ``hf_processor`` loads
``AutoProcessor`` unmodified (the nox session installs the repository's torchvision stand-in, whose absence would
make it return None on a CPU machine) and binds ``get_rope_index`` as it does on a GPU machine.
"""

import asyncio
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from engine_env import PARA_GRPO_CPU, SCRIPT, engine_import, local_episode  # tests/engine_env.py

engine_import("verl", "verl.experimental.agent_loop.agent_loop")
torch = pytest.importorskip("torch")

from hydra import compose, initialize_config_dir  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402
from verl.protocol import DataProto  # noqa: E402
from verl.utils import hf_processor, hf_tokenizer  # noqa: E402
from verl.utils.dataset.rl_dataset import collate_fn, get_dataset_class  # noqa: E402

import paravt.learners.adapters.verl.agent_loop  # noqa: E402,F401  (registers "paravt")
from paravt.cli import main  # noqa: E402
from paravt.learners.adapters.recipe_env import processor_pixels  # noqa: E402
from paravt.learners.config import load_recipe  # noqa: E402
from paravt.learners.run_setup import env_config  # noqa: E402
from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt_env import VideoToolEnv  # noqa: E402
from paravt_env.messages import observation_messages  # noqa: E402

# PARA-GRPO as released at CPU size (engine_env.PARA_GRPO_CPU), two rollouts of two prompts.
OVERRIDES = [*PARA_GRPO_CPU, "rollout.group_size=2", "rollout.prompts_per_step=2", "rollout.max_new_tokens=96"]
TURNS = SCRIPT


def _standin():
    name = "paravt_verl_scripted_server"  # the module test_ray_workers ships to Ray by value: loaded once
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("scripted_server.py"))
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


ScriptedServer = _standin().ScriptedServer


def run_worker(tiny_qwen3, synth_small, tmp_path, extra=(), mode="frames"):
    data, samples = synth_small
    out = tmp_path / "verl"
    assert main(["export", "verl", "--recipe", "paragrpo_qwen3vl_8b", "--data", str(data / "samples.jsonl"),
                 "--out", str(out), *OVERRIDES, f"env.tool_result={mode}", f"model.path={tiny_qwen3}"]) == 0  # fmt: skip
    with initialize_config_dir(config_dir=str(out), version_base=None):
        cfg = compose(config_name="paravt_verl", overrides=list(extra))
    tok = hf_tokenizer(str(tiny_qwen3))
    processor = hf_processor(str(tiny_qwen3))
    assert processor is not None and hasattr(processor, "get_rope_index")  # verl bound the M-RoPE positions
    dataset = get_dataset_class(cfg.data)(cfg.data.train_files, tok, cfg.data, processor)
    assert len(dataset) == len(samples)
    rows = [dataset[i] for i in range(2)]
    batch = DataProto.from_single_dict(collate_fn(rows)).repeat(cfg.actor_rollout_ref.rollout.n, interleave=True)
    server = ScriptedServer(str(tiny_qwen3), cfg.actor_rollout_ref.rollout.temperature)
    worker = AgentLoopWorker(cfg, llm_client=server)
    return cfg, samples, server.policy, asyncio.run(worker.generate_sequences(batch))


def pads_and_features(processor_like, ids, mm) -> tuple[int, int]:
    pad = processor_like.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    grids = mm.get("image_grid_thw")
    features = 0 if grids is None else int(grids.prod(dim=-1).sum()) // 4  # merge 2 x 2
    return int((ids == pad).sum()), features


@pytest.mark.parametrize("mode", ["frames", "subagent"])
def test_verl_worker_batches_paravt_trajectories_the_actor_can_train_on(tiny_qwen3, synth_small, tmp_path, mode):
    cfg, samples, policy, batch = run_worker(tiny_qwen3, synth_small, tmp_path, mode=mode)
    b = batch.batch
    n = len(batch)
    assert n == 4 and b["position_ids"].shape == (n, 4, b["input_ids"].shape[1])  # text + 3 M-RoPE rows
    assert b["prompts"].shape[1] == cfg.data.max_prompt_length and b["responses"].shape[1] == cfg.data.max_response_length
    mm = batch.non_tensor_batch["multi_modal_inputs"]
    proc = hf_processor(str(tiny_qwen3))
    model = policy.model
    for i in range(n):
        ids = b["input_ids"][i]
        pads, features = pads_and_features(proc, ids, mm[i])
        assert pads == features > 0
        index = int(batch.non_tensor_batch["extra_info"][i]["index"])
        local = local_episode(samples, index, [f"env.tool_result={mode}"],
                              subagent=(lambda request: "a red circle") if mode == "subagent" else None)  # fmt: skip
        # the same reward (score on the last response token), K and frames as the local trainer's env
        assert float(b["rm_scores"][i].sum()) == pytest.approx(local["reward"])
        assert batch.non_tensor_batch["frame_budget"][i] == local["K"] and local["K"] in (4, 8)
        assert batch.non_tensor_batch["reward_breakdown"][i] == local["breakdown"]
        assert batch.non_tensor_batch["executed_tool_calls"][i] == 2  # the script's two parallel crops
        assert mm[i]["image_grid_thw"].shape[0] == sum(len(f) for f in local["frames"])
        # the actor's forward on exactly what verl batched: the server's log-probs at every generated token
        attn = b["attention_mask"][i : i + 1]
        with torch.no_grad():
            logits = model(input_ids=ids[None], attention_mask=attn, position_ids=b["position_ids"][i : i + 1].transpose(0, 1),
                           pixel_values=mm[i]["pixel_values"], image_grid_thw=mm[i]["image_grid_thw"]).logits.float()  # fmt: skip
        logits[..., policy.suppress_ids] = float("-inf")  # the server samples with image pads suppressed
        logp = torch.log_softmax(logits[0, :-1] / policy.temperature, -1).gather(-1, ids[1:, None])[:, 0]
        p = b["prompts"].shape[1]
        resp_mask = b["response_mask"][i].bool()
        got = logp[p - 1 : p - 1 + resp_mask.numel()][resp_mask]
        want = b["rollout_log_probs"][i][resp_mask]
        assert resp_mask.sum() > 0 and float((got - want).abs().max()) < 1e-4
        # the prefix is prompt, not action: every assistant turn opens with "<think>\n" outside the mask
        real = b["attention_mask"][i][b["prompts"].shape[1] :].bool()
        text = proc.tokenizer.decode(b["responses"][i][(b["response_mask"][i] == 0) & real])
        assert "<think>" not in proc.tokenizer.decode(b["responses"][i][resp_mask])
        assert proc.tokenizer.decode(b["prompts"][i]).endswith("<|im_start|>assistant\n<think>\n")
        assert text.endswith("<|im_start|>assistant\n<think>\n")
        # sub-agent mode: the crops come back as summaries generated on verl's server, no crop frame
        assert ("sub-agent summary:" in text) == (mode == "subagent")


def test_a_tool_response_that_does_not_fit_is_not_committed(tiny_qwen3, synth_small, tmp_path):
    # room for the first turn (~60 tokens) but not for its two crops' frames and text
    cfg, samples, policy, batch = run_worker(tiny_qwen3, synth_small, tmp_path, extra=["data.max_response_length=160"])
    b = batch.batch
    mm = batch.non_tensor_batch["multi_modal_inputs"]
    proc = hf_processor(str(tiny_qwen3))
    for i in range(len(batch)):
        pads, features = pads_and_features(proc, b["input_ids"][i], mm[i])
        assert pads == features  # the images verl re-processes are exactly those whose pads are in the tokens
        assert batch.non_tensor_batch["dropped_tool_responses"][i] == 1
        assert mm[i]["image_grid_thw"].shape[0] == batch.non_tensor_batch["frame_budget"][i]  # the overview only
        assert np.isfinite(float(b["rm_scores"][i].sum()))
        assert batch.non_tensor_batch["reward_breakdown"][i]["accuracy"] == 0.0  # it ended unanswered


def test_the_exported_config_is_verls_own_and_sized_from_the_recipe(tiny_qwen3, synth_small, tmp_path):
    from verl.utils.config import omega_conf_to_dataclass

    from paravt.learners.adapters.budget import recipe_budget

    data, samples = synth_small
    out = tmp_path / "verl"
    assert main(["export", "verl", "--recipe", "paragrpo_qwen3vl_8b", "--data", str(data / "samples.jsonl"),
                 "--out", str(out), "rollout.prompts_per_step=8"]) == 0  # fmt: skip
    with initialize_config_dir(config_dir=str(out), version_base=None):
        cfg = compose(config_name="paravt_verl", overrides=["actor_rollout_ref.model.path=Qwen/Qwen3-VL-8B-Instruct"])
    budget = recipe_budget(load_recipe("paragrpo_qwen3vl_8b"), samples)
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)  # as verl's AgentLoopWorker reads it
    assert rollout.prompt_length == budget.prompt and rollout.response_length == budget.response
    assert rollout.limit_images == budget.max_images and rollout.n == 8
    assert rollout.agent.default_agent_loop == "paravt" and cfg.data.max_prompt_length == budget.prompt
    # 64 frames of 50,176 pixels at 49 pads each, plus text; sub-agent mode: no crop frame reaches the main agent
    assert budget.overview_frames == 64 and budget.max_images == 64 and budget.prompt > 64 * 49


def test_the_policy_sees_the_local_trainers_prompt_token_for_token(tiny_qwen3, synth_small, tmp_path):
    """One observation whichever engine: the prompt verl's worker built for each trajectory (its Continuous Token
    builder on ``AutoProcessor``, at the exported ``data.mm_processor_kwargs``) is the local trainer's
    ``HFPolicy.encode`` of the same reset, token for token: the system prompt, the question, the think prefix and the
    same image tokens per frame (the recipe's pixel budget, not the processor's default)."""
    cfg, samples, _, batch = run_worker(tiny_qwen3, synth_small, tmp_path)
    recipe = load_recipe("paragrpo_qwen3vl_8b", [*OVERRIDES, "env.tool_result=frames", f"model.path={tiny_qwen3}"])
    local = HFPolicy.from_pretrained(tiny_qwen3, think_prefix=True, **processor_pixels(recipe))
    env = VideoToolEnv(samples, env_config(recipe))
    pad = local.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    b, width = batch.batch, batch.batch["prompts"].shape[1]
    per_frame = set()
    for i in range(len(batch)):
        obs, info = env.reset(options={"index": int(batch.non_tensor_batch["extra_info"][i]["index"])})
        want = list(local.encode(observation_messages(obs, info)).input_ids)
        got = b["prompts"][i][b["attention_mask"][i][:width].bool()].tolist()
        assert got == want
        per_frame.add(got.count(pad) / len(obs["frames"]))
    processed = local.process_images(list(obs["frames"][:1]))[1]  # the frame's grid at the recipe's budget
    assert per_frame == {int(processed.prod()) // 4} and per_frame != {16}  # 9 pads (3 x 3) at 12,544 pixels


def test_the_printed_launch_command_reaches_verls_gpu_check_and_no_earlier(tiny_qwen3, synth_small, tmp_path, capsys):
    """``paravt export verl`` prints the command to train with. Run as printed, from the directory the export was made
    in (a relative --out), in verl's environment with nothing stood in: verl's default trainer (v1) composes the
    config with Hydra, passes ``validate_config``, starts a local Ray, its ``TaskRunnerV1`` and TransferQueue, loads
    the tokenizer and processor, reads the exported parquet into its dataloaders, and stops at the first thing that
    needs a GPU: its resource pool's check. A hang (verl's eight TransferQueue storage units on a 2-CPU machine) or
    any earlier error fails here."""
    import os
    import shlex
    import subprocess

    data, _ = synth_small
    os.chdir(tmp_path)
    assert main(["export", "verl", "--recipe", "paragrpo_qwen3vl_8b", "--data", str(data / "samples.jsonl"),
                 "--out", "runs/verl", f"model.path={tiny_qwen3}", "rollout.prompts_per_step=4"]) == 0  # fmt: skip
    printed = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("train with: "))
    command = shlex.split(printed[len("train with: "):].split(" (plus")[0])
    assert command[:3] == ["python", "-m", "verl.trainer.main_ppo"] and Path(command[command.index("--config-path") + 1]).is_absolute()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    try:  # "python" is this environment's interpreter, as in the user's activated venv
        out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=480)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the printed command did not reach verl's GPU check in 480 s: {str(exc.stdout)[-2000:]}")
    log = out.stdout + out.stderr
    assert out.returncode != 0, log[-3000:]
    # where it stopped: verl's own resource check (8 GPUs a node, verl's default; none here)
    assert "ValueError: Total available GPUs 0 is less than total desired GPUs 8" in log, log[-3000:]
    # what ran before it: the default v1 trainer read the export's 8 samples, 2 steps an epoch, the recipe's 700 steps
    assert "'use_v1': True" in log and "train dataset size: 8, val dataset size: 8" in log
    assert "Total training steps: 700" in log
    grpo = load_recipe("paragrpo_qwen3vl_8b").grpo  # the release's KL: k1 in the reward, beta 0.01
    assert grpo.kl_in_reward and grpo.kl_coef == 0.01
    assert "'adv_estimator': 'grpo'" in log and "'use_kl_in_reward': True" in log and "'use_kl_loss': False" in log
    assert "gsm8k" not in log.lower() and "wandb" not in log.replace("'wandb'", "")  # nothing of verl's example
