"""The perception probe: what it shows the checkpoint, what it measures, and its CLI."""

import json
import math

import numpy as np
import pytest

from paravt.cli import main
from paravt.probes.perception import (
    ProbeConfig,
    _answer_span,
    _fit,
    oracle_window,
    probe_perception,
    sample_tool_use,
    to_markdown,
)
from paravt_env import EnvConfig
from paravt_env.data import VideoQASample
from paravt_env.data.sample import Event

SMALL_ENV = EnvConfig(frame_budget=4, max_turns=3, max_parallel=3, crop_fps=0.5, crop_max_frames=2, min_pixels=784,
                      max_pixels=4096)  # fmt: skip


def _sample(start, end, duration=60.0):
    ev = Event(start=start, end=end, label="red star", attributes={"colour": "red"})
    return VideoQASample(id="s", video_path="v.mp4", question="?", answer="red", question_type="oe",
                         duration=duration, events=[ev])  # fmt: skip


def test_oracle_window_holds_the_event_and_stays_inside_the_video():
    assert oracle_window(_sample(30.0, 34.0), 60.0, 20.0) == (22.0, 42.0)
    assert oracle_window(_sample(1.0, 3.0), 60.0, 20.0) == (0.0, 20.0)  # clipped at the start
    assert oracle_window(_sample(57.0, 59.0), 60.0, 20.0) == (40.0, 60.0)  # and at the end
    assert oracle_window(_sample(2.0, 4.0, 10.0), 10.0, 20.0) == (0.0, 10.0)  # shorter than the window
    with pytest.raises(ValueError, match="no event windows"):
        oracle_window(VideoQASample(id="x", video_path="v", question="?", answer="a", question_type="oe"), 60, 20)


def test_fit_keeps_count_and_size_and_changes_only_pixels():
    like = np.zeros((3, 8, 6, 3), np.uint8)
    other = np.full((2, 10, 4, 3), 200, np.uint8)
    fitted = _fit(other, like)
    assert fitted.shape == like.shape
    assert (fitted[:, :, :4] == 200).all() and (fitted[:, :, 4:] == 128).all()


def test_answer_span_finds_the_answer_tokens(tiny_qwen3):
    from paravt.policies.hf import HFPolicy

    policy = HFPolicy.from_pretrained(tiny_qwen3)
    ids = policy.tokenizer.encode("<think>\nx</think>\n<answer>red</answer>", add_special_tokens=False)
    span = _answer_span(policy, ids)
    assert policy.tokenizer.decode([ids[i] for i in span]) == "red"
    plain = policy.tokenizer.encode("no tags", add_special_tokens=False)
    assert _answer_span(policy, plain) == list(range(len(plain)))


@pytest.fixture(scope="module")
def probe_data(tmp_path_factory):
    from paravt_env.data.synth_plan import SynthConfig
    from paravt_env.data.synthetic import generate_dataset

    out = tmp_path_factory.mktemp("probe_synth")
    cfg = SynthConfig(n=3, seed=11, min_duration=20, max_duration=30, size=112, min_events=1, max_events=1, event_scale_min=0.6,
                      event_scale_max=0.8, question_kinds=("oe_colour",))  # fmt: skip
    return out, generate_dataset(out, cfg, progress=False)


def test_probe_measures_accuracy_logit_shift_and_the_gap(tiny_qwen3, probe_data):
    from paravt.policies.hf import HFPolicy

    _, samples = probe_data
    policy = HFPolicy.from_pretrained(tiny_qwen3, temperature=0.7, min_pixels=784, max_pixels=4096)
    summary = probe_perception(policy, samples, ProbeConfig(env=SMALL_ENV, overview_budgets=(2, 4), max_new_tokens=8))
    assert summary["n"] == 3
    assert set(summary["accuracy"]) == {"oracle", "grey", "other"}
    assert all(0.0 <= v <= 1.0 for v in summary["accuracy"].values())
    for cond in ("grey", "other"):
        for where in ("response", "answer"):
            shift = summary["logit_shift"][cond][where]
            assert all(math.isfinite(v) for v in shift.values())
    # a random-init model is not blind: changing only the pixels moves its next-token distribution
    assert summary["logit_shift"]["grey"]["response"]["tv"] > 0
    assert set(summary["tool_necessity"]) == {"K=2", "K=4", "gap", "oracle_crops"}
    assert policy.temperature == 0.7 and policy.suppress_ids == HFPolicy.from_pretrained(tiny_qwen3).suppress_ids
    assert "Tool Necessity Gap" in to_markdown(summary)
    rows = summary["rows"]
    assert [r["other_answer"] for r in rows] == [s.answer for s in samples[1:] + samples[:1]]

    sampled = sample_tool_use(policy, samples, SMALL_ENV, max_new_tokens=8)
    assert sampled["episodes"] == 3 and 0.0 <= sampled["well_formed_turns"] <= 1.0 and sampled["kappa"] >= 0


def test_probe_cli(tiny_qwen3, probe_data, capsys):
    data, _ = probe_data
    (tiny_qwen3 / "paravt.json").write_text(json.dumps({"think_prefix": True, "env": {
        "frame_budget": 4, "max_parallel": 3, "crop_fps": 0.5, "crop_max_frames": 2, "max_pixels": 4096}}))
    try:
        assert main(["probe", "perception", str(tiny_qwen3), "--data", str(data), "--budgets", "2,4", "--json",
                     "--no-progress", "--temperature", "0"]) == 0  # fmt: skip
        out = json.loads(capsys.readouterr().out)
        assert out["n"] == 3 and out["settings"]["env"]["frame_budget"] == 4 and "sampling" not in out
    finally:
        (tiny_qwen3 / "paravt.json").unlink()
    assert main(["probe", "perception", str(tiny_qwen3 / "nope"), "--data", str(data)]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main(["probe", "perception", str(tiny_qwen3), "--data", str(data), "--budgets", "x"]) == 1
    assert "--budgets" in capsys.readouterr().err


def test_sampled_episodes_reach_their_second_turn(tiny_qwen3, probe_data):
    """An episode that crops goes on to a second turn, whose prompt holds the crops' feedback (the step's
    ``info["messages"]``): κ counts the executed crops and every turn is read."""
    from paravt.policies.hf import HFPolicy
    from tests.paravt.learners.test_rollout import TURNS, ScriptedTurns

    _, samples = probe_data
    policy = ScriptedTurns(HFPolicy.from_pretrained(tiny_qwen3), TURNS)
    sampled = sample_tool_use(policy, samples, SMALL_ENV, max_new_tokens=8)
    assert sampled["episodes"] == len(samples) and sampled["kappa"] == 2.0 and sampled["answered"] == 1.0
    assert sampled["calling_turns"] == len(samples) and sampled["calls_per_calling_turn"] == 2.0


def test_the_forced_overview_answer_reads_what_a_checking_policy_saw(tiny_qwen3, probe_data):
    """A policy that names the colour, then announces a check crop, writes no answer with its calls suppressed;
    forced to answer after its own think block it answers, and only that continuation is generated."""
    from paravt.policies.base import Generation
    from paravt.policies.hf import HFPolicy
    from paravt.probes.perception import _forced_answer
    from paravt_env import VideoToolEnv
    from paravt_env.messages import observation_messages

    _, samples = probe_data
    base = HFPolicy.from_pretrained(tiny_qwen3, max_pixels=4096)
    s = samples[0]
    seen: list[str] = []

    class Forced(HFPolicy):
        def __init__(self, answer: str) -> None:
            self.__dict__.update(base.__dict__)
            self.answer = answer

        def generate_encoded(self, prompts, **overrides):
            [p] = prompts
            seen.append(self.tokenizer.decode(p.input_ids[-12:]))
            assert overrides.get("think_prefix") is False  # the forced text is the whole prefix
            return [Generation(text=f"{self.answer}</answer>", token_ids=[], logprobs=[])]

    env = VideoToolEnv([s], SMALL_ENV)
    obs, info = env.reset(options={"sample": s})
    conv = observation_messages(obs, info)
    checking = f"<think>\nThe overview shows a {s.answer} shape. I will inspect 1 window to check.</think>\n"
    assert _forced_answer(Forced(s.answer), conv, checking, s) == 1.0
    assert seen[-1].endswith("to check.</think>\n<answer>")
    assert _forced_answer(Forced("nothing"), conv, checking, s) == 0.0
    # an unclosed think is closed before the answer is forced; a turn that answered is scored as it is
    _forced_answer(Forced(s.answer), conv, "<think>\nI will inspect", s)
    assert seen[-1].endswith("I will inspect</think>\n<answer>")
    n = len(seen)
    assert _forced_answer(Forced("nothing"), conv, f"<think>x</think><answer>{s.answer}</answer>", s) == 1.0 and len(seen) == n
    env.close()
