"""``ParaVTAgentLoop`` inside verl's real agent-loop machinery (instantiated by hydra from verl's registry, its
Continuous Token builder, ``AgentLoopOutput``), on CPU: a scripted server gives the in-process env's numbers,
the tiny Qwen3-VL behind ``LocalServerManager`` gives a well-formed trajectory."""

import numpy as np
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
from paravt.learners.adapters.verl.export import verl_rows  # noqa: E402
from paravt_env import VideoToolEnv  # noqa: E402

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


@pytest.mark.parametrize("remote", [False, True])
def test_same_numbers_as_in_process(tiny_qwen3, dataset, remote, start_env_server):
    data, samples = dataset
    options = {"frame_budget": 8, "max_pixels": 12544}
    env_kw = {"env_url": start_env_server(samples).url} if remote else {"data": str(data / "samples.jsonl")}
    for index in range(len(samples)):
        local = VideoToolEnv(samples, **options)
        obs0, _ = local.reset(seed=0, options={"index": index})
        obs1, *_ = local.step(TURNS[0])
        _, reward, terminated, _, final = local.step(TURNS[1])
        assert terminated
        server = ScriptedServer(None)
        loop, processor = build_loop(tiny_qwen3, server, env_options=options, **env_kw)
        server.tokenizer = processor.tokenizer
        # the row as `paravt export verl` writes it: both reset keys (a serve-env takes one of them)
        extra = {**verl_rows(samples)[index]["extra_info"], "seed": 0}
        out = loop.loop.run_until_complete(loop.run({"temperature": 1.0}, extra_info=extra, raw_prompt=[]))
        assert out.reward_score == reward and out.extra_fields["reward_breakdown"] == final["reward_breakdown"]
        images = out.multi_modal_data["images"]
        assert np.array_equal(np.stack([np.asarray(i) for i in images]), np.concatenate([obs0["frames"], obs1["frames"]]))
        # the second call saw the first turn's crop frames: overview + 2 crops of 10 frames
        assert server.calls[0][1] == len(obs0["frames"]) and server.calls[1][1] == len(images)
        generated = sum(len(processor.tokenizer.encode(t + "<|im_end|>", add_special_tokens=False)) for t in TURNS)
        assert sum(out.response_mask) == generated and len(out.response_mask) == len(out.response_ids) > generated
        vs = processor.tokenizer.convert_tokens_to_ids("<|vision_start|>")
        assert (out.prompt_ids + out.response_ids).count(vs) == len(images)


def test_tiny_model_trajectory_is_well_formed(tiny_qwen3, dataset):
    from paravt.learners.adapters.verl.local_server import LocalServerManager
    from paravt.policies.hf import HFPolicy

    data, samples = dataset
    torch.manual_seed(0)
    policy = HFPolicy.from_pretrained(tiny_qwen3, temperature=1.0)
    loop, processor = build_loop(tiny_qwen3, LocalServerManager(policy, max_new_tokens=48), data=str(data / "samples.jsonl"),
                                 env_options={"frame_budget": 4, "max_pixels": 12544})  # fmt: skip
    out = loop.loop.run_until_complete(loop.run({"temperature": 1.0}, extra_info={"index": 1}, raw_prompt=[]))
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs) > 0
    assert set(out.response_mask) <= {0, 1} and sum(out.response_mask) > 0 and np.isfinite(out.reward_score)
    generated = [lp for lp, m in zip(out.response_logprobs, out.response_mask, strict=True) if m]
    assert all(lp <= 0 for lp in generated)
    tensors = out.as_dict()  # what verl batches
    assert tensors["responses"].shape == tensors["response_mask"].shape


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
