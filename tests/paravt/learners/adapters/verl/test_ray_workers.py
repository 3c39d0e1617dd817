"""ParaVT trajectories through verl's own rollout orchestration under Ray (``nox -s "engine(name='verl')"``), as
``main_ppo`` runs it: verl's ``AgentLoopManager`` starts two Ray ``AgentLoopWorker`` actors; each worker reads
``agent_loops.yaml`` itself (``actor_rollout_ref.rollout.agent.agent_loop_config_path``, written by ``paravt export
verl``), loads the processor through verl's own ``hf_processor`` (``AutoProcessor``, unmodified), and plays three
trajectories of the released recipe (sub-agent mode), every turn and every sub-agent summary sent through verl's
``LLMServerClient`` and ``GlobalRequestLoadBalancer`` to a server replica. The server is the only stand-in: a Ray actor behind verl's ``generate`` contract (``scripted_server``).

Each worker process imports ``paravt.learners.adapters.verl.agent_loop`` only when hydra builds its first
trajectory: a module-level registration would replace the configured entry there and the worker's later
trajectories would be built without their env (verl 0.9.1's ``register`` overwrites).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from engine_env import PARA_GRPO_CPU, SCRIPT, engine_import, local_episode  # tests/engine_env.py

engine_import("verl", "verl.experimental.agent_loop.agent_loop")
torch = pytest.importorskip("torch")
ray = pytest.importorskip("ray")

from hydra import compose, initialize_config_dir  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopManager  # noqa: E402
from verl.protocol import DataProto  # noqa: E402
from verl.utils import hf_processor, hf_tokenizer  # noqa: E402
from verl.utils.dataset.rl_dataset import collate_fn, get_dataset_class  # noqa: E402
from verl.workers.rollout.llm_server import LLMServerClient  # noqa: E402
from verl.workers.rollout.router import GlobalRequestLoadBalancer  # noqa: E402

from paravt.cli import main  # noqa: E402


def _standin():
    """``scripted_server.py`` beside this file, as a module Ray can ship to its workers by value."""
    name = "paravt_verl_scripted_server"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("scripted_server.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


scripted_server = _standin()
OVERRIDES = [*PARA_GRPO_CPU, "rollout.group_size=2", "rollout.prompts_per_step=3", "rollout.max_new_tokens=96"]
WORKERS, PROMPTS, GROUP = 2, 3, 2  # 6 trajectories: 3 per worker


@pytest.fixture
def local_ray():
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, ignore_reinit_error=False)
    # the stand-in server's class goes to the workers by value: its module is not importable there
    ray.cloudpickle.register_pickle_by_value(scripted_server)
    yield
    ray.shutdown()


def exported(tiny_qwen3, synth_small, tmp_path):
    data, samples = synth_small
    out = tmp_path / "verl"
    assert main(["export", "verl", "--recipe", "paragrpo_qwen3vl_8b", "--data", str(data / "samples.jsonl"),
                 "--out", str(out), *OVERRIDES, f"model.path={tiny_qwen3}"]) == 0  # fmt: skip
    with initialize_config_dir(config_dir=str(out), version_base=None):
        cfg = compose(config_name="paravt_verl", overrides=[f"actor_rollout_ref.rollout.agent.num_workers={WORKERS}"])
    return cfg, samples


def test_verls_agent_loop_manager_plays_several_paravt_trajectories_per_ray_worker(tiny_qwen3, synth_small, tmp_path,
                                                                                  local_ray):  # fmt: skip
    assert scripted_server.SCRIPT == SCRIPT
    cfg, samples = exported(tiny_qwen3, synth_small, tmp_path)
    tok = hf_tokenizer(str(tiny_qwen3))
    processor = hf_processor(str(tiny_qwen3))  # AutoProcessor, as every worker loads it
    assert type(processor).__name__ == "Qwen3VLProcessor" and hasattr(processor, "get_rope_index")
    dataset = get_dataset_class(cfg.data)(cfg.data.train_files, tok, cfg.data, processor)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(PROMPTS)]))
    batch = batch.repeat(cfg.actor_rollout_ref.rollout.n, interleave=True)
    assert len(batch) == PROMPTS * GROUP

    server = ray.remote(scripted_server.ScriptedServer).remote(str(tiny_qwen3), cfg.actor_rollout_ref.rollout.temperature)
    balancer = ray.remote(GlobalRequestLoadBalancer).remote(servers={"standin-0": server})
    manager = AgentLoopManager.create(cfg, llm_client=LLMServerClient(cfg, load_balancer_handle=balancer))
    assert len(manager.agent_loop_workers) == WORKERS
    out = manager.generate_sequences(batch)

    assert len(out) == PROMPTS * GROUP
    # every trajectory's two turns, and the recipe's sub-agent summary of each of its two crops, reached the server
    assert ray.get(server.turn_counts.remote()) == {0: 3 * PROMPTS * GROUP, 1: PROMPTS * GROUP}
    b, extra = out.batch, out.non_tensor_batch
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    mm = extra["multi_modal_inputs"]
    for i in range(len(out)):
        index = int(extra["extra_info"][i]["index"])
        local = local_episode(samples, index, ["env.tool_result=subagent"], subagent=lambda request: "a red circle")
        # every trajectory, on both workers, was built with the exported env: the local trainer's K, reward, frames
        assert extra["frame_budget"][i] == local["K"]
        assert extra["reward_breakdown"][i] == local["breakdown"]
        assert float(b["rm_scores"][i].sum()) == pytest.approx(local["reward"])
        assert extra["executed_tool_calls"][i] == 2 and extra["dropped_tool_responses"][i] == 0
        assert mm[i]["image_grid_thw"].shape[0] == sum(len(f) for f in local["frames"])
        # the pads verl's processor expanded are exactly the features of the images it re-processed
        assert int((b["input_ids"][i] == pad).sum()) == int(mm[i]["image_grid_thw"].prod(dim=-1).sum()) // 4
    timing = out.meta_info["timing"]
    assert timing["agent_loop/tool_calls/max"] > 0  # the env stepped inside the workers


def test_verls_default_v1_trainer_plays_paravt_trajectories_through_transfer_queue(tiny_qwen3, synth_small, tmp_path,
                                                                                   local_ray):  # fmt: skip
    """verl's default trainer path (``trainer.use_v1``), as ``TaskRunnerV1.run`` drives it up to the GPU workers:
    TransferQueue started from the exported config (one storage unit), verl's own v1 trainer class reading the parquet
    into its dataloader (``_init_tokenizer`` / ``_init_dataloader``), ``AgentLoopManagerTQ`` with two Ray
    ``AgentLoopWorkerTQ`` actors, one step's prompts submitted by the trainer's own ``prepare_step``, and the
    trajectories sampled back by its ``ReplayBuffer`` and read from TransferQueue as its update reads them. Only the
    inference server is stood in (and the actor and reference workers, which need GPUs, are never built)."""
    import transfer_queue as tq
    from omegaconf import OmegaConf, open_dict
    from verl.trainer.ppo.v1 import AgentLoopManagerTQ, get_trainer_cls

    cfg, samples = exported(tiny_qwen3, synth_small, tmp_path)
    assert cfg.trainer.use_v1  # verl 0.9.1's default
    with open_dict(cfg):
        cfg.transfer_queue.enable = True  # as TaskRunnerV1.run sets it
    OmegaConf.resolve(cfg)
    tq.init(cfg.transfer_queue)
    try:
        trainer = get_trainer_cls(cfg.trainer.v1.trainer_mode)(config=cfg)
        trainer._init_tokenizer()
        trainer._init_dataloader()
        assert len(trainer.train_dataset) == len(samples) and trainer.total_training_steps == cfg.trainer.total_training_steps
        server = ray.remote(scripted_server.ScriptedServer).remote(str(tiny_qwen3), cfg.actor_rollout_ref.rollout.temperature)
        balancer = ray.remote(GlobalRequestLoadBalancer).remote(servers={"standin-0": server})
        manager = AgentLoopManagerTQ.create(config=cfg, llm_client=LLMServerClient(cfg, load_balancer_handle=balancer))
        assert len(manager.agent_loop_workers) == WORKERS
        trainer.agent_loop_manager, trainer.global_steps = manager, 1
        trainer.prepare_step()  # one step's prompts into TransferQueue and out to the workers
        meta, _ = trainer.replay_buffer.sample(global_steps=1, partition_id="train", batch_size=cfg.data.train_batch_size)
        assert len(meta.keys) == PROMPTS * GROUP
        data = tq.kv_batch_get(keys=meta.keys, partition_id=meta.partition_id)
        assert ray.get(server.turn_counts.remote()) == {0: 3 * PROMPTS * GROUP, 1: PROMPTS * GROUP}
        tok = hf_tokenizer(str(tiny_qwen3))
        pad = tok.convert_tokens_to_ids("<|image_pad|>")
        for i in range(len(meta.keys)):
            extra = data["extra_fields"][i]
            index = int(data["extra_info"][i]["index"])
            local = local_episode(samples, index, ["env.tool_result=subagent"], subagent=lambda request: "a red circle")
            assert extra["frame_budget"] == local["K"] and extra["reward_breakdown"] == local["breakdown"]
            assert extra["executed_tool_calls"] == 2 and extra["dropped_tool_responses"] == 0
            assert float(data["rm_scores"][i].sum()) == pytest.approx(local["reward"])
            mm = data["multi_modal_inputs"][i]
            assert mm["image_grid_thw"].shape[0] == sum(len(f) for f in local["frames"])
            # the pads in the stored sequence are exactly the features of the images verl re-processed
            assert int((data["input_ids"][i] == pad).sum()) == int(mm["image_grid_thw"].prod(dim=-1).sum()) // 4
            mask = data["response_mask"][i]
            assert len(mask) == len(data["responses"][i]) and 0 < int(mask.sum()) < len(mask)  # tool tokens masked
    finally:
        tq.close()
