import statistics

import pytest

from paravt.baselines import BASELINES, make_baseline
from paravt.baselines.questions import parse_query
from paravt_env import EnvConfig, VideoToolEnv
from paravt_env.play import play_episode
from paravt_env.protocol import parse_response


def _run(samples, name, **options):
    env = VideoToolEnv(samples, EnvConfig(**options))
    try:
        return [play_episode(env, make_baseline(name), options={"index": i}) for i in range(len(samples))]
    finally:
        env.close()


@pytest.mark.parametrize(
    ("question", "kind", "subject"),
    [
        ("A star briefly appears in the video. What colour is it?", "colour_of", "star"),
        ("A red shape briefly appears in the video. What shape is it?", "shape_of", "red"),
        ("Which of these coloured shapes appears first in the video?", "first", ""),
        ("Which coloured shape appears next in the video after the blue cross?", "next", "blue cross"),
        ("How many coloured shapes appear in the video (each one briefly)?", "count", ""),
        ("What colour is the circle that briefly appears in the video? Answer with one word.", "colour_of", "circle"),
        ("What shape is the green object that briefly appears in the video? Answer with one word.", "shape_of", "green"),
        ("When does the cyan square appear in the video? Answer with [start, end] in seconds.", "when", "cyan square"),
        ("What is the meaning of life?", "unknown", ""),
    ],
)
def test_questions_are_read_from_the_prompt(question, kind, subject):
    text = f"The video lasts 123.5 seconds. ...\nQuestion: {question}\nA. red\nB. blue\nAnswer with the letter."
    q = parse_query(text)
    assert (q.kind, q.subject, q.duration) == (kind, subject, 123.5)
    assert q.options == {"A": "red", "B": "blue"}


def test_oracle_is_an_upper_bound(synth_small):
    _, samples = synth_small
    oracle = _run(samples, "oracle", frame_budget=4)
    assert statistics.fmean(e.breakdown["accuracy"] for e in oracle) >= 0.9
    assert all(e.tool_calls > 0 for e in oracle)


def test_detector_uses_parallel_crops_and_beats_no_tool(synth_small):
    _, samples = synth_small
    parallel = _run(samples, "detector", frame_budget=4)
    no_tool = _run(samples, "no_tool", frame_budget=4)
    acc = {k: statistics.fmean(e.breakdown["accuracy"] for e in v) for k, v in (("p", parallel), ("z", no_tool))}
    assert acc["p"] >= acc["z"] + 0.25
    assert all(e.tool_calls == 0 and e.turns == 1 for e in no_tool)
    assert max(e.tool_calls for e in parallel) > 1
    # a turn never asks for more crops than the env runs
    for e in parallel:
        assert e.tool_calls_requested == e.tool_calls


def test_sequential_detector_asks_one_crop_per_turn(synth_small):
    _, samples = synth_small
    for e in _run(samples, "detector", frame_budget=4, dispatch="sequential"):
        for action in e.actions:
            assert len(parse_response(action).tool_calls) <= 1
        assert e.tool_calls == e.tool_calls_requested <= 2


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_every_action_is_well_formed(synth_small, name):
    _, samples = synth_small
    for e in _run(samples[:4], name, frame_budget=8):
        for action in e.actions:
            assert parse_response(action).problems == ()
        assert e.breakdown["format"] > 0.5 and e.terminated


def test_unknown_baseline_names_itself():
    with pytest.raises(ValueError, match="'psychic'"):
        make_baseline("psychic")


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_a_colours_question_says_how_many_needles(n):
    from paravt_env.data.synth_questions import colours_question

    q = parse_query(f"The video lasts 80.0 seconds.\nQuestion: {colours_question(n)}\n")
    assert (q.kind, q.needles) == ("colours", n)


def test_the_detector_finds_both_needles_of_two_colours_and_a_turn_budget_separates_the_modes(synth_two_colours):
    """Both needles are needed: the detector searches until it has found both and names both colours. At the same
    crop budget with its budget + 1 turns both modes find them; at a turn budget of 2 (one call turn) sequential
    dispatch runs one crop and loses what parallel dispatch's turn of crops finds."""
    _, samples = synth_two_colours
    common = dict(frame_budget=8, crop_fps=0.5, crop_max_frames=8, crop_budget=8, max_parallel=5)
    score = {}
    for dispatch in ("parallel", "sequential"):
        for turns in (None, 2):
            eps = _run(samples, "detector", dispatch=dispatch, turn_budget=turns, **common)
            score[dispatch, turns] = statistics.fmean(e.breakdown["accuracy"] for e in eps)
            assert all(e.turns <= (turns or 9) for e in eps)
            if turns is None:  # all found: the answer names both colours in order of appearance
                assert all(e.prediction == s.answer for e, s in zip(eps, samples, strict=True))
    floor = statistics.fmean(e.breakdown["accuracy"] for e in _run(samples, "no_tool", **common))
    assert score["parallel", None] == score["sequential", None] == score["parallel", 2] == 1.0 > floor
    assert score["sequential", 2] < score["parallel", 2]
    oracle = _run(samples, "oracle", **common)
    assert all(e.prediction == s.answer for e, s in zip(oracle, samples, strict=True))
