"""The cold-start teacher: demonstrations a small policy can learn to imitate, decided from what it was shown.

The paper cold-starts from successful parallel tool-use trajectories. On synthetic videos we can write them,
but an oracle that crops the exact event windows demonstrates something no policy can learn: where an event
is, when the overview never showed it. This teacher only uses what the agent can know:

- **turn 1**: if an overview frame shows a needle (its timestamp lies inside an event window), it reads the
  answer off that frame; otherwise it says the overview shows nothing and covers the video with crops of
  ``window`` seconds (0-20, 20-40, ...), all in one parallel turn: how many depends on the duration written
  in the prompt, nothing else;
- **turn 2**: it reads the answer off the crop frames that show the needle; when they show none (a short event
  can fall between two crop frames) and a turn is left, it crops again, each window shifted by half the
  spacing of the frames it was shown (``recrop_turn``), so the second round's frames fall between the
  first's; the next turn answers from them.

With ``crop_rate`` below 1 the teacher is a base model with a weak tool prior: in that share of the episodes
whose overview misses the needle it crops, in the others it writes that it saw nothing and guesses an answer
(``guess_turn``). The cold start then leaves RL a decision to learn from reward alone: when to call the tool.

With ``check`` the teacher has the strong tool prior the paper's cold start has (tool calls where the overview
already answers): it writes what the overview shows, then crops one window around that frame to check it
(``check_turn``) and answers from the crop. The call is redundant, so dropping it is a shortcut RL can take:
the Tool Prior Paradox's collapse, observable from step 1.

So the decision to call (the Tool Necessity Gap: at K=64 the overview usually shows the needle, at K=4 it
rarely does) and the answer (the colour of what is on screen) both follow the pixels. Where the last turn's
frames still show no needle the teacher has nothing honest to say: with ``guess_after_miss`` it says so and
guesses (what a base model does), else the episode is dropped (``TeacherMiss``) and counted.

The think text names the needle by its colour ("a red shape"), the attribute the tiny task asks about.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from paravt_env.data import VideoQASample
from paravt_env.protocol import THINK_PREFIX, format_tool_call

"""Every teacher turn opens like this: with PARA-GRPO's think prefix the same text is forced as prompt."""


class TeacherMiss(Exception):
    """The frames the agent was shown hold no needle: there is no honest demonstration to write."""


def visible_events(sample: VideoQASample, timestamps: Sequence[float]) -> list:
    """The sample's events that some frame (by its true timestamp) shows."""
    times = np.asarray(list(timestamps), dtype=np.float64)
    return [e for e in sample.events if times.size and bool(np.any((times >= e.start) & (times < e.end)))]


def coverage_windows(duration: float, window: float, max_calls: int, *, start: float = 0.0,
                     widen: bool = True) -> list[tuple[float, float]]:  # fmt: skip
    """Consecutive windows of ``window`` seconds from ``start`` towards ``duration`` (the last one may overrun
    the end: the env clamps it), at most ``max_calls``. Where more are needed, ``widen`` widens each to share
    the video equally (one round covers it all, in windows whose bounds depend on the duration); otherwise the
    round covers the first ``max_calls`` windows and ``continue_turn`` goes on from there."""
    n = max(1, math.ceil((duration - start) / window - 1e-9))
    if n > max_calls:
        if widen:
            n, window = max_calls, math.ceil((duration - start) / max_calls)
        else:
            n = max_calls
    return [(start + i * window, start + (i + 1) * window) for i in range(n)]


def covered_until(crop_times: Sequence[float], window: float) -> float:
    """Where the fixed ``window`` grid that the crop frames ``crop_times`` came from ends: the boundary after
    the latest frame (the frames of a crop lie inside its window)."""
    return window * math.ceil(max(crop_times) / window + 1e-9) if len(crop_times) else 0.0


def describe(event) -> str:
    """"red shape": the colour, which is what the tiny task asks about (a tiny vision tower tells colours
    apart long before shapes, and words it cannot ground would only teach it to guess)."""
    colour = event.attributes.get("colour", "")
    return f"{colour} shape" if colour else event.label


def seen_words(events) -> str:
    """"a red shape, a blue shape": how the teacher's and the perception stage's sentences name what frames show."""
    return ", ".join(f"a {describe(e)}" for e in events)


def needed_events(sample: VideoQASample) -> int:
    """How many needles the teacher must have seen before it answers: every needle the question asks about for a
    multi-event kind (``oe_colours``: each one's colour; ``mcq_count``: how many there are), else one (the
    one-needle kinds, as before)."""
    from paravt_env.data.synth_plan import MULTI_EVENT_KINDS

    if sample.extra.get("kind") in (*MULTI_EVENT_KINDS, "mcq_count"):
        return max(1, len(sample.extra.get("relevant_events") or ()))
    return 1


def answer_turn(sample: VideoQASample, seen: list, where: str, answer: str | None = None) -> str:
    what = seen_words(seen)
    answer = sample.answer if answer is None else answer
    return f"{THINK_PREFIX}The {where} show{'s' if where == 'overview' else ''} {what}.</think>\n<answer>{answer}</answer>"


def partial_answer(sample: VideoQASample, seen: list) -> str | None:
    """What a multi-event question's honest answer is when only some of its needles were seen: the colours of
    those (``oe_colours``), in order of appearance; the option that counts them (``mcq_count``); None for other
    kinds (one needle, or nothing to say)."""
    kind = sample.extra.get("kind")
    if kind == "mcq_count":
        letters = [chr(ord("A") + i) for i, o in enumerate(sample.options) if o.strip() == str(len(seen))]
        return letters[0] if letters else None
    if kind != "oe_colours" or not seen:
        return None
    return " ".join(e.attributes.get("colour", "") for e in sorted(seen, key=lambda e: e.start))


def first_turn(sample: VideoQASample, overview_times: Sequence[float], duration: float, *, window: float,
               max_calls: int, needed: int = 1, guess: str | None = None, check: bool = False,
               check_window: float | None = None, widen: bool = True, one_a_turn: bool = False) -> str:
    """Answer from the overview when it shows the needle(s) the question needs (or, with ``check``, crop around
    it first), else crop in parallel (or, given a ``guess``, answer it without cropping); ``widen`` as in
    ``coverage_windows``; ``one_a_turn``: the teacher of sequential dispatch, which says it crops one window a
    turn (``max_calls`` 1)."""
    seen = visible_events(sample, overview_times)
    if len(seen) >= needed:
        if check:
            if widen:
                return check_turn(sample, seen, overview_times, duration, window=check_window or window)
            # with the fixed coverage grid the check crops the grid's window, so every bound stays a multiple
            # of ``window`` (a centred window's bounds, t - 8 s, were arithmetic a 2-layer model never learnt)
            return check_turn(sample, seen, overview_times, duration, window=window, grid=True)
        return answer_turn(sample, seen, "overview")
    partial = partial_answer(sample, seen)  # a multi-event question whose overview shows some of its needles
    if guess is not None:
        return answer_turn(sample, seen, "overview", answer=partial) if partial is not None else guess_turn(guess)
    windows = coverage_windows(duration, window, max_calls, widen=widen)
    calls = "\n".join(format_tool_call(a, b) for a, b in windows)
    what = seen_words(seen) if partial is not None else "no coloured shape"
    if one_a_turn:
        return f"{THINK_PREFIX}The overview shows {what}. I will inspect one window at a time.</think>\n{calls}"
    return (f"{THINK_PREFIX}The overview shows {what}. I will inspect {len(windows)} windows in "
            f"parallel.</think>\n{calls}")  # fmt: skip


GUESS_TEXT = "The overview shows no coloured shape. I will guess."
"""The tool-shy teacher's think text: it shares "...no coloured shape. I will" with the crop turn, so the call
decision is one token (" guess" vs " inspect") in a context only overview misses have. Ending the sentence at
"shape." instead made the decision token "</think>" vs " I", and "shape.</think>" also closes every turn that
saw the needle: a 2-layer model put p(crop) at 0.07 for a teacher that cropped in half of its misses."""


def guess_turn(guess: str) -> str:
    """The tool-shy teacher's turn when the overview shows nothing: no crop, a guess."""
    return f"{THINK_PREFIX}{GUESS_TEXT}</think>\n<answer>{guess}</answer>"


CHECK_TEXT = "I will inspect 1 window to check."
"""The strong tool prior's words before its redundant call (``check_turn``)."""


def check_turn(sample: VideoQASample, seen: list, overview_times: Sequence[float], duration: float, *,
               window: float, grid: bool = False) -> str:
    """The strong tool prior's turn where the overview already shows the needle: say so, then crop one
    ``window`` centred on the first overview frame that shows it (clamped to the video) to check; with
    ``grid``, the window of the coverage grid (multiples of ``window``) that holds that frame."""
    times = np.asarray(list(overview_times), dtype=np.float64)
    e = seen[0]
    t = float(times[(times >= e.start) & (times < e.end)][0])
    if grid:
        start = window * math.floor(t / window)
    else:
        start = min(max(0.0, t - window / 2), max(0.0, duration - window))
    what = seen_words(seen)
    return (f"{THINK_PREFIX}The overview shows {what}. {CHECK_TEXT}</think>\n"
            f"{format_tool_call(start, min(duration, start + window))}")  # fmt: skip


GUESS_TEXT_AFTER_CROPS = "The crops show no coloured shape. I will guess."
"""The teacher's words when its last crops showed nothing either (``SFTConfig.guess_after_miss``)."""

RECROP_TEXT = "The crops show no coloured shape. I will inspect"
"""The teacher's words before a second round of crops: the perception stage's sentence for crops without the
needle, then the same call phrase as the first round."""


def recrop_turn(crop_times: Sequence[float], duration: float, *, window: float, max_calls: int,
                one_a_turn: bool = False) -> str:  # fmt: skip
    """A second round after crops that missed the needle: the first round's windows (``coverage_windows``) each
    shifted later by half the median spacing of the crop frames just shown (clamped to the video), so that
    the new frames fall between the old ones. Only the timestamps the agent was shown decide the shift."""
    times = np.sort(np.asarray(list(crop_times), dtype=np.float64))
    gaps = np.diff(times)
    shift = float(np.median(gaps[gaps > 0])) / 2 if np.any(gaps > 0) else window / 4
    windows = [(min(a + shift, duration), min(b + shift, duration)) for a, b in coverage_windows(duration, window, max_calls)]
    return more_windows_turn([(a, b) for a, b in windows if b > a], one_a_turn=one_a_turn)


def more_windows_turn(windows: Sequence[tuple[float, float]], *, one_a_turn: bool = False) -> str:
    """A round after crops that showed nothing (``recrop_turn``, ``continue_turn``): the same words before
    ``windows``' parallel calls (``one_a_turn``: the next window, under sequential dispatch)."""
    calls = "\n".join(format_tool_call(a, b) for a, b in windows)
    if one_a_turn:
        return f"{THINK_PREFIX}{RECROP_TEXT} the next window.</think>\n{calls}"
    return f"{THINK_PREFIX}{RECROP_TEXT} {len(windows)} more windows in parallel.</think>\n{calls}"


def continue_turn(start: float, duration: float, *, window: float, max_calls: int, one_a_turn: bool = False) -> str:
    """The next round of a coverage that did not fit in one (``SFTConfig.coverage`` "continue"): the same
    fixed windows, from where the last round ended. Its bounds are the same on every video long enough to
    need them, so a policy that learnt them on 100-170 s videos writes them on a 200 s one too."""
    return more_windows_turn(coverage_windows(duration, window, max_calls, start=start, widen=False), one_a_turn=one_a_turn)


def final_turn(sample: VideoQASample, crop_times: Sequence[float], needed: int = 1, *,
               guess: str | None = None, earlier: Sequence[float] = ()) -> str:  # fmt: skip
    """The answer read off the crop frames that show the needle(s) (and the frames ``earlier`` turns showed);
    where they show fewer than ``needed``, a multi-event question is answered with what was seen
    (``partial_answer``), else ``guess`` answered after saying so (or ``TeacherMiss`` without one)."""
    seen = visible_events(sample, [*earlier, *crop_times])
    if len(seen) < needed:
        partial = partial_answer(sample, seen)
        if partial is not None:
            return answer_turn(sample, seen, "crops", answer=partial)
        if guess is not None:
            return f"{THINK_PREFIX}{GUESS_TEXT_AFTER_CROPS}</think>\n<answer>{guess}</answer>"
        raise TeacherMiss(f"the crops of {sample.id} show {len(seen)} of the {needed} needle(s) needed")
    return answer_turn(sample, seen, "crops")


def crop_turn(sample: VideoQASample, crop_times: Sequence[float], duration: float, *, window: float,
              max_calls: int, last: bool, needed: int = 1, guess: str | None = None, recrop: bool = True,
              widen: bool = True, one_a_turn: bool = False, earlier: Sequence[float] = ()) -> str:  # fmt: skip
    """The teacher's turn after crops: the answer when they (with the frames ``earlier`` turns showed) show the
    ``needed`` needle(s) or when this is the episode's last turn (``final_turn``); else, without ``widen``, the
    rest of the video while some is left (``continue_turn``); else, with ``recrop``, a second round of shifted
    crops (``recrop_turn``)."""
    if last or len(visible_events(sample, [*earlier, *crop_times])) >= needed:
        return final_turn(sample, crop_times, needed, guess=guess, earlier=earlier)
    if not widen:
        start = covered_until(crop_times, window)
        if start < duration - 1e-6:
            return continue_turn(start, duration, window=window, max_calls=max_calls, one_a_turn=one_a_turn)
    if recrop:
        return recrop_turn(crop_times, duration, window=window, max_calls=max_calls, one_a_turn=one_a_turn)
    return final_turn(sample, crop_times, needed, guess=guess, earlier=earlier)
