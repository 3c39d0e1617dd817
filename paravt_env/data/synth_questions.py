"""The questions about a synthetic video: multiple choice (colour, shape, order, count), open-ended (colour,
shape) and temporal grounding, drawn from the video's seed; exactly one right answer each, since colours and
shapes are unique within a video."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .sample import Event, VideoQASample
from .synth_plan import PALETTE, SHAPES

if TYPE_CHECKING:
    from .synth_plan import Needle, SynthConfig, VideoPlan

_KIND_TYPE = {"mcq": "mcq", "oe": "oe", "tvg": "tvg"}


@dataclass
class _Question:
    kind: str
    question: str
    answer: str
    options: list[str]
    about: list[int]  # indices of the needles needed to answer


def _shuffled_options(rng: np.random.Generator, correct: str, others: list[str]) -> tuple[list[str], str]:
    picks = [*others[:3], correct]
    options = [picks[i] for i in rng.permutation(len(picks))]
    return options, "ABCD"[options.index(correct)]


NUMBER_WORDS = ("no", "One", "Two", "Three", "Four", "Five")
"""How ``oe_colours`` says how many needles a video holds (a video has at most five)."""


def colours_question(n: int) -> str:
    """The ``oe_colours`` question about a video of ``n`` needles (the scripted reader parses it back)."""
    if n == 1:
        return "One coloured shape briefly appears in the video. What is its colour? Answer with one colour word."
    return (f"{NUMBER_WORDS[n]} coloured shapes briefly appear in the video, one after the other. What are their "
            f"colours? Answer with {NUMBER_WORDS[n].lower()} colour words, in order of appearance.")  # fmt: skip


def _ask(rng: np.random.Generator, kind: str, needles: list[Needle]) -> _Question:
    i = int(rng.integers(len(needles)))
    nd = needles[i]
    if kind == "oe_colours":
        # Every needle's colour, in time order (the plan's needles are): scored by token F1, so finding k of n
        # needles scores about k / n, and no single window can answer.
        return _Question(kind, colours_question(len(needles)), " ".join(n.colour for n in needles), [],
                         list(range(len(needles))))
    if kind == "mcq_colour":
        others = [str(c) for c in rng.permutation([c for c in PALETTE if c != nd.colour])]
        options, letter = _shuffled_options(rng, nd.colour, others)
        return _Question(
            kind, f"A {nd.shape} briefly appears in the video. What colour is it?", letter, options, [i]
        )
    if kind == "mcq_shape":
        others = [str(s) for s in rng.permutation([s for s in SHAPES if s != nd.shape])]
        options, letter = _shuffled_options(rng, nd.shape, others)
        return _Question(
            kind, f"A {nd.colour} shape briefly appears in the video. What shape is it?", letter, options, [i]
        )
    if kind == "mcq_order" and len(needles) >= 2:
        labels = [n.label for n in needles]
        if rng.random() < 0.5 or i == len(needles) - 1:
            # Which of (up to 4 of) the shown shapes comes first; absent shapes pad the options to four.
            shown = sorted(int(k) for k in rng.choice(len(needles), size=min(len(needles), 4), replace=False))
            absent = [f"{c} {s}" for c in PALETTE for s in SHAPES if f"{c} {s}" not in labels]
            pad = [str(a) for a in rng.choice(absent, size=4 - len(shown), replace=False)]
            options, letter = _shuffled_options(rng, labels[shown[0]], [labels[k] for k in shown[1:]] + pad)
            return _Question(
                kind, "Which of these coloured shapes appears first in the video?", letter, options, shown
            )
        # Which shape comes right after needle i: the others (and absent ones) are the distractors.
        after = labels[i + 1]
        others = [labels[k] for k in rng.permutation(len(needles)) if k != i + 1]
        absent = [f"{c} {s}" for c in PALETTE for s in SHAPES if f"{c} {s}" not in labels]
        others += [str(a) for a in rng.choice(absent, size=3, replace=False)]
        options, letter = _shuffled_options(rng, after, others[:3])
        return _Question(
            kind,
            f"Which coloured shape appears next in the video after the {nd.label}?",
            letter,
            options,
            [i, i + 1],
        )
    if kind == "mcq_count":
        count = len(needles)
        lo = int(rng.integers(max(1, count - 3), count + 1))
        options = [str(v) for v in range(lo, lo + 4)]
        return _Question(
            kind,
            "How many coloured shapes appear in the video (each one briefly)?",
            "ABCD"[options.index(str(count))],
            options,
            list(range(len(needles))),
        )
    if kind == "oe_colour":
        return _Question(
            kind, f"What colour is the {nd.shape} that briefly appears in the video? Answer with one word.",
            nd.colour, [], [i],
        )  # fmt: skip
    if kind == "oe_shape":
        return _Question(
            kind, f"What shape is the {nd.colour} object that briefly appears in the video? Answer with one word.",
            nd.shape, [], [i],
        )  # fmt: skip
    # tvg (also what mcq_order falls back to when a video has a single needle)
    return _Question(
        "tvg",
        f"When does the {nd.label} appear in the video? Answer with [start, end] in seconds.",
        f"[{nd.start:.1f}, {nd.end:.1f}]",
        [],
        [i],
    )


def _question_type(kind: str) -> str:
    return _KIND_TYPE[kind.split("_", 1)[0]]


def make_samples(plan: VideoPlan, cfg: SynthConfig) -> list[VideoQASample]:
    """The questions about one planned video (``video_path`` = the file name, relative to the dataset dir)."""
    rng = np.random.default_rng([cfg.seed, plan.index, 1])
    events = [nd.to_event() for nd in plan.needles]
    samples = []
    for j in range(cfg.questions_per_video):
        kind = str(cfg.question_kinds[int(rng.integers(len(cfg.question_kinds)))])
        q = _ask(rng, kind, plan.needles)
        suffix = "" if cfg.questions_per_video == 1 else f"-q{j}"
        samples.append(
            VideoQASample(
                id=f"synth-{cfg.seed}-{plan.index:05d}{suffix}",
                video_path=plan.name,
                question=q.question,
                answer=q.answer,
                question_type=_question_type(q.kind),
                options=q.options,
                duration=plan.duration,
                events=[Event(e.start, e.end, e.label, dict(e.attributes)) for e in events],
                extra={
                    "kind": q.kind,
                    "relevant_events": [plan.needles[k].label for k in q.about],
                    "synth": {"seed": cfg.seed, "index": plan.index, "fps": cfg.fps, "size": cfg.size},
                    **({"counterfactual": cfg.counterfactual} if cfg.counterfactual else {}),
                },
            )
        )
    return samples
