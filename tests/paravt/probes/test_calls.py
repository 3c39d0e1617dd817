"""The call-writing probe: the forced opening, what it counts as well formed and clean, and its CLI."""

import json

import pytest

from paravt.cli import main
from paravt.policies.base import Generation
from paravt.policies.hf import HFPolicy
from paravt.probes.calls import CALL_PREFIX, probe_call_writing, to_markdown
from paravt_env import EnvConfig
from paravt_env.protocol import THINK_PREFIX

SMALL_ENV = EnvConfig(frame_budget=4, max_turns=3, max_parallel=3, crop_fps=0.5, crop_max_frames=2, min_pixels=784,
                      max_pixels=4096)  # fmt: skip

CLEAN = (' 2 windows in parallel.</think>\n<tool_call>\n{"name": "crop_video", "arguments": {"start_time": 0.0, '
         '"end_time": 10.0}}\n</tool_call>\n<tool_call>\n{"name": "crop_video", "arguments": {"start_time": 10.0, '
         '"end_time": 20.0}}\n</tool_call>')  # fmt: skip
BACKWARDS = (' 2 windows in parallel.</think>\n<tool_call>\n{"name": "crop_video", "arguments": {"start_time": 0.0, '
             '"end_time": 10.0}}\n</tool_call>\n<tool_call>\n{"name": "crop_video", "arguments": {"start_time": 10.0, '
             '"end_time": 5.0}}\n</tool_call>')  # fmt: skip
# the probe's videos are 30-40 s long: a window from 60 s lies wholly past the end
PAST_END = (' 2 windows in parallel.</think>\n<tool_call>\n{"name": "crop_video", "arguments": {"start_time": 0.0, '
            '"end_time": 20.0}}\n</tool_call>\n<tool_call>\n{"name": "crop_video", "arguments": {"start_time": 60.0, '
            '"end_time": 80.0}}\n</tool_call>')  # fmt: skip
BROKEN = (' 2 windows in parallel.</think>\n<tool_call>\n{"name": "crop_video", "arguments": {"start_time": 0.0, '
          '"end_time": 10.0}}\n</tool_call>\n<tool_call>\n{"name": "arguments": "arguments": 10.0}}\n<tool_call>')


class Continuations(HFPolicy):
    """The tiny model's tokenizer, continuations from a script; records what each prompt ended with."""

    def __init__(self, base: HFPolicy, texts: list[str]) -> None:
        self.__dict__.update(base.__dict__)
        self.texts, self.calls, self.tails = texts, 0, []

    def generate_encoded(self, prompts, *, temperature=None, max_new_tokens=None, think_prefix=None):
        out = []
        for p in prompts:
            self.tails.append(self.tokenizer.decode(p.input_ids[-24:]))
            text = self.texts[self.calls % len(self.texts)]
            self.calls += 1
            prefix = THINK_PREFIX if self.think_prefix else ""
            out.append(Generation(text=prefix + text, token_ids=[1], logprobs=[0.0], prefix=prefix, finish_reason="stop"))
        return out


@pytest.fixture(scope="module")
def call_data(tmp_path_factory):
    from paravt_env.data.synth_plan import SynthConfig
    from paravt_env.data.synthetic import generate_dataset

    out = tmp_path_factory.mktemp("call_synth")
    cfg = SynthConfig(n=2, seed=5, min_duration=30, max_duration=40, size=112, min_events=1, max_events=1,
                      question_kinds=("oe_colour",))  # fmt: skip
    return out, generate_dataset(out, cfg, progress=False)


@pytest.mark.parametrize("think_prefix", [True, False])
def test_the_prefix_is_forced_and_each_turn_is_scored_by_the_env(tiny_qwen3, call_data, think_prefix):
    _, samples = call_data
    base = HFPolicy.from_pretrained(tiny_qwen3, max_pixels=4096, think_prefix=think_prefix)
    policy = Continuations(base, [CLEAN, BACKWARDS, BROKEN, PAST_END])
    out = probe_call_writing(policy, samples, SMALL_ENV, temperatures=(0.0, 0.7), per_video=3)
    # every prompt ends with the forced opening words (after the think prefix, the policy's or the probe's)
    assert all(t.endswith(" I will inspect") and "<think>" in t for t in policy.tails)
    greedy, sampled = out["by_temperature"]["0"], out["by_temperature"]["0.7"]
    assert greedy["turns"] == 2 and sampled["turns"] == 6  # greedy once per video, sampled per_video times
    # greedy saw CLEAN then BACKWARDS: both parse, the second has a call the env refuses
    assert greedy["well_formed"] == 1.0 and greedy["clean"] == 0.5
    assert greedy["executed_per_turn"] == 1.5 and greedy["rejected_per_turn"] == 0.5
    assert greedy["clean_inside"] == 0.5 and greedy["past_end_per_turn"] == 0.0  # 10 -> 5 lies inside the video
    # sampled saw BROKEN, PAST_END, CLEAN, BACKWARDS, BROKEN, PAST_END: a window past the end is refused, which
    # "clean" counts against the turn and "clean inside the video" does not
    assert sampled["well_formed"] == pytest.approx(4 / 6) and sampled["clean"] == pytest.approx(1 / 6)
    assert sampled["clean_inside"] == pytest.approx(3 / 6) and sampled["past_end_per_turn"] == pytest.approx(2 / 6)
    assert any("tool_call" in p for p in sampled["example_problems"])
    assert "| 0.7 | 6 |" in to_markdown(out)


def test_a_real_model_writes_and_is_scored(tiny_qwen3, call_data):
    _, samples = call_data
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_pixels=4096, think_prefix=True)
    out = probe_call_writing(policy, samples, SMALL_ENV, temperatures=(0.0, 1.0), per_video=2, max_new_tokens=12)
    assert out["prefix"] == CALL_PREFIX and out["videos"] == 2
    for t, want in (("0", 2), ("1", 4)):
        r = out["by_temperature"][t]
        assert r["turns"] == want and 0.0 <= r["clean"] <= r["well_formed"] <= 1.0 and r["executed_per_turn"] >= 0


def test_probe_calls_cli(tiny_qwen3, call_data, capsys):
    data, _ = call_data
    assert main(["probe", "calls", str(tiny_qwen3), "--data", str(data), "--json", "--per-video", "1",
                 "--temperature", "0", "--limit", "1"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert list(out["by_temperature"]) == ["0"] and out["videos"] == 1
    assert main(["probe", "calls", str(tiny_qwen3), "--data", str(data), "--per-video", "0"]) == 1
    assert "--per-video" in capsys.readouterr().err
    assert main(["probe", "calls", str(tiny_qwen3), "--data", str(data), "--temperature", "-1"]) == 1
    assert "--temperature" in capsys.readouterr().err
