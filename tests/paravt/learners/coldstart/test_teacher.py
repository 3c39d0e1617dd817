"""The cold-start teacher decides from what the agent was shown, never from where the needle is hidden."""

import pytest

from paravt.learners.coldstart.teacher import (
    GUESS_TEXT_AFTER_CROPS,
    RECROP_TEXT,
    TeacherMiss,
    coverage_windows,
    crop_turn,
    final_turn,
    first_turn,
    visible_events,
)
from paravt_env.data import VideoQASample
from paravt_env.data.sample import Event
from paravt_env.protocol import parse_response


def _sample():
    ev = Event(start=40.0, end=44.0, label="red star", attributes={"colour": "red", "shape": "star"})
    return VideoQASample(id="s", video_path="v.mp4", question="What colour?", answer="red", question_type="oe",
                         duration=70.0, events=[ev])  # fmt: skip


def test_coverage_windows_cover_the_video_from_the_duration_alone():
    assert coverage_windows(70.0, 20.0, 5) == [(0, 20.0), (20.0, 40.0), (40.0, 60.0), (60.0, 80.0)]
    assert coverage_windows(40.0, 20.0, 5) == [(0, 20.0), (20.0, 40.0)]
    # more windows than calls allowed: fewer, wider windows that still reach the end
    wide = coverage_windows(200.0, 20.0, 5)
    assert len(wide) == 5 and wide[-1][1] >= 200.0


def test_first_turn_answers_when_the_overview_shows_the_needle_else_crops_in_parallel():
    s = _sample()
    assert visible_events(s, [10.0, 41.0, 60.0]) == s.events
    seen = first_turn(s, [10.0, 41.0, 60.0], 70.0, window=20.0, max_calls=5)
    assert parse_response(seen).answer == "red" and "red shape" in seen
    missed = first_turn(s, [8.75, 26.25, 43.9999, 61.25][:2] + [61.25], 70.0, window=20.0, max_calls=5)
    parsed = parse_response(missed)
    assert parsed.answer is None and not parsed.problems
    assert [(c.start_time, c.end_time) for c in parsed.valid_tool_calls] == [(0, 20), (20, 40), (40, 60), (60, 80)]


def test_final_turn_reads_the_crops_and_refuses_to_invent_an_answer():
    s = _sample()
    assert parse_response(final_turn(s, [38.0, 42.0])).answer == "red"
    with pytest.raises(TeacherMiss):
        final_turn(s, [30.0, 36.0, 44.0])  # the event window is [40, 44): 44.0 is already past it


def test_the_call_decision_is_one_token_in_a_context_only_misses_have():
    """Guess and crop turns share "...no coloured shape. I will" and part at the next word: the cold start's
    p(crop) is then the teacher's crop rate (ending the guess at "shape." put the decision on a token every
    answering turn also writes)."""
    from paravt.learners.coldstart.teacher import GUESS_TEXT, guess_turn
    from paravt.policies.tiny_model import build_tokenizer

    s = _sample()
    crop = first_turn(s, [10.0, 61.25], 70.0, window=20.0, max_calls=5)
    guess = guess_turn("blue")
    assert parse_response(guess).answer == "blue" and GUESS_TEXT in guess
    tok = build_tokenizer()
    a, b = tok.encode(crop, add_special_tokens=False), tok.encode(guess, add_special_tokens=False)
    common = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    assert tok.decode(a[:common]).endswith("no coloured shape. I will")
    assert "I will" not in first_turn(s, [10.0, 41.0, 60.0], 70.0, window=20.0, max_calls=5)


def test_check_turn_crops_around_the_frame_that_already_shows_the_needle():
    """The strong tool prior: a redundant call centred on the overview frame that showed the needle (clamped to
    the video), then the answer read off the crop."""
    from paravt.learners.coldstart.teacher import CHECK_TEXT

    s = _sample()
    turn = first_turn(s, [10.0, 41.0, 60.0], 70.0, window=20.0, max_calls=5, check=True)
    parsed = parse_response(turn)
    assert CHECK_TEXT in turn and "red shape" in turn and parsed.answer is None and not parsed.problems
    assert [(c.start_time, c.end_time) for c in parsed.valid_tool_calls] == [(31.0, 51.0)]
    assert parse_response(final_turn(s, [40.5, 43.0])).answer == "red"
    late = VideoQASample(id="l", video_path="v.mp4", question="q", answer="red", question_type="oe", duration=70.0,
                         events=[Event(start=66.0, end=69.0, label="x", attributes={"colour": "red"})])  # fmt: skip
    calls = parse_response(first_turn(late, [10.0, 67.0], 70.0, window=20.0, max_calls=5, check=True))
    assert [(c.start_time, c.end_time) for c in calls.valid_tool_calls] == [(50.0, 70.0)]
    # a miss still covers the video: check only changes what happens when the overview answers
    missed = parse_response(first_turn(s, [10.0, 61.25], 70.0, window=20.0, max_calls=5, check=True))
    assert len(missed.valid_tool_calls) == 4
    # on the fixed coverage grid the check crops the grid window holding the frame: bounds stay multiples of 20
    for times, want in (([10.0, 41.0, 60.0], (40.0, 60.0)), ([10.0, 67.0], (60.0, 70.0))):
        sample = s if want[0] == 40.0 else late
        turn = first_turn(sample, times, 70.0, window=20.0, max_calls=5, check=True, check_window=16.0, widen=False)
        assert [(c.start_time, c.end_time) for c in parse_response(turn).valid_tool_calls] == [want]


def _crop_times(windows, frames: int) -> list[float]:
    """The timestamps a crop of each window returns at ``frames`` frames, for a dense constant-rate video
    (``paravt_env.video.sampling.sample_window``: centres of equal slices)."""
    return [a + (i + 0.5) * (b - a) / frames for a, b in windows for i in range(frames)]


def test_a_crop_round_that_missed_is_followed_by_one_whose_frames_fall_between_its_own():
    """A 2 s event of a 300 s video between two frames of 60 s / 16-frame crops (3.75 s apart): the teacher
    crops again, each window shifted by half that spacing, and answers from the new frames."""
    ev = Event(start=41.0, end=43.0, label="red star", attributes={"colour": "red"})
    s = VideoQASample(id="l", video_path="v.mp4", question="q", answer="red", question_type="oe", duration=300.0,
                      events=[ev])  # fmt: skip
    first = coverage_windows(300.0, 20.0, 5)
    shown = _crop_times(first, 16)
    assert not visible_events(s, shown)  # 39.375 and 43.125 straddle the event
    again = crop_turn(s, shown, 300.0, window=20.0, max_calls=5, last=False)
    parsed = parse_response(again)
    assert RECROP_TEXT in again and parsed.answer is None and not parsed.problems
    windows = [(c.start_time, c.end_time) for c in parsed.valid_tool_calls]
    expected = [x for a, b in first for x in (a + 1.875, min(b + 1.875, 300.0))]
    assert [x for w in windows for x in w] == pytest.approx(expected, abs=0.01)  # calls are written to 2 decimals
    assert visible_events(s, _crop_times(windows, 16)) == [ev]
    assert parse_response(crop_turn(s, _crop_times(windows, 16), 300.0, window=20.0, max_calls=5, last=False)).answer == "red"


def test_the_last_turn_answers_a_miss_with_a_guess_said_as_such_or_drops_it():
    s = _sample()
    missed = [30.0, 36.0, 44.0]
    with pytest.raises(TeacherMiss):
        crop_turn(s, missed, 70.0, window=20.0, max_calls=5, last=True)
    text = crop_turn(s, missed, 70.0, window=20.0, max_calls=5, last=True, guess="blue")
    assert GUESS_TEXT_AFTER_CROPS in text and parse_response(text).answer == "blue"
    # a guess is only for misses: crops that show the needle are read, whatever the guess
    assert parse_response(crop_turn(s, [41.0], 70.0, window=20.0, max_calls=5, last=True, guess="blue")).answer == "red"


def test_the_repro_teacher_drops_nothing_and_crops_again_after_a_miss(synth_small, tiny_qwen3):
    """Teacher episodes through the real env on real videos, crops thinned (2 frames a crop) so that rounds
    miss: with ``sft.recrop`` and ``sft.guess_after_miss`` every episode is kept and ends in an answer; the
    second round's calls differ from the first's; without them (the tiny_cpu teacher) misses are dropped."""
    pytest.importorskip("torch")
    from paravt.learners.coldstart.pipeline import teacher_episodes
    from paravt.learners.config import load_recipe
    from paravt.policies.hf import HFPolicy
    from paravt_env.protocol import parse_response as parse

    policy = HFPolicy.from_pretrained(tiny_qwen3)
    thin = ["sft.episodes=16", "sft.frame_budgets=[4]", "env.crop_max_frames=2", "env.crop_fps=1.0",
            "env.frame_budget=4", "sft.check_rate=0.0"]  # fmt: skip
    cfg = load_recipe("tiny_cpu", [*thin, "sft.crop_rate=1.0", "sft.recrop=true", "sft.guess_after_miss=true"])
    episodes, dropped = teacher_episodes(policy, list(synth_small[1]), cfg)
    assert dropped == 0 and len(episodes) == 16
    assert all(parse(t.turn_texts[-1]).answer for t in episodes)
    recropped = [t for t in episodes if any(RECROP_TEXT in x for x in t.turn_texts[1:])]
    assert recropped, "thinned crops never missed: the test shows nothing"
    for t in recropped:
        rounds = [[(c.start_time, c.end_time) for c in parse(x).valid_tool_calls] for x in t.turn_texts[:2]]
        assert rounds[0] and rounds[1] and rounds[0] != rounds[1]
    plain = load_recipe("tiny_cpu", [*thin, "sft.crop_rate=1.0"])
    kept, dropped = teacher_episodes(policy, list(synth_small[1]), plain)
    assert dropped > 0 and len(kept) + dropped == 16


@pytest.mark.parametrize(("save_every_s", "shards"), [(0.0, 3), (3600.0, 1)])
def test_the_teacher_store_saves_as_often_as_sft_save_every_s_says(synth_small, tiny_qwen3, tmp_path, save_every_s, shards):
    pytest.importorskip("torch")
    from paravt.learners.coldstart.pipeline import teacher_episodes
    from paravt.learners.coldstart.store import ColdStartStore
    from paravt.learners.config import load_recipe
    from paravt.policies.hf import HFPolicy

    cfg = load_recipe("tiny_cpu", ["sft.episodes=3", f"sft.save_every_s={save_every_s}", "sft.crop_rate=0.0"])
    store = ColdStartStore(tmp_path)
    teacher_episodes(HFPolicy.from_pretrained(tiny_qwen3), list(synth_small[1]), cfg, store=store)
    assert len(store.teacher_shards()) == shards and store.teacher_shards()[-1]["end"] == 3


def test_continued_coverage_writes_the_same_bounds_whatever_the_duration():
    """``sft.coverage: continue``: a round holds the first ``max_parallel`` fixed windows, the next turn goes on
    from where it ended. A 2 s event at 151 s of a 170 s video: round one (0-100) misses it, round two crops
    100-180 and answers; a 200 s video gets the same second-round bounds, and a 90 s video whose round missed
    has nothing left to cover (without ``recrop`` the miss is final)."""
    from paravt.learners.coldstart.teacher import covered_until

    assert coverage_windows(150.0, 20.0, 5, widen=False) == [(0, 20), (20, 40), (40, 60), (60, 80), (80, 100)]
    assert coverage_windows(150.0, 20.0, 5, start=100.0, widen=False) == [(100, 120), (120, 140), (140, 160)]
    assert covered_until(_crop_times(coverage_windows(150.0, 20.0, 5, widen=False), 8), 20.0) == 100.0
    ev = Event(start=151.0, end=153.0, label="red star", attributes={"colour": "red"})

    def rounds(duration: float) -> list[list[tuple[float, float]]]:
        s = VideoQASample(id="c", video_path="v.mp4", question="q", answer="red", question_type="oe",
                          duration=duration, events=[ev])  # fmt: skip
        first = parse_response(first_turn(s, [10.0, 90.0], duration, window=20.0, max_calls=5, widen=False))
        calls = [[(c.start_time, c.end_time) for c in first.valid_tool_calls]]
        second = crop_turn(s, _crop_times(calls[0], 8), duration, window=20.0, max_calls=5, last=False,
                           recrop=False, widen=False)  # fmt: skip
        parsed = parse_response(second)
        assert RECROP_TEXT in second and parsed.answer is None and not parsed.problems
        calls.append([(c.start_time, c.end_time) for c in parsed.valid_tool_calls])
        end = crop_turn(s, _crop_times(calls[1], 8), duration, window=20.0, max_calls=5, last=True, widen=False)
        assert parse_response(end).answer == "red"
        return calls

    r170, r200 = rounds(170.0), rounds(200.0)
    assert r170[0] == r200[0] == [(0, 20), (20, 40), (40, 60), (60, 80), (80, 100)]
    assert r170[1] == [(100, 120), (120, 140), (140, 160), (160, 180)] and r200[1] == r170[1] + [(180, 200)]
    # the widened coverage of the same videos: bounds that are fractions of each duration
    assert coverage_windows(170.0, 20.0, 5) != coverage_windows(200.0, 20.0, 5)
    short = VideoQASample(id="s", video_path="v.mp4", question="q", answer="red", question_type="oe", duration=90.0,
                          events=[Event(start=41.0, end=43.0, label="red star", attributes={"colour": "red"})])  # fmt: skip
    missed = _crop_times([(0, 20), (20, 40), (40, 60), (60, 80), (80, 100)], 2)
    assert not visible_events(short, missed)
    with pytest.raises(TeacherMiss):
        crop_turn(short, missed, 90.0, window=20.0, max_calls=5, last=False, recrop=False, widen=False)


@pytest.fixture(scope="module")
def long_needles(tmp_path_factory):
    """Six real 110-150 s videos of the main job's task (one needle, colour questions)."""
    from paravt_env.data.synth_plan import SynthConfig
    from paravt_env.data.synthetic import generate_dataset

    cfg = SynthConfig(n=6, seed=14, min_duration=110, max_duration=150, size=112, min_events=1, max_events=1, distractors=0,
                      question_kinds=("oe_colour",), min_event_seconds=2, max_event_seconds=4, event_scale_min=0.6,
                      event_scale_max=0.85)  # fmt: skip
    return generate_dataset(tmp_path_factory.mktemp("long_needles"), cfg, progress=False)


@pytest.mark.parametrize("recipe", ["tiny_cpu", "repro_cpu"])
def test_the_shipped_teachers_continue_their_coverage_on_long_videos(long_needles, tiny_qwen3, recipe):
    """The main job's and the repro's teachers (``coverage: continue``) through the real env on real 110-150 s
    videos, cropping on a K = 4 overview: every call bound is a multiple of the window, whatever the duration
    (the repro's widened windows were bounds its cold start could not write); where the first round
    (0-100 s) missed, the next turn starts at 100 s and the episode ends in an answer."""
    pytest.importorskip("torch")
    from paravt.learners.coldstart.pipeline import teacher_episodes
    from paravt.learners.config import load_recipe
    from paravt.policies.hf import HFPolicy

    policy = HFPolicy.from_pretrained(tiny_qwen3)
    cfg = load_recipe(recipe, ["sft.episodes=16", "sft.frame_budgets=[4]", "env.frame_budget=4",
                               "sft.crop_rate=1.0"])  # fmt: skip
    assert cfg.sft.coverage == "continue"
    episodes, dropped = teacher_episodes(policy, list(long_needles), cfg)
    assert len(episodes) + dropped == 16
    if cfg.sft.guess_after_miss:
        assert dropped == 0
    bounds = [(c.start_time, c.end_time) for t in episodes for x in t.turn_texts for c in parse_response(x).valid_tool_calls]
    assert bounds and all(a % 20 == 0 and b % 20 == 0 for a, b in bounds)
    continued = [t for t in episodes if len(t.turn_texts) > 2 and parse_response(t.turn_texts[1]).valid_tool_calls]
    assert continued, "no long video needed a second round: the test shows nothing"
    for t in continued:
        assert parse_response(t.turn_texts[1]).valid_tool_calls[0].start_time == 100.0
        assert parse_response(t.turn_texts[-1]).answer


def test_the_teacher_of_a_sequential_arm_crops_one_window_a_turn_within_the_budget(synth_small, tiny_qwen3):
    """``env.dispatch: sequential`` with a crop budget: every teacher episode calls one window a turn, says so, runs
    at most the budget's crops and answers by the last of its ``budget + 1`` turns (the sequential learner)."""
    pytest.importorskip("torch")
    from paravt.learners.coldstart.pipeline import teacher_episodes
    from paravt.learners.config import load_recipe
    from paravt.policies.hf import HFPolicy
    from paravt_env.protocol import parse_response as parse

    cfg = load_recipe("tiny_cpu", ["sft.episodes=12", "sft.frame_budgets=[4]", "env.frame_budget=4", "sft.crop_rate=1.0",
                                   "sft.check_rate=0.0", "env.dispatch=sequential", "env.crop_budget=6",
                                   "sft.guess_after_miss=true"])  # fmt: skip
    episodes, dropped = teacher_episodes(HFPolicy.from_pretrained(tiny_qwen3), list(synth_small[1]), cfg)
    assert len(episodes) + dropped == 12 and episodes
    cropped = [t for t in episodes if len(t.turn_texts) > 1]
    assert cropped, "no episode cropped: the test shows nothing"
    for t in episodes:
        calls = [len(parse(x).valid_tool_calls) for x in t.turn_texts]
        assert all(n <= 1 for n in calls) and sum(calls) <= 6 and len(t.turn_texts) <= 7
        assert parse(t.turn_texts[-1]).answer
    assert any(len(t.turn_texts) > 2 for t in cropped)  # the coverage goes on a window a turn
    assert all("one window at a time" in t.turn_texts[0] for t in cropped)


def _two():
    events = [Event(start=12.0, end=15.0, label="red star", attributes={"colour": "red", "shape": "star"}),
              Event(start=70.0, end=73.0, label="blue cross", attributes={"colour": "blue", "shape": "cross"})]  # fmt: skip
    return VideoQASample(id="t", video_path="v.mp4", question="Two coloured shapes ... What are their colours?",
                         answer="red blue", question_type="oe", duration=90.0, events=events,
                         extra={"kind": "oe_colours", "relevant_events": ["red star", "blue cross"]})  # fmt: skip


def test_a_multi_event_question_is_answered_only_after_every_needle_was_seen():
    from paravt.learners.coldstart.teacher import needed_events

    s = _two()
    assert needed_events(s) == 2 and needed_events(_sample()) == 1
    # the overview shows the red one only: the teacher says so and crops (it does not answer half)
    first = first_turn(s, [13.0, 40.0, 80.0], 90.0, window=20.0, max_calls=5, needed=2, widen=False)
    assert "The overview shows a red shape. I will inspect" in first and parse_response(first).answer is None
    # crops that show the blue one answer both, with the red one the overview showed
    done = crop_turn(s, [62.0, 71.0], 90.0, window=20.0, max_calls=5, last=False, needed=2, earlier=[13.0, 40.0],
                     widen=False)  # fmt: skip
    assert parse_response(done).answer == "red blue" and "a red shape, a blue shape" in done
    # without what the earlier frames showed the same crops are half the evidence: the coverage goes on
    more = crop_turn(s, [62.0, 71.0], 90.0, window=20.0, max_calls=5, last=False, needed=2, widen=False)
    assert parse_response(more).answer is None and parse_response(more).valid_tool_calls
    # the last turn with one needle found names its colour (the honest half answer), not a guess
    assert parse_response(final_turn(s, [71.0], 2)).answer == "blue"
    # the tool-shy teacher answers what its overview showed instead of guessing blind
    shy = first_turn(s, [13.0, 40.0, 80.0], 90.0, window=20.0, max_calls=5, needed=2, guess="green cyan")
    assert parse_response(shy).answer == "red"


def test_the_teacher_plays_the_two_colours_family_to_both_colours(synth_two_colours, tiny_qwen3):
    """Teacher episodes through the real env on the family's videos: every cropping episode that found both
    needles answers both colours, the rest name what they found; nothing is dropped."""
    pytest.importorskip("torch")
    from paravt.learners.coldstart.pipeline import teacher_episodes
    from paravt.learners.config import load_recipe
    from paravt.policies.hf import HFPolicy
    from paravt_env.protocol import parse_response as parse

    cfg = load_recipe("tiny_cpu", ["data.task=two_colours", "sft.episodes=10", "sft.frame_budgets=[4]", "sft.crop_rate=1.0",
                                   "env.crop_budget=8"])  # fmt: skip
    samples = list(synth_two_colours[1])
    episodes, dropped = teacher_episodes(HFPolicy.from_pretrained(tiny_qwen3), samples, cfg)
    assert dropped == 0 and len(episodes) == 10
    full = [t for t, s in zip(episodes, samples, strict=True) if parse(t.turn_texts[-1]).answer == s.answer]  # episode i plays sample i
    assert len(full) >= 8, [parse(t.turn_texts[-1]).answer for t in episodes]
    for t, s in zip(episodes, samples, strict=True):  # it answers both only where its frames showed both
        if t in full:
            assert all(f"a {c} shape" in t.turn_texts[-1] for c in s.answer.split()), t.turn_texts[-1]
    assert any(len(t.turn_texts) > 2 for t in full)  # some needed a second round of crops to find the second needle


def test_a_count_question_is_answered_with_what_was_counted():
    from paravt.learners.coldstart.teacher import needed_events, partial_answer

    s = _two()
    s = VideoQASample(id="c", video_path="v.mp4", question="How many coloured shapes appear in the video?", answer="B",
                      question_type="mcq", options=["1", "2", "3", "4"], duration=90.0, events=s.events,
                      extra={"kind": "mcq_count", "relevant_events": ["red star", "blue cross"]})  # fmt: skip
    assert needed_events(s) == 2
    assert parse_response(final_turn(s, [13.0], 2)).answer == "A"  # one found: it says one, not the true two
    assert parse_response(final_turn(s, [13.0, 71.0], 2)).answer == "B"
    assert partial_answer(s, []) is None  # none of 1-4 is zero: nothing honest to answer, so it is a miss
