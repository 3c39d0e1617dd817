"""Rollouts: play the env with a model policy and keep the episode in token space for the learners.

A ``Trajectory`` is one episode as the model saw it: the exact token sequence (prompt, every generated turn,
every tool response), a ``loss_mask`` that is 1 only on tokens the policy generated, their behaviour
log-probabilities, a ``struct_mask`` on the structural tags (``<think>``, ``</think>``, ``<tool_call>``,
``</tool_call>``, ``<answer>``, ``</answer>``) for Exploration Anchoring, the images in order, the frame
budget K and the reward breakdown. Turns are appended to the sequence as generated ids, never re-tokenised,
so the learner scores exactly what was sampled.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from paravt.learners.policies.agent import PolicySubAgent, listed_messages, observation_message
from paravt.learners.policies.base import Message
from paravt.learners.policies.encoded import Encoded
from paravt.learners.policies.hf import HFPolicy
from paravt_env.protocol import STRUCTURAL_TAGS
from paravt_env.records import episode_record, prompt_sha, turn_entry


@dataclass
class Trajectory:
    """One episode in token space, and how it was scored."""

    input_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    struct_mask: list[int]
    encoded: Encoded = field(repr=False)
    reward: float = 0.0
    breakdown: dict[str, float] = field(default_factory=dict)
    frame_budget: int = 0
    turns: int = 0
    tool_calls: int = 0
    sample_id: str = ""
    epoch: int = 0
    turn_texts: list[str] = field(default_factory=list)
    truncated: bool = False
    record: dict[str, Any] | None = field(default=None, repr=False)
    """What the episode did, as an episode record (``paravt_env.records``, schema ``paravt-episode/1``)."""
    subagent_trajectories: list[Trajectory] = field(default_factory=list, repr=False)
    """The sub-agent's generations of this episode ("subagent" mode), one single-turn trajectory each,
    kept apart: the release trains only the main agent (``rollout.include_subagents`` opts in)."""

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def n_generated(self) -> int:
        return sum(self.loss_mask)


class _Builder:
    """Accumulates one episode's tokens as the turns happen."""

    def __init__(self, policy: HFPolicy, prompt: Encoded, history: list[Message]) -> None:
        self.policy = policy
        self.encoded = prompt
        self.history = history
        self.loss_mask = [0] * len(prompt.input_ids)
        self.logprobs = [0.0] * len(prompt.input_ids)
        self.struct = [0] * len(prompt.input_ids)
        self.texts: list[str] = []
        self._tag_ids = [policy.tokenizer.encode(t, add_special_tokens=False) for t in STRUCTURAL_TAGS]

    def add_turn(self, gen) -> None:
        ids = list(gen.token_ids)
        self.encoded = self.encoded.with_ids(ids)
        self.loss_mask += [1] * len(ids)
        self.logprobs += list(gen.logprobs)
        self.struct += struct_positions(ids, self._tag_ids)
        # The chat template closes an assistant turn with "<|im_end|>\n": a turn that stopped on <|im_end|> gets
        # the "\n", one cut at max_new_tokens (or stopped on another end token) the whole closing, not trained.
        closing = self.policy.end_of_turn()
        if gen.finish_reason != "length" and ids and ids[-1] == closing[0]:
            closing = closing[1:]
        if closing:
            self.encoded = self.encoded.with_ids(closing)
            self._pad(len(closing))
        self.history.append(Message("assistant", gen.text))
        self.texts.append(gen.text)

    def add_feedback(self, messages: Sequence[Message]) -> Encoded:
        """The env's reply, one or several messages (the release protocol: one per crop), as one continuation:
        the assistant is prompted once, after the last of them."""
        delta = self.policy.encode_continuation(self.history, messages)
        self.history.extend(messages)
        self.encoded = self.encoded + delta
        self._pad(len(delta.input_ids))
        return self.encoded

    def _pad(self, n: int) -> None:
        self.loss_mask += [0] * n
        self.logprobs += [0.0] * n
        self.struct += [0] * n


def struct_positions(ids: Sequence[int], tag_ids: Sequence[Sequence[int]]) -> list[int]:
    """1 at every token of every occurrence of a structural tag's token pattern in ``ids``."""
    mask = [0] * len(ids)
    for pattern in tag_ids:
        n = len(pattern)
        if n == 0:
            continue
        for i in range(len(ids) - n + 1):
            if ids[i] == pattern[0] and list(ids[i : i + n]) == list(pattern):
                mask[i : i + n] = [1] * n
    return mask


def single_turn_trajectory(policy: HFPolicy, prompt: Encoded, gen) -> Trajectory:
    """A one-turn trajectory (a sub-agent call): the prompt, then the generated ids."""
    n = len(prompt.input_ids)
    tag_ids = [policy.tokenizer.encode(t, add_special_tokens=False) for t in STRUCTURAL_TAGS]
    return Trajectory(
        input_ids=prompt.input_ids + list(gen.token_ids),
        loss_mask=[0] * n + [1] * len(gen.token_ids),
        logprobs=[0.0] * n + list(gen.logprobs),
        struct_mask=[0] * n + struct_positions(gen.token_ids, tag_ids),
        encoded=prompt.with_ids(gen.token_ids),
        turns=1,
        turn_texts=[gen.text],
    )


def run_episode(
    env, policy: HFPolicy, subagent: Any = None, seed: int | None = None, options: dict[str, Any] | None = None
) -> Trajectory:
    """Play one episode of ``env`` with ``policy``. In "subagent" mode the sub-agent is ``subagent`` if given,
    else the policy itself (weight sharing, as in ParaVT), whose generations are kept in
    ``Trajectory.subagent_trajectories``."""
    return run_group([env], policy, subagent=subagent, seed=seed, options=options)[0]


def run_group(
    envs: Sequence[Any], policy: HFPolicy, subagent: Any = None, seed: int | None = None, options: dict[str, Any] | None = None
) -> list[Trajectory]:
    """Play one episode in each env with batched generation, every env with the same ``options`` (a GRPO group:
    the same prompt with the same K)."""
    return run_batch(envs, policy, [options] * len(envs), subagent=subagent, seed=seed)


def run_batch(
    envs: Sequence[Any], policy: HFPolicy, options: Sequence[dict[str, Any] | None], *, subagent: Any = None,
    seed: int | None = None,
) -> list[Trajectory]:
    """Play one episode in each env (``options[i]`` resets env i): every turn, all unfinished episodes of every
    prompt generate in one batch, so an RL step with P prompts x G rollouts costs one generation per turn
    instead of P. The trajectories come back in env order."""
    if len(options) != len(envs):
        raise ValueError(f"run_batch: {len(envs)} envs but {len(options)} options")
    builders: list[_Builder] = []
    infos = []
    starts = []  # per env: start time, overview timestamps, system prompt hash (the episode records)
    steps: list[list[dict[str, Any]]] = [[] for _ in envs]
    recorders: list[PolicySubAgent | None] = []
    for env, opts in zip(envs, options, strict=True):
        base = env.unwrapped
        recorder = None
        if base.config.tool_result == "subagent":
            if subagent is None:  # weight sharing: the policy itself, recorded per episode
                recorder = PolicySubAgent(policy, record=True)
            base.config.subagent = subagent if subagent is not None else recorder
        recorders.append(recorder)
        obs, info = env.reset(seed=seed, options=opts)
        if "messages" in info:  # the release protocol lists its messages
            history = listed_messages(info["messages"], obs)
        else:
            history = [Message("system", info["system_prompt"]), observation_message("user", obs, info["user_prompt"])]
        builders.append(_Builder(policy, policy.encode(history), history))
        infos.append(info)
        starts.append((time.perf_counter(), [round(float(t), 3) for t in obs["timestamps"]], prompt_sha(info)))
    done = [False] * len(envs)
    results: list[dict[str, Any]] = [{} for _ in envs]
    counts = [[0, 0] for _ in envs]  # turns, executed tool calls
    while not all(done):
        live = [i for i in range(len(envs)) if not done[i]]
        gens = policy.generate_encoded([builders[i].encoded for i in live])
        for i, gen in zip(live, gens, strict=True):
            builders[i].add_turn(gen)
            obs, reward, term, trunc, info = envs[i].step(gen.text)
            steps[i].append(turn_entry(gen.text, info, obs["timestamps"], tokens=len(gen.token_ids)))
            counts[i][0] += 1
            counts[i][1] += info["tool_calls"]["executed"]
            if term or trunc:
                done[i] = True
                results[i] = {"reward": reward, "breakdown": info["reward_breakdown"], "truncated": trunc,
                              "prediction": info.get("prediction", ""), "wall_s": time.perf_counter() - starts[i][0]}
            elif "messages" in info:
                builders[i].add_feedback(listed_messages(info["messages"], obs))
            else:
                builders[i].add_feedback([observation_message("user", obs)])
    trajectories = []
    for k, (b, info, res, (turns, calls), rec) in enumerate(zip(builders, infos, results, counts, recorders, strict=True)):
        accuracy = float(res["breakdown"].get("accuracy", 0.0))
        record = episode_record(
            envs[k].unwrapped.sample, duration=info.get("duration"), frame_budget=int(info["frame_budget"]),
            overview=starts[k][1], turns=steps[k], reward=res["breakdown"], prediction=res["prediction"],
            score=accuracy, correct=accuracy >= 0.5, wall_s=res["wall_s"], system_prompt_sha=starts[k][2],
            epoch=int(info.get("epoch", 0)),
        )  # fmt: skip
        trajectories.append(
            Trajectory(
                input_ids=list(b.encoded.input_ids),
                loss_mask=b.loss_mask,
                logprobs=b.logprobs,
                struct_mask=b.struct,
                encoded=b.encoded,
                reward=float(res["reward"]),
                breakdown=dict(res["breakdown"]),
                frame_budget=int(info["frame_budget"]),
                turns=turns,
                tool_calls=calls,
                sample_id=info["sample_id"],
                epoch=int(info.get("epoch", 0)),
                turn_texts=b.texts,
                truncated=bool(res["truncated"]),
                record=record,
                subagent_trajectories=list(rec.trajectories) if rec is not None else [],
            )
        )
    return trajectories
