"""One OpenRLHF rollout of a prompt row, run the way OpenRLHF's rollout actor runs it, in a process started with a
clean environment (``test_clean_process.py`` starts it with only PATH and HOME): the agent executor is loaded by
OpenRLHF's own ``_load_agent_executor`` (by file path, instantiated with no arguments), plays the row's label, and
OpenRLHF's own ``_process_response_into_experience`` and ``make_experience_batch`` turn the result into the
experience batch the actor trains on. The processor is the one OpenRLHF's own ``get_tokenizer`` loads. vLLM is the
GPU-only part left out: the stand-in package ``vllm_standin`` satisfies OpenRLHF's imports of it, and
``ScriptedEngine`` (the tiny model behind ``llm_engine.generate``) answers instead.

    python clean_process_episode.py ROW.json MODEL_DIR MAX_LENGTH TURNS.json OUT.json
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

STANDIN = Path(__file__).with_name("vllm_standin")


def main(row_path: str, model_dir: str, max_length: str, turns_path: str, out_path: str) -> None:
    sys.path.insert(0, str(STANDIN))  # `import vllm`: the stand-in (vLLM is GPU-only)
    import torch
    from openrlhf.trainer.ppo_utils.experience import make_experience_batch
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
    from openrlhf.trainer.ray.vllm_engine import _load_agent_executor
    from openrlhf.utils.utils import get_tokenizer
    from vllm import SamplingParams

    from paravt.learners.adapters.openrlhf.launcher import AGENT_FUNC
    from paravt.learners.adapters.openrlhf.local_engine import ScriptedEngine
    from paravt.policies.hf import HFPolicy

    row = json.loads(Path(row_path).read_text())
    executor = _load_agent_executor(str(AGENT_FUNC))  # OpenRLHF's own loader: AgentExecutor()
    torch.manual_seed(0)
    policy = HFPolicy.from_pretrained(model_dir, temperature=1.0, max_new_tokens=64)
    processor = get_tokenizer(model_dir, None, "left")  # OpenRLHF's own: the checkpoint's AutoProcessor
    engine = ScriptedEngine(policy, json.loads(Path(turns_path).read_text()))
    params = SamplingParams(temperature=1.0, max_tokens=96, logprobs=1)
    result = asyncio.run(executor.execute(row["prompt"], row["label"], params, int(max_length), processor, engine))
    experience = SamplesGenerator._process_response_into_experience(None, result, max_len=int(max_length))
    batch = make_experience_batch([experience])
    tokens = result["observation_tokens"]
    mm = batch.mm_train_inputs[0] if isinstance(batch.mm_train_inputs, list) else batch.mm_train_inputs
    grids = mm["image_grid_thw"]
    seq = experience.sequences[0]
    out = {
        "paravt_env_vars": sorted(k for k in os.environ if "PARAVT" in k),
        "extra_logs": {k: float(v) for k, v in result["extra_logs"].items()},
        "reward": result["reward"], "truncated": bool(result["truncated"]),
        "n_tokens": len(tokens), "sequence_length": int(seq.numel()),
        "pads": int((seq == policy.image_pad_id).sum()), "features": int(grids.prod(dim=-1).sum()) // policy.merge_size**2,
        "images": int(grids.shape[0]), "action_tokens": int(experience.action_mask.sum()),
        "range_tokens": sum(b - a for a, b in result["action_ranges"]),
        "between": [policy.tokenizer.decode(tokens[result["action_ranges"][i][1] : result["action_ranges"][i + 1][0]])
                    for i in range(len(result["action_ranges"]) - 1)],
        "prompt_tail": policy.tokenizer.decode(tokens[max(0, result["action_ranges"][0][0] - 8) : result["action_ranges"][0][0]]),
    }  # fmt: skip
    Path(out_path).write_text(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
