"""Model policies in the env: ``PolicyAgent`` plays the main agent (``reset`` / ``act`` like the scripted
baselines), ``PolicySubAgent`` answers the env's sub-agent requests with the same weights, batched."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from paravt.policies.base import Conversation, Policy
from paravt.policies.chat import strip_reasoning
from paravt_env.messages import Message, observation_messages
from paravt_env.protocol.release import MAX_TOOL_RESPONSE_TOKENS
from paravt_env.tools import SUBAGENT_SYSTEM_PROMPT, SubAgentRequest


def cut_summary(text: str, tokenizer: Any) -> str:
    """The release cuts a sub-agent's reply at 512 tokens of the policy's tokenizer and marks the cut."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) <= MAX_TOOL_RESPONSE_TOKENS:
        return text
    return tokenizer.decode(ids[:MAX_TOOL_RESPONSE_TOKENS], skip_special_tokens=True) + " [truncated]"


class PolicyAgent:
    """Keeps the conversation of one episode and asks the policy for each turn: the env's messages as it lists
    them (``info["messages"]``), and ``info["max_new_tokens"]`` caps the next generation (the release's forced
    final answer)."""

    name = "policy"
    reads_info = True  # play_episode passes each step's info to act()

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.conversation: Conversation = []
        self.generations: list = []

    def reset(self, obs: dict[str, Any], info: dict[str, Any], sample: Any = None) -> None:
        self.end()
        self.conversation = observation_messages(obs, info)
        self.generations = []
        self._first = True
        self._session = object()  # this episode's key to the policy's cache (a policy that keeps one)

    def end(self) -> None:
        """The episode is over: a policy that keeps the conversation's cache may drop it."""
        session = getattr(self, "_session", None)
        if session is not None and hasattr(self.policy, "end_sessions"):
            self.policy.end_sessions([session])
        self._session = None

    def act(self, obs: dict[str, Any], info: dict[str, Any] | None = None) -> str:
        info = info or {}
        if not self._first:  # the env's feedback (tool responses and their frames) comes back as user turns
            self.conversation += observation_messages(obs, info)
        self._first = False
        cap = info.get("max_new_tokens")
        kwargs: dict[str, Any] = {"max_new_tokens": int(cap)} if cap else {}
        if hasattr(self.policy, "end_sessions"):  # each turn extends the cache of the turns before
            kwargs["sessions"] = [self._session]
        [gen] = self.policy.generate([self.conversation], **kwargs)
        self.generations.append(gen)
        self.conversation.append(Message("assistant", gen.text))
        return gen.text


class PolicySubAgent:
    """The env's sub-agent: each crop's frames and the main question go to the policy, all crops of a turn
    in one batch; the reply (its reasoning removed) is the summary the main agent reads."""

    def __init__(self, policy: Policy, recorder: Callable[[Any, Any, Any], Any] | None = None) -> None:
        """``recorder(policy, prompt, generation)``, where given, turns each summary the policy writes into
        whatever its caller keeps (the trainer passes ``paravt.learners.trajectory.single_turn_trajectory``, so
        the weight-sharing sub-agent's turns are trained on); it needs a policy that encodes in token space
        (``HFPolicy``). The policies know nothing of the learners: the recording is handed in."""
        self.policy = policy
        self.recorder = recorder
        self.trajectories: list = []  # one recorded item per summary, with a recorder

    def _conversation(self, request: SubAgentRequest) -> Conversation:
        frames = [f for f in request.frames.images]
        if request.release_style:  # the release's sub-agent: no system prompt
            return [Message("user", request.user_text(), frames, as_parts=True)]
        return [Message("system", SUBAGENT_SYSTEM_PROMPT), Message("user", request.prompt(), frames)]

    def _summary(self, request: SubAgentRequest, text: str) -> str:
        if not request.release_style:
            return strip_reasoning(text)
        # The release keeps the whole reply, cut at 512 tokens (a policy without a tokenizer: as it came).
        tokenizer = getattr(self.policy, "tokenizer", None)
        return text if tokenizer is None else cut_summary(text, tokenizer)

    def batch(self, requests: Sequence[SubAgentRequest]) -> list[str]:
        # The sub-agent is never given PARA-GRPO's forced "<think>\n" (neither the release's workflow nor the
        # OpenRLHF executor prefixes it): the prefix is the main agent's exploration anchor, not the summariser's.
        conversations = [self._conversation(r) for r in requests]
        if self.recorder is not None and hasattr(self.policy, "generate_encoded"):
            prompts = [self.policy.encode(c, think_prefix=False) for c in conversations]
            gens = self.policy.generate_encoded(prompts, think_prefix=False)
            self.trajectories += [self.recorder(self.policy, p, g) for p, g in zip(prompts, gens, strict=True)]
        elif hasattr(self.policy, "think_prefix"):
            gens = self.policy.generate(conversations, think_prefix=False)
        else:
            gens = self.policy.generate(conversations)
        return [self._summary(r, g.text) for r, g in zip(requests, gens, strict=True)]

    def __call__(self, request: SubAgentRequest) -> str:
        return self.batch([request])[0]
