"""Perception stage: teach a small vision-language model to say what coloured shape its frames show.

A random-init tiny Qwen-VL fine-tuned straight on tool-use episodes learns the text and ignores the pixels:
its vision features collapse to a constant (cosine(real, grey) 0.99999) because the episode text predicts most
tokens without them. This stage comes first and makes the pixels the only way to lower the loss: short
sequences of frames from the training videos, the question "What coloured shape do these frames show?", and
the target sentence the cold-start teacher uses ("The crops show a red shape." / "... no coloured shape.").
Crop-like windows with and without the needle, and overviews of 4-16 frames, labelled by which frames
really show the needle (by their true timestamps).

It is the cheap analogue of the vision-language pre-training a released checkpoint already has. With
``answers`` on, frames that show the sample's events also get the sample's own question answered in
``<answer>`` tags, so the pixels-to-answer-token mapping is learnt here too. Measured (tiny Qwen3-VL, 400
videos, 600 steps of 4, lr 5e-4, then the cold start): ``paravt probe perception`` accuracy 0.98 with the
right crops, 0.25 with grey ones, and answers that follow another video's crops 83 % of the time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from paravt.learners.coldstart.sft import progress_iter, token_means, train_cross_entropy
from paravt.learners.coldstart.teacher import seen_words, visible_events
from paravt.policies.encoded import Encoded
from paravt.policies.hf import HFPolicy
from paravt_env.data import VideoQASample
from paravt_env.messages import Message
from paravt_env.protocol import ANSWER_FORMATS, IMAGE_PLACEHOLDER
from paravt_env.video import open_video, sample_overview, sample_window

QUESTION = "What coloured shape do these frames show?"


@dataclass
class PerceptionConfig:
    """The perception stage (before the cold start). ``steps=0`` skips it."""

    steps: int = 0
    """Optimiser steps (each on ``batch`` examples)."""
    lr: float = 1e-3
    """AdamW learning rate."""
    batch: int = 4
    """Examples per optimiser step (gradient accumulation)."""
    window: float = 20.0
    """Crop-like examples span this many seconds (the teacher's crop length)."""
    videos: int = 400
    """Short synthetic videos made for this stage alone (same task settings as the training data, their own
    seed, ``min_duration``-``max_duration`` s): many videos, so the model cannot memorise one per answer."""
    min_duration: float = 20.0
    max_duration: float = 40.0
    overview_budgets: tuple[int, ...] = (4, 8, 16)
    """Frame counts of the overview examples, one drawn per video: include the largest budget the policy will
    answer from (a 64-frame overview shows each frame smaller in the sequence, and nothing taught the model
    to find a needle among 64 frames when it only ever saw 4-16)."""
    overviews: int = 1
    """Overview examples per video, each at a budget drawn from ``overview_budgets``. Measured on ``repro_cpu``:
    with one, a fifth of them at K = 64, the cold start names a colour at K = 64 whether the
    needle is there or not (13 of 13 overviews that missed it); with three, the same cold start came out
    blind (oracle-crop accuracy 0.25, equal to grey crops', one colour answered whatever it was shown)."""
    answers: bool = True
    """Also train the sample's question answered in ``<answer>`` tags on frames that show its events (see
    ``answer_example``)."""
    closeups: int = 0
    """Frames of one close-up example per video: that many frames from inside the needle's first event, so
    every frame shows it (0: none). A crop of 8 frames shows the needle in one or two of them, a weak signal
    for which colour it is; a frame that shows nothing else teaches the colour fast. Measured (``tiny_cpu``,
    after the 600 perception steps, greedy, on 60 new videos' 8-frame crops that show the needle;
    colours named in the sentence / answered in ``<answer>`` tags): seed 1 without close-ups 18 / 20 of 60
    (green and cyan never; after 1,500 steps 36 / 43, a full cold start later it answered blue for green,
    cyan and blue), with one close-up 59 / 60; seed 0 47 / 40 without, 45 / 60 with."""


@dataclass
class PerceptionExample:
    encoded: Encoded
    loss_mask: list[int]
    target: str


def _frames_text(times) -> str:
    return "\n".join(f"<{t:.1f} seconds>{IMAGE_PLACEHOLDER}" for t in times)


def target_sentence(sample: VideoQASample, times, where: str) -> str:
    seen = visible_events(sample, times)
    verb = "shows" if where == "overview" else "show"
    if not seen:
        return f"The {where} {verb} no coloured shape."
    return f"The {where} {verb} " + seen_words(seen) + "."


def encode_example(policy: HFPolicy, frames, times, target: str, user: Message | None = None) -> PerceptionExample:
    """One user turn (frames, then the question) and the assistant's target, loss on the target only."""
    user = user or Message("user", _frames_text(times) + "\n" + QUESTION, list(frames))
    prompt = policy.render([user], add_generation_prompt=True)
    reply = target + "<|im_end|>\n"
    enc = policy._encode_text(prompt + reply, list(frames))
    n_reply = len(policy.tokenizer.encode(reply, add_special_tokens=False))
    mask = [0] * (len(enc.input_ids) - n_reply) + [1] * n_reply
    return PerceptionExample(enc.compact(), mask, target)  # frames compressed: thousands of examples wait in memory


def answer_example(policy: HFPolicy, sample: VideoQASample, frames, times) -> PerceptionExample | None:
    """The sample's own question on these frames, answered in the episode's answer form
    (``<answer>red</answer>``), when the frames show every event of the sample (else it is not answerable
    from them): the pixels-to-answer-token mapping, learnt where it is cheap (the teacher's think text names
    the colour, but a 2-layer model copies " red" into ``<answer>red`` only slowly; measured: the think colour
    was right under teacher forcing, the answer token at chance)."""
    if not sample.events or len(visible_events(sample, times)) < len(sample.events):
        return None
    question = sample.question_with_options() + "\n" + ANSWER_FORMATS[sample.question_type]
    user = Message("user", _frames_text(times) + "\n" + question, list(frames))
    return encode_example(policy, frames, times, f"<answer>{sample.answer}</answer>", user=user)


def build_examples(policy: HFPolicy, samples: list[VideoQASample], cfg: PerceptionConfig, *, crop_fps: float,
                   crop_max_frames: int, min_pixels: int, max_pixels: int, seed: int = 0,
                   progress: bool = False) -> list[PerceptionExample]:
    """Per video: a crop-like window holding the needle, one without it (when the video has room), a close-up
    of ``cfg.closeups`` frames inside the needle (when asked for), and ``cfg.overviews`` overviews of
    ``cfg.overview_budgets`` frames (one of 4, 8 or 16); every label read from the frames' true timestamps.
    With ``cfg.answers``, each of them that shows the sample's events also yields an answer example."""
    answers = cfg.answers
    rng = random.Random(seed)
    out: list[PerceptionExample] = []
    for sample in progress_iter(samples, "perception examples", progress, unit="video"):
        reader = open_video(sample.video_path)
        try:
            d = reader.duration
            spans = []
            for e in sample.events[:1]:
                lo = max(0.0, e.end - cfg.window + 0.5)
                hi = max(lo, min(e.start - 0.5, d - cfg.window))
                a = rng.uniform(lo, hi)
                spans.append((a, a + cfg.window))
            clear = [(a, a + cfg.window) for a in np.arange(0.0, max(d - cfg.window, 0.0) + 1e-9, cfg.window / 2)
                     if not any(a < e.end and a + cfg.window > e.start for e in sample.events)]  # fmt: skip
            if clear:
                spans.append(rng.choice(clear))
            for a, b in spans:
                fr = sample_window(reader, a, b, fps=crop_fps, max_frames=crop_max_frames,
                                   min_pixels=min_pixels, max_pixels=max_pixels)  # fmt: skip
                out.append(encode_example(policy, fr.images, fr.timestamps,
                                          target_sentence(sample, fr.timestamps, "crops")))  # fmt: skip
                if answers:
                    out.append(answer_example(policy, sample, fr.images, fr.timestamps))
            if cfg.closeups > 0 and sample.events:
                e = sample.events[0]
                # fps high enough that ``closeups`` frames fit inside the event: all of them show it
                fr = sample_window(reader, e.start, e.end, fps=max(1.0, 2 * cfg.closeups / max(e.end - e.start, 1e-3)),
                                   max_frames=cfg.closeups, min_pixels=min_pixels, max_pixels=max_pixels)  # fmt: skip
                out.append(encode_example(policy, fr.images, fr.timestamps, target_sentence(sample, fr.timestamps, "crops")))
                if answers:
                    out.append(answer_example(policy, sample, fr.images, fr.timestamps))
            for _ in range(cfg.overviews):
                k = rng.choice(tuple(cfg.overview_budgets))  # a tuple, as always: the same draws for the default
                ov = sample_overview(reader, k, min_pixels=min_pixels, max_pixels=max_pixels, cache=False)
                out.append(encode_example(policy, ov.images, ov.timestamps, target_sentence(sample, ov.timestamps, "overview")))
                if answers:
                    out.append(answer_example(policy, sample, ov.images, ov.timestamps))
        finally:
            reader.close()
    return [ex for ex in out if ex is not None]


example_losses = token_means
"""The perception stage's loss: an example's mean negative log-likelihood of its target (``token_means``)."""


def train_perception(policy: HFPolicy, examples: list[PerceptionExample], cfg: PerceptionConfig, *,
                     grad_clip: float = 1.0, seed: int = 0, progress: bool = False, **checkpoints) -> list[dict]:
    """``cfg.steps`` AdamW steps of ``cfg.batch`` examples each, reshuffled every pass; rows of
    ``{"stage": "perception", "step", "loss"}``. ``checkpoints``: ``train_cross_entropy``'s ``resume`` /
    ``save_state``."""
    return train_cross_entropy(policy, examples, example_losses, steps=cfg.steps, batch=cfg.batch, lr=cfg.lr,
                               grad_clip=grad_clip, seed=seed, stage="perception", progress=progress,
                               **checkpoints)  # fmt: skip
