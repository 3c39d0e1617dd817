"""``paravt probe perception``: do a checkpoint's answers follow the pixels?

A policy can reach a good reward on a synthetic task without looking (one colour answered every time, the
format learnt from text). This probe puts the checkpoint in the state the tool exists for: the overview has
been shown, one ``crop_video`` call on the window that holds the needle (the *oracle* crop) has run, and the
model must answer. The crop frames are then swapped, everything else (text, timestamps, frame sizes) kept:

- ``oracle``: the real crop frames;
- ``grey``: uniform grey frames;
- ``other``: the oracle crop frames of another video (whose answer usually differs).

A model that sees is right under ``oracle``, at chance under ``grey``, and follows the other video's answer
under ``other``; a blind one answers the same under all three. Besides accuracy it reports how far the
next-token distribution moves when only the pixels change (total variation, and mean absolute change of the
log-probabilities next to their spread), over the whole response and at the answer's own tokens.

The same checkpoint also answers from the overview alone (tool calls suppressed) at K=4 and K=64 frames: the
**Tool Necessity Gap** (paper, Sec. 3) is ``K=64 - K=4``, and the oracle crops show what cropping can add. A
policy that checks before it answers writes no answer with its calls suppressed, so the same overviews are
also answered with the answer forced after its own think block (``overview_forced``): what it saw.

Answers are greedy; the final turn is generated with ``<tool_call>`` suppressed so that it is an answer.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import torch

from paravt.policies.encoded import Encoded
from paravt.policies.hf import HFPolicy
from paravt_env import EnvConfig, VideoToolEnv
from paravt_env.data import VideoQASample
from paravt_env.messages import Message, observation_messages
from paravt_env.protocol import format_tool_call
from paravt_env.rewards import answer_accuracy, extract_answer

CONDITIONS = ("oracle", "grey", "other")


@dataclass
class ProbeConfig:
    """What the probe shows the checkpoint."""

    env: EnvConfig = field(default_factory=EnvConfig)
    """Env settings (frame budget, crop sampling, pixels): a checkpoint's policy card gives them."""
    window: float = 20.0
    """Length of the oracle crop, in seconds, placed so that it holds the first event."""
    overview_budgets: tuple[int, ...] = (4, 64)
    """Overview frame budgets for the answer-from-overview arm (the Tool Necessity Gap)."""
    max_new_tokens: int = 96
    """Tokens per probed answer."""


def load_checkpoint(spec: str) -> tuple[HFPolicy, EnvConfig]:
    """A greedy ``HFPolicy`` for a checkpoint directory (or ``hf:DIR``) and its env settings (policy card, else
    the env defaults)."""
    from pathlib import Path

    from paravt.policies.card import ENV_KEYS, read_card

    path = Path(spec[3:] if spec.startswith("hf:") else spec)
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint directory {path} does not exist")
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} holds no config.json: not a transformers checkpoint")
    card = read_card(path)
    cfg = EnvConfig(**{k: v for k, v in card.get("env", {}).items() if k in ENV_KEYS})
    policy = HFPolicy.from_pretrained(path, device="auto", temperature=0.0, think_prefix=bool(card.get("think_prefix")),
                                      min_pixels=cfg.min_pixels, max_pixels=cfg.max_pixels)  # fmt: skip
    return policy, cfg


def oracle_window(sample: VideoQASample, duration: float, window: float) -> tuple[float, float]:
    """A ``window``-second span holding the sample's first event, centred on it where the video allows."""
    if not sample.events:
        raise ValueError(f"sample {sample.id} records no event windows: the probe needs synthetic samples")
    e = sample.events[0]
    window = min(window, duration)
    a = min(max(0.0, (e.start + e.end) / 2 - window / 2), max(0.0, duration - window))
    return round(a, 1), round(min(duration, a + window), 1)


def _first_turn(a: float, b: float) -> str:
    return f"<think>\nI will look closer at {a:.1f}-{b:.1f} seconds.</think>\n{format_tool_call(a, b)}"


@contextlib.contextmanager
def _no_tool_calls(policy: HFPolicy):
    """Generation without ``<tool_call>``: the model's turn has to be an answer."""
    tag = policy.tokenizer.convert_tokens_to_ids("<tool_call>")
    saved = list(policy.suppress_ids)
    if isinstance(tag, int) and tag >= 0 and tag != policy.tokenizer.unk_token_id:
        policy.suppress_ids = [*saved, tag]
    try:
        yield
    finally:
        policy.suppress_ids = saved


def _fit(frames: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``frames`` cycled to the count of ``like`` and cut/padded to its frame size (pixels only change)."""
    out = np.full_like(like, 128)
    for i in range(len(like)):
        src = frames[i % len(frames)]
        h, w = min(src.shape[0], like.shape[1]), min(src.shape[1], like.shape[2])
        out[i, :h, :w] = src[:h, :w]
    return out


def _answer_span(policy: HFPolicy, ids: Sequence[int]) -> list[int]:
    """Positions (in ``ids``) of the tokens between ``<answer>`` and ``</answer>``; all positions if absent."""
    open_id = policy.tokenizer.convert_tokens_to_ids("<answer>")
    close_id = policy.tokenizer.convert_tokens_to_ids("</answer>")
    ids = list(ids)
    if open_id in ids:
        start = ids.index(open_id) + 1
        stop = ids.index(close_id, start) if close_id in ids[start:] else len(ids)
        if stop > start:
            return list(range(start, stop))
    return list(range(len(ids)))


def _response_logprobs(policy: HFPolicy, prompt: Encoded, response: Sequence[int]) -> torch.Tensor:
    """log-softmax of the next-token logits at every response position (T x vocab), teacher-forced."""
    enc = prompt.with_ids(response)
    with torch.no_grad():
        logits = policy.model(**policy.model_inputs(enc)).logits[0].float()
    n = len(prompt.input_ids)
    return torch.log_softmax(logits[n - 1 : n - 1 + len(response)], dim=-1)


def _shift(base: torch.Tensor, other: torch.Tensor, positions: list[int]) -> dict[str, float]:
    p, q = base[positions].exp(), other[positions].exp()
    finite = torch.isfinite(base[positions]) & torch.isfinite(other[positions])
    delta = (base[positions] - other[positions]).abs()[finite]
    return {"tv": float(0.5 * (p - q).abs().sum(-1).mean()), "mean_abs_logprob_change": float(delta.mean()),
            "logprob_std": float(base[positions][torch.isfinite(base[positions])].std())}  # fmt: skip


def _forced_answer(policy: HFPolicy, conv: list[Message], text: str, sample: VideoQASample) -> float:
    """The answer's accuracy when the policy is made to answer from what it has been shown: its own turn
    ``text`` kept up to the end of its think block (closed there if it was not: a turn that announced a
    check crop stops before its call), then ``<answer>`` forced and the answer generated greedily. A turn
    that already answered is scored as it is. This separates seeing from the habit of calling: with tool calls
    merely suppressed, a policy that checks the overview before answering writes no answer at all."""
    if "<answer>" in text:  # extract_answer falls back to the whole text: only a tagged answer is an answer here
        return _correct(text, sample)
    head = text.split("</think>")[0] if "</think>" in text else text.split("<tool_call>")[0]
    if not head.lstrip().startswith("<think>"):
        head = "<think>\n" + head
    prompt = policy.render(conv, add_generation_prompt=True) + head.rstrip() + "</think>\n<answer>"
    encoded = policy._encode_text(prompt, [im for m in conv for im in m.images])
    [gen] = policy.generate_encoded([encoded], temperature=0.0, max_new_tokens=16, think_prefix=False)
    return _correct("<answer>" + gen.text, sample)


def _correct(text: str, sample: VideoQASample) -> float:
    """The reward's accuracy rule on the ``<answer>`` of ``text`` (token F1 for open-ended answers, as eval scores)."""
    return float(answer_accuracy(extract_answer(text), sample.answer, sample.question_type, "f1"))


def probe_perception(policy: HFPolicy, samples: Sequence[VideoQASample], cfg: ProbeConfig | None = None,
                     progress: bool = False) -> dict[str, Any]:  # fmt: skip
    """Run the probe on ``samples`` (synthetic samples: they record where their events are); see the module
    docstring. Returns the summary ``paravt probe perception --json`` prints, with one row per sample."""
    cfg = cfg or ProbeConfig()
    samples = [s for s in samples if s.events]
    if len(samples) < 2:
        raise ValueError("the probe needs at least 2 samples with recorded events (synthetic data)")
    # The probe swaps crop *frames*: they must come back as frames, whatever mode the policy was trained in.
    env = VideoToolEnv(list(samples), replace(cfg.env, tool_result="frames", subagent=None))
    greedy = {"temperature": 0.0, "max_new_tokens": cfg.max_new_tokens}
    rows: list[dict[str, Any]] = []
    try:
        # Pass 1: each sample's episode up to the final answer, with its oracle crop executed.
        states = []
        for s in samples:
            obs, info = env.reset(options={"sample": s})
            a, b = oracle_window(s, info["duration"], cfg.window)
            first = _first_turn(a, b)
            crop, _, done, _, step_info = env.step(first)
            if done or not len(crop["frames"]):
                raise RuntimeError(f"the oracle crop of {s.id} returned no frames: {step_info['tool_calls']}")
            history = [*observation_messages(obs, info), Message("assistant", first)]
            [reply] = observation_messages(crop, step_info)  # the crop's tool response, its frames swapped below
            states.append((s, history, crop, reply))
        bar = _bar(len(states), progress)
        for i, (s, history, crop, reply) in enumerate(states):
            other_sample, _, other_crop, _ = states[(i + 1) % len(states)]
            frames = {"oracle": crop["frames"], "grey": np.full_like(crop["frames"], 128),
                      "other": _fit(other_crop["frames"], crop["frames"])}  # fmt: skip
            prompts = {c: policy.encode([*history, Message(reply.role, reply.text, list(f))]) for c, f in frames.items()}
            with _no_tool_calls(policy):
                gens = dict(zip(CONDITIONS, policy.generate_encoded([prompts[c] for c in CONDITIONS], **greedy), strict=True))
            response = gens["oracle"].token_ids
            base = _response_logprobs(policy, prompts["oracle"], response)
            span = _answer_span(policy, response)
            row: dict[str, Any] = {"id": s.id, "answer": s.answer, "other_answer": other_sample.answer,
                                   "texts": {c: g.text for c, g in gens.items()},
                                   "correct": {c: _correct(g.text, s) for c, g in gens.items()},
                                   "follows_other": _correct(gens["other"].text, other_sample)}  # fmt: skip
            for c in ("grey", "other"):
                moved = _response_logprobs(policy, prompts[c], response)
                row[f"shift_{c}"] = {"response": _shift(base, moved, list(range(len(response)))),
                                     "answer": _shift(base, moved, span)}  # fmt: skip
            rows.append(row)
            if bar:
                bar.update(1)
        if bar:
            bar.close()
        overview, forced = {}, {}
        for k in cfg.overview_budgets:
            right, made = [], []
            for s in samples:
                obs, info = env.reset(options={"sample": s, "frame_budget": k})
                conv = observation_messages(obs, info)
                with _no_tool_calls(policy):
                    [gen] = policy.generate_encoded([policy.encode(conv)], **greedy)
                right.append(_correct(gen.text, s))
                made.append(_forced_answer(policy, conv, gen.text, s))
            overview[f"K={k}"] = float(np.mean(right))
            forced[f"K={k}"] = float(np.mean(made))
    finally:
        env.close()
    return {**summarise(rows, overview, cfg), "overview_forced": forced}


def sample_tool_use(policy: HFPolicy, samples: Sequence[VideoQASample], env: EnvConfig, *,
                    temperature: float = 1.0, max_new_tokens: int = 160, seed: int = 0) -> dict[str, Any]:  # fmt: skip
    """Whole episodes at ``temperature`` (the RL sampling regime): κ (executed crops per episode), calls per
    calling turn, the share of turns that parse without a problem, the share of episodes that end in an
    answer, and accuracy. Tells whether the policy *writes* parallel calls the env can run."""
    from paravt.policies.agent import PolicyAgent
    from paravt_env.protocol import parse_response

    torch.manual_seed(seed)
    vt = VideoToolEnv(list(samples), replace(env, tool_result="frames", subagent=None))
    saved = policy.temperature, policy.max_new_tokens
    policy.temperature, policy.max_new_tokens = temperature, max_new_tokens
    kappa, calls, turns_ok, answered, correct = [], [], [], [], []
    try:
        for s in samples:
            obs, info = vt.reset(options={"sample": s})
            agent = PolicyAgent(policy)
            agent.reset(obs, info)
            done = False
            while not done:
                text = agent.act(obs, info)  # the feedback's messages are in the step's info
                parsed = parse_response(text)
                turns_ok.append(float(not parsed.problems))
                if parsed.valid_tool_calls:
                    calls.append(len(parsed.valid_tool_calls))
                obs, _, term, trunc, info = vt.step(text)
                done = term or trunc
            kappa.append(info["executed_tool_calls"])
            answered.append(float(bool(info["prediction"])))
            correct.append(_correct(agent.conversation[-1].text, s))
    finally:
        policy.temperature, policy.max_new_tokens = saved
        vt.close()
    return {"episodes": len(kappa), "temperature": temperature, "kappa": float(np.mean(kappa)),
            "calls_per_calling_turn": float(np.mean(calls)) if calls else 0.0,
            "calling_turns": len(calls), "well_formed_turns": float(np.mean(turns_ok)),
            "answered": float(np.mean(answered)), "accuracy": float(np.mean(correct))}  # fmt: skip


def summarise(rows: list[dict[str, Any]], overview: dict[str, float], cfg: ProbeConfig) -> dict[str, Any]:
    def mean(values) -> float:
        values = [v for v in values if not math.isnan(v)]
        return float(np.mean(values)) if values else float("nan")

    accuracy = {c: mean(r["correct"][c] for r in rows) for c in CONDITIONS}
    shifts = {
        c: {where: {k: mean(r[f"shift_{c}"][where][k] for r in rows) for k in ("tv", "mean_abs_logprob_change", "logprob_std")}
            for where in ("response", "answer")}
        for c in ("grey", "other")
    }  # fmt: skip
    gap = {**overview}
    budgets = [f"K={k}" for k in cfg.overview_budgets]
    if len(budgets) >= 2:
        gap["gap"] = overview[budgets[-1]] - overview[budgets[0]]
    gap["oracle_crops"] = accuracy["oracle"]
    return {
        "n": len(rows),
        "accuracy": accuracy,
        "follows_other": mean(r["follows_other"] for r in rows),
        "same_answer_grey": mean(float(r["texts"]["grey"] == r["texts"]["oracle"]) for r in rows),
        "distinct_oracle_responses": len({r["texts"]["oracle"] for r in rows}),
        "logit_shift": shifts,
        "tool_necessity": gap,
        "settings": {"window": cfg.window, "overview_budgets": list(cfg.overview_budgets),
                     "env": {k: v for k, v in asdict(cfg.env).items() if isinstance(v, (int, float, str, bool))}},
        "rows": rows,
    }  # fmt: skip


def to_markdown(summary: dict[str, Any]) -> str:
    acc, shift, tn = summary["accuracy"], summary["logit_shift"], summary["tool_necessity"]
    lines = [
        f"Perception probe on {summary['n']} samples (greedy; the final answer follows one oracle crop)",
        "",
        "| crop frames | accuracy | TV of next-token dist. (response / answer) | mean abs Δ log-prob (answer) |",
        "|---|---|---|---|",
        f"| oracle (right) | {acc['oracle']:.3f} | - | - |",
    ]
    for c, label in (("grey", "uniform grey"), ("other", "another video's")):
        s = shift[c]
        lines.append(f"| {label} | {acc[c]:.3f} | {s['response']['tv']:.4f} / {s['answer']['tv']:.4f} | "
                     f"{s['answer']['mean_abs_logprob_change']:.4f} (log-prob std {s['answer']['logprob_std']:.3f}) |")  # fmt: skip
    lines += [
        "",
        f"Answers that follow the other video under 'other': {summary['follows_other']:.3f}; "
        f"same response with grey frames as with the right ones: {summary['same_answer_grey']:.3f}; "
        f"distinct responses under 'oracle': {summary['distinct_oracle_responses']}.",
        "",
        "Tool Necessity Gap (answer from the overview alone, tool calls suppressed): "
        + ", ".join(f"{k} {v:.3f}" for k, v in tn.items() if k.startswith("K="))
        + (f"; gap {tn['gap']:+.3f}" if "gap" in tn else "")
        + f"; with the oracle crop {tn['oracle_crops']:.3f}.",
    ]
    if summary.get("overview_forced"):
        lines += ["", "Answer forced after the policy's own think block, from the overview alone: "
                  + ", ".join(f"{k} {v:.3f}" for k, v in summary["overview_forced"].items()) + "."]  # fmt: skip
    if "sampling" in summary:
        t = summary["sampling"]
        lines += ["", f"Sampled episodes (temperature {t['temperature']:g}, {t['episodes']} episodes): κ {t['kappa']:.2f} "
                  f"crops per episode, {t['calls_per_calling_turn']:.2f} calls per calling turn ({t['calling_turns']} "
                  f"calling turns), well-formed turns {t['well_formed_turns']:.3f}, episodes ending in an answer "
                  f"{t['answered']:.3f}, accuracy {t['accuracy']:.3f}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def _bar(total: int, enabled: bool):
    from paravt.learners.coldstart.sft import progress_bar

    return progress_bar(total, "probe", enabled)


def comparison_table(summaries: dict[str, dict[str, Any]]) -> str:
    """Checkpoints side by side (``{label: paravt probe perception --json summary}``): accuracy with the right,
    grey and another video's crop frames (and how often the answer follows the other video), the total variation
    of the answer's next-token distribution under grey / other frames, the overview-only accuracy at the smallest
    and largest budget, and the sampled episodes' κ, calls per calling turn and well-formed turns."""
    head = ("| checkpoint | right crops | grey | other video's (follows it) | TV at answer, grey / other "
            "| overview alone, per K | sampled episodes: κ, calls per calling turn, well-formed turns |")  # fmt: skip
    lines = [head, "|---|---|---|---|---|---|---|"]
    for label, s in summaries.items():
        acc, shift, tn = s["accuracy"], s["logit_shift"], s["tool_necessity"]
        overview = " / ".join(f"{k} {v:.2f}" for k, v in tn.items() if k.startswith("K="))
        t = s.get("sampling")
        sampled = "-" if t is None else f"{t['kappa']:.2f}, {t['calls_per_calling_turn']:.2f}, {t['well_formed_turns']:.2f}"
        lines.append(f"| {label} | {acc['oracle']:.2f} | {acc['grey']:.2f} | {acc['other']:.2f} ({s['follows_other']:.2f}) "
                     f"| {shift['grey']['answer']['tv']:.2f} / {shift['other']['answer']['tv']:.2f} | {overview} | {sampled} |")  # fmt: skip
    return "\n".join(lines) + "\n"
