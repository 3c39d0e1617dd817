"""SFT cold start: supervised fine-tuning on tool-use trajectories, and a generator of oracle trajectories.

The paper cold-starts PARA-GRPO from a model fine-tuned on successful parallel tool-use trajectories. The
tiny stand-in: on synthetic videos the sample records where its events are, so an oracle writes the ideal
episode — think, crop every event window in one parallel turn, then think and answer — and the env really
executes it (real crops, real frames). The episode is tokenised exactly like a policy rollout
(``learners.rollout``), and the loss is next-token cross-entropy on the assistant's tokens only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from paravt_env.data import VideoQASample
from paravt_env.protocol import format_tool_call

from .grpo import masked_mean
from .policies.agent import observation_message
from .policies.base import Generation, Message
from .policies.hf import HFPolicy
from .rollout import Trajectory, _Builder


def oracle_turns(sample: VideoQASample, max_parallel: int = 5) -> list[str]:
    """The ideal episode's turns: all event windows cropped at once, then the answer."""
    events = sorted(sample.events, key=lambda e: e.start)[:max_parallel]
    if not events:
        return [f"<think>The overview is enough to answer.</think>\n<answer>{sample.answer}</answer>"]
    windows = [(max(0.0, e.start - 1.0), e.end + 1.0) for e in events]
    where = ", ".join(f"{a:.1f}-{b:.1f} s" for a, b in windows)
    first = (f"<think>The overview may miss short events. I will inspect {len(windows)} windows in parallel: "
             f"{where}.</think>\n" + "\n".join(format_tool_call(a, b) for a, b in windows))  # fmt: skip
    labels = ", ".join(e.label for e in events)
    second = f"<think>The crops show {labels}.</think>\n<answer>{sample.answer}</answer>"
    return [first, second]


def run_scripted_episode(
    env, policy: HFPolicy, turns: Sequence[str] | Callable[[int, dict], str], options: dict[str, Any] | None = None
) -> Trajectory:
    """Play ``turns`` (texts, or a function of (turn index, observation)) through ``env`` and record the
    episode in token space with ``policy``'s tokenizer and chat template (behaviour log-probs are 0)."""
    obs, info = env.reset(options=options)
    history = [Message("system", info["system_prompt"]), observation_message("user", obs, info["user_prompt"])]
    builder = _Builder(policy, policy.encode(history), history)
    eos = policy.end_of_turn_id
    done, turn, calls = False, 0, 0
    reward, breakdown, trunc = 0.0, {}, False
    while not done:
        text = turns(turn, obs) if callable(turns) else turns[min(turn, len(turns) - 1)]
        body = text
        prefix = "<think>\n" if policy.think_prefix else ""
        if prefix and body.startswith("<think>"):
            body = body[len("<think>") :].lstrip("\n")  # the prefix is part of the prompt encoding already
        ids = policy.tokenizer.encode(body, add_special_tokens=False) + [eos]
        builder.add_turn(Generation(text=prefix + body, token_ids=ids, logprobs=[0.0] * len(ids)))
        obs, reward, term, trunc, info = env.step(prefix + body)
        calls += info["tool_calls"]["executed"]
        turn += 1
        done = term or trunc
        if done:
            breakdown = info["reward_breakdown"]
        else:
            builder.add_feedback(observation_message("user", obs))
    return Trajectory(
        input_ids=list(builder.encoded.input_ids), loss_mask=builder.loss_mask, logprobs=builder.logprobs,
        struct_mask=builder.struct, encoded=builder.encoded, reward=float(reward), breakdown=dict(breakdown),
        frame_budget=int(info["frame_budget"]), turns=turn, tool_calls=calls, turn_texts=builder.texts,
        truncated=bool(trunc),
    )  # fmt: skip


def sft_loss(policy: HFPolicy, trajectory: Trajectory, model: Any = None) -> torch.Tensor:
    """Mean negative log-likelihood of the assistant's tokens (temperature 1)."""
    logp = policy.sequence_logprobs(trajectory.encoded, model=model, temperature=1.0)
    mask = torch.tensor(trajectory.loss_mask[1:], dtype=torch.float32, device=logp.device)
    return -masked_mean(logp, mask)
