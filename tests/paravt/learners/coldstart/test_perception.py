"""The perception stage's examples: labels read from the frames' true timestamps, close-ups inside the needle."""

import re

import pytest

pytest.importorskip("torch")

from paravt.learners.coldstart.perception import PerceptionConfig, build_examples, target_sentence  # noqa: E402

SETTINGS = dict(crop_fps=0.5, crop_max_frames=8, min_pixels=784, max_pixels=12544)


@pytest.fixture(scope="module")
def policy(tiny_qwen3):
    from paravt.policies.hf import HFPolicy

    return HFPolicy.from_pretrained(tiny_qwen3, device="cpu", temperature=0.0, min_pixels=784, max_pixels=12544)


@pytest.fixture(scope="module")
def one_needle(tmp_path_factory):
    """Videos with one needle and an open colour question each, as the tiny_cpu task has them."""
    from paravt_env.data.synth_plan import SynthConfig
    from paravt_env.data.synthetic import generate_dataset

    cfg = SynthConfig(n=3, seed=7, min_duration=30, max_duration=60, min_events=1, max_events=1, question_kinds=("oe_colour",))
    return generate_dataset(tmp_path_factory.mktemp("one_needle"), cfg, progress=False)


def _shown(policy, example):
    """The frames' timestamps and the question, as the prompt writes them."""
    text = policy.tokenizer.decode(example.encoded.input_ids)
    times = [float(t) for t in re.findall(r"<(\d+(?:\.\d+)?) seconds>", text)]
    return times, text


def _examples(policy, sample, **cfg):
    return build_examples(policy, [sample], PerceptionConfig(window=20.0, **cfg), seed=3, **SETTINGS)


def test_every_label_is_what_its_frames_show(policy, synth_small):
    for sample in synth_small[1][:4]:
        for ex in _examples(policy, sample):
            times, text = _shown(policy, ex)
            assert times, text
            if ex.target.startswith("<answer>"):  # only where the frames show every event of the sample
                assert ex.target == f"<answer>{sample.answer}</answer>"
                assert all(any(e.start <= t < e.end for t in times) for e in sample.events)
            else:
                where = "overview" if ex.target.startswith("The overview") else "crops"
                assert ex.target == target_sentence(sample, times, where)


@pytest.mark.parametrize("closeups", [1, 2])
def test_closeups_add_one_view_inside_the_needle_and_its_answer(policy, synth_small, one_needle, closeups):
    for sample in [*synth_small[1][:2], *one_needle]:
        base = _examples(policy, sample)
        more = _examples(policy, sample, closeups=closeups)
        extra = [ex for ex in more if all(ex.encoded.input_ids != b.encoded.input_ids for b in base)]
        answerable = len(sample.events) == 1  # the close-up shows the first event; an answer needs them all
        assert len(more) == len(base) + 1 + answerable and len(extra) == 1 + answerable
        first = sample.events[0]
        for ex in extra:
            times, _ = _shown(policy, ex)
            assert len(times) == closeups and all(first.start <= t < first.end for t in times), (times, first)
        view = next(ex for ex in extra if not ex.target.startswith("<answer>"))
        assert f"a {first.attributes['colour']} shape" in view.target
        assert view.target == target_sentence(sample, _shown(policy, view)[0], "crops")
        if answerable:  # the one_needle videos
            assert any(ex.target == f"<answer>{sample.answer}</answer>" for ex in extra)


def test_closeups_leave_the_other_examples_as_they_were(policy, synth_small):
    sample = synth_small[1][0]
    base = [(ex.target, ex.encoded.input_ids) for ex in _examples(policy, sample)]
    more = [(ex.target, ex.encoded.input_ids) for ex in _examples(policy, sample, closeups=1)]
    assert [m for m in more if m in base] == base


def test_a_negative_closeup_count_is_refused():
    from paravt.learners.config import load_recipe

    with pytest.raises(ValueError, match="perception.closeups must be at least 0"):
        load_recipe("tiny_cpu", ["perception.closeups=-1"])
