"""OpenRLHF's own rollout orchestration on the rows of ``paravt export openrlhf``, with only vLLM stood in.

``create_vllm_engines`` starts its ``RolloutRayActor`` under a local Ray (the actor loads our executor by file path
and builds its engine through ``vllm.AsyncLLMEngine``: ``vllm_standin``, the tiny Qwen3-VL behind vLLM's request
contract); OpenRLHF's ``blending_datasets`` and ``PromptDataset`` read the exported JSONL into the dataloader
``prepare_datasets`` builds (that module imports flash-attn, GPU-only); ``SamplesGenerator`` dispatches the prompts to
the actor and turns each response into an ``Experience``; ``Experience.concat_experiences`` batches them as the
experience maker does for the trainer, and one forward pass of the model over each experience gives the engine's
log-probs. The processor everywhere is the one OpenRLHF's ``get_tokenizer`` loads.

The Ray cluster is started from one directory and the driver works in another, as on a cluster whose head was
started elsewhere: the export names its data relatively (``--data data``), and the rollout actor must still open
the videos (before the fix the labels carried ``data/...`` and the actor failed with ``FileNotFoundError``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from engine_env import PARA_GRPO_CPU, SCRIPT, engine_import, local_episode  # tests/engine_env.py

engine_import("openrlhf", "openrlhf.utils.agent")
ray = engine_import("openrlhf", "ray")
torch = pytest.importorskip("torch")

from paravt.cli import main  # noqa: E402
from paravt.learners.adapters.budget import recipe_budget  # noqa: E402
from paravt.learners.adapters.openrlhf.launcher import AGENT_FUNC  # noqa: E402
from paravt.learners.config import load_recipe  # noqa: E402
from paravt.policies.encoded import Encoded  # noqa: E402
from paravt.policies.hf import HFPolicy  # noqa: E402

OVERRIDES = [*PARA_GRPO_CPU, "rollout.max_new_tokens=24"]  # the released recipe at CPU size; short sub-agent replies
GROUP = 2  # rollouts per prompt


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, vllm_standin):
    """A local Ray started from its own directory (its actors run there), the stand-in vLLM importable by them, a
    GPU declared for ``create_vllm_engines``' placement group (the stand-in serves on the CPU). Shut down after."""
    head = tmp_path_factory.mktemp("ray_head")
    log = head / "served.jsonl"
    env_vars = {
        "PYTHONPATH": os.pathsep.join(p for p in (str(vllm_standin), os.environ.get("PYTHONPATH", "")) if p),
        "PARAVT_VLLM_SCRIPT": json.dumps(SCRIPT), "PARAVT_VLLM_LOG": str(log), "OMP_NUM_THREADS": "1",
    }  # fmt: skip
    here = os.getcwd()
    os.chdir(head)  # Ray's workers start in the directory the cluster was started from
    try:
        ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, runtime_env={"env_vars": env_vars})
    finally:
        os.chdir(here)
    try:
        yield head, log
    finally:
        ray.shutdown()


class Strategy:
    """What OpenRLHF's driver-side code reads of its ``DeepspeedStrategy`` (the strategy's DeepSpeed side is GPU-only):
    the arguments, logging, rank 0, and a dataloader."""

    def __init__(self, args: SimpleNamespace) -> None:
        self.args = args

    def print(self, *msg) -> None:
        print(*msg)

    def is_rank_0(self) -> bool:
        return True

    def setup_dataloader(self, dataset, batch_size, pin_memory, shuffle, collate_fn, num_workers=0, **_):
        generator = torch.Generator().manual_seed(self.args.train.seed)
        return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, collate_fn=collate_fn,
                                           num_workers=num_workers, generator=generator)  # fmt: skip


def ppo_args(prompts: str, n: int) -> SimpleNamespace:
    """The fields of ``train_ppo_ray``'s arguments the rollout path reads, as ``paravt train --backend openrlhf``
    sets them (``--data.input_key prompt --data.label_key label``, one prompt per rollout batch here)."""
    ns = SimpleNamespace
    return ns(
        data=ns(prompt_dataset=prompts, prompt_probs=None, max_samples=int(1e8), prompt_split="train", input_template=None,
                input_key="prompt", label_key="label", apply_chat_template=False, dataloader_num_workers=0,
                disable_fast_tokenizer=False),
        eval=ns(dataset=None), train=ns(seed=42, batch_size=n, num_episodes=1, max_epochs=1, dynamic_batch_enable=False),
        rollout=ns(batch_size=1, n_samples_per_prompt=n, micro_batch_size=n),
        vllm=ns(enable_sleep=False),
        algo=ns(dynamic_filtering_enable=False, advantage=ns(is_correction_level="token")),  # vLLM's log-probs asked for
    )  # fmt: skip


def test_rollout_actor_plays_relative_exports_from_another_directory(cluster, synth_small, tiny_qwen3, tmp_path,
                                                                     monkeypatch):  # fmt: skip
    head, log = cluster
    data, samples = synth_small
    monkeypatch.setattr("datasets.config.HF_DATASETS_CACHE", str(tmp_path / "hf_datasets"))
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / "data").symlink_to(data)
    monkeypatch.chdir(driver)  # the driver's directory, not the cluster's
    assert main(["export", "openrlhf", "--recipe", "paragrpo_qwen3vl_8b", "--data", "data", "--out", "prompts.jsonl",
                 *OVERRIDES]) == 0  # fmt: skip

    from openrlhf.datasets import PromptDataset
    from openrlhf.datasets.utils import blending_datasets
    from openrlhf.trainer.ppo_utils.experience import Experience
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
    from openrlhf.trainer.ray.vllm_engine import create_vllm_engines
    from openrlhf.utils.utils import get_tokenizer

    cfg = load_recipe("paragrpo_qwen3vl_8b", OVERRIDES)
    budget = recipe_budget(cfg)
    strategy = Strategy(ppo_args("prompts.jsonl", GROUP))
    # train_ppo_ray's call: one engine, tensor parallel 1, the executor by file path, the image limit from the recipe
    engines = create_vllm_engines(1, 1, str(tiny_qwen3), 42, False, False, True, budget.total, None, None, False,
                                  "processed_logprobs", agent_func_path=str(AGENT_FUNC),
                                  max_images_per_prompt=budget.max_images)  # fmt: skip
    tokenizer = get_tokenizer(str(tiny_qwen3), None, "left", strategy)  # the trainer's: AutoProcessor, unmodified
    args = strategy.args  # prepare_datasets' dataset and dataloader
    rows = blending_datasets(args.data.prompt_dataset, None, strategy, args.train.seed, dataset_split="train")
    dataset = PromptDataset(rows, tokenizer, strategy, input_template=None)
    loader = strategy.setup_dataloader(dataset, 1, True, True, dataset.collate_fn)
    generator = SamplesGenerator(strategy, loader, None, tokenizer, engines)
    experiences, _, consumed, _ = generator.generate_samples(do_sample=True, max_len=budget.total,
                                                             max_new_tokens=cfg.rollout.max_new_tokens,
                                                             temperature=1.0, top_p=1.0)  # fmt: skip
    assert consumed == 1 and len(experiences) == GROUP

    served = [json.loads(x) for x in log.read_text().splitlines()]
    # the actor ran in the cluster's directory, the export named its videos relative to the driver's
    assert {Path(s["cwd"]).resolve() for s in served} == {head.resolve()} != {driver.resolve()}
    label = json.loads(experiences[0].labels[0])
    index = next(i for i, s in enumerate(samples) if s.id == label["sample"]["id"])
    local = local_episode(samples, index, subagent=lambda request: "a red circle")
    pad = tokenizer.image_token_id
    for exp in experiences:
        seq, info = exp.sequences[0], exp.info
        # the env's reward, K and calls, as the local trainer's env gives them for the same script
        assert float(exp.rewards[0]) == pytest.approx(local["reward"]) and float(info["K"][0]) == local["K"]
        assert float(info["kappa"][0]) == 2.0 and float(info["dropped_tool_responses"][0]) == 0.0
        grids = exp.mm_train_inputs[0]["image_grid_thw"]
        assert grids.shape[0] == local["K"]  # sub-agent mode: only the overview reaches the main agent
        assert int((seq == pad).sum()) == int(grids.prod(dim=-1).sum()) // 4  # every pad with its image (merge 2x2)
        # what vLLM generated each main-agent turn from is what the trainer trains on: every action span starts
        # right after a prompt the engine served, pads expanded by its own processor
        starts = [i + 1 for i in torch.nonzero(exp.action_mask[0]).flatten().tolist()
                  if i == 0 or not exp.action_mask[0][i - 1]]  # fmt: skip
        assert len(starts) == 2
        prompts = [s["prompt"] for s in served]
        assert all(seq[:a].tolist() in prompts for a in starts)
        assert exp.rollout_log_probs is not None and bool((exp.rollout_log_probs[exp.action_mask.bool()] < 0).all())

    # the trainer's side: the micro-batch the experience maker concatenates, every pad with its image; and a forward
    # pass over each experience as the trainer makes it gives the engine's log-probs (the first PPO ratio is 1)
    from openrlhf.utils.vlm_utils import merge_mm_train_inputs

    batch = Experience.concat_experiences(experiences, tokenizer.pad_token_id)
    mm = merge_mm_train_inputs(batch.mm_train_inputs, "cpu")
    assert int((batch.sequences == pad).sum()) == int(mm["image_grid_thw"].prod(dim=-1).sum()) // 4
    policy = HFPolicy.from_pretrained(tiny_qwen3, temperature=1.0)
    for exp in experiences:
        inputs = exp.mm_train_inputs[0]
        encoded = Encoded(exp.sequences[0].tolist(), inputs["pixel_values"], inputs["image_grid_thw"])
        with torch.no_grad():
            forward = policy.sequence_logprobs(encoded).float()  # forward[j]: log p(token j + 1), as the action mask
        mask = exp.action_mask[0].bool()
        diff = (forward[mask] - exp.rollout_log_probs[0][mask]).abs().max()
        assert diff < 1e-4, f"the engine's log-probs and a forward pass over the experience differ by {diff:.2e}"
