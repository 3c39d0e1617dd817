"""Each turn and each sub-agent summary of ``ParaVTAgentLoop`` capped at the recipe's ``rollout.max_new_tokens``,
as the local trainer caps them, and the settings verl would drop refused at export. In a module of its own, after
``test_ray_workers.py`` (with them before it, its ``ray.init`` hung, twice, in the same process; alone it passes)."""

import pytest
from engine_env import engine_import  # tests/engine_env.py

engine_import("verl", "verl.experimental.agent_loop.agent_loop")
torch = pytest.importorskip("torch")

import hydra  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

import paravt.learners.adapters.verl.agent_loop  # noqa: E402,F401  (registers "paravt")
from paravt.learners.adapters.trl.processor import load_processor  # noqa: E402

TURNS = [
    '<think>two places</think><tool_call>{"name": "crop_video", "arguments": {"start_time": 3, "end_time": 13}}</tool_call>'
    '<tool_call>{"name": "crop_video", "arguments": {"start_time": 25, "end_time": 35}}</tool_call>',
    "<think>seen it</think><answer>[4.0, 10.0]</answer>",
]


class ScriptedServer:
    """Answers each generate call with the next scripted turn (tokenised), as a server would return ids."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, []

    async def generate(self, *, request_id, prompt_ids, sampling_params, image_data=None, **_):
        self.calls.append((len(prompt_ids), len(image_data or [])))
        ids = self.tokenizer.encode(TURNS[len(self.calls) - 1] + "<|im_end|>", add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def build_loop(tiny_qwen3, server, **env):
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 16384, "response_length": 4096}},
                               "data": {}})  # fmt: skip
    processor = load_processor(tiny_qwen3)
    target = dict(_agent_loop_registry["paravt"], **env)  # what verl's worker instantiates, plus the config's keys
    return hydra.utils.instantiate(target, trainer_config=DictConfigWrap(config), server_manager=server,
                                   tokenizer=processor.tokenizer, processor=processor, hf_model_type="qwen3_vl",
                                   dataset_cls=None, data_config=DictConfigWrap(config.data), tools=None), processor  # fmt: skip


@pytest.fixture(scope="module")
def dataset(synth_small):
    return synth_small[0], synth_small[1][:2]

class CapRecorder(ScriptedServer):
    """The scripted turns, recording each call's ``max_tokens`` (a sub-agent's call has no turn of its own)."""

    async def generate(self, *, request_id, prompt_ids, sampling_params, image_data=None, **kw):
        from paravt_env.tools import SUBAGENT_SYSTEM_PROMPT

        self.caps = getattr(self, "caps", []) + [sampling_params["max_tokens"]]
        if SUBAGENT_SYSTEM_PROMPT[:40] in self.tokenizer.decode(prompt_ids):  # a crop's summary: one short reply
            self.summaries = getattr(self, "summaries", 0) + 1
            ids = self.tokenizer.encode("a red circle<|im_end|>", add_special_tokens=False)
            return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")
        return await super().generate(request_id=request_id, prompt_ids=prompt_ids, sampling_params=sampling_params,
                                      image_data=image_data, **kw)  # fmt: skip


@pytest.mark.parametrize("tool_result", ["frames", "subagent"])
def test_every_turn_and_every_summary_is_capped_at_the_recipes_tokens(tiny_qwen3, dataset, tool_result):
    """The local trainer caps each turn and each sub-agent summary at rollout.max_new_tokens; so does the loop
    that `paravt export verl` writes (its agent_loops.yaml carries the recipe's cap)."""
    data, samples = dataset
    server = CapRecorder(None)
    options = {"frame_budget": 8, "max_pixels": 12544, "tool_result": tool_result}
    loop, processor = build_loop(tiny_qwen3, server, data=str(data / "samples.jsonl"), env_options=options,
                                 max_new_tokens=96)  # fmt: skip
    server.tokenizer = processor.tokenizer
    loop.loop.run_until_complete(loop.run({"temperature": 1.0}, extra_info={"index": 0, "seed": 0}, raw_prompt=[]))
    assert server.caps and all(cap == 96 for cap in server.caps), server.caps  # not the 4,096-token budget left
    assert getattr(server, "summaries", 0) == (2 if tool_result == "subagent" else 0)  # the first turn's two crops


def test_the_export_writes_the_recipes_cap_and_refuses_what_verl_would_drop(synth_small, tmp_path):
    import yaml

    from paravt.cli import main
    from paravt.learners.config import load_recipe

    data, _ = synth_small
    out = tmp_path / "verl"
    assert main(["export", "verl", "--recipe", "tiny_cpu", "--data", str(data / "samples.jsonl"), "--out", str(out)]) == 0
    [entry] = yaml.safe_load((out / "agent_loops.yaml").read_text())
    assert entry["max_new_tokens"] == load_recipe("tiny_cpu").rollout.max_new_tokens == 256
    assert main(["export", "verl", "--recipe", "tiny_cpu", "--data", str(data / "samples.jsonl"), "--out",
                 str(tmp_path / "no"), "rollout.include_subagents=true"]) == 1  # fmt: skip
    assert not (tmp_path / "no" / "agent_loops.yaml").exists()
