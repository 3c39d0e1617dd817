"""ParaVT episodes as a TRL ``environment_factory`` environment (TRL >= 1.15, ``GRPOTrainer``).

TRL plays the conversation: it renders the prompt with the tool schema, generates, parses the Hermes
``<tool_call>`` blocks, calls the environment's public methods as tools and appends what they return (text
and images) as ``tool`` messages. This class maps that onto ``VideoToolEnv`` (or ``RemoteVideoToolEnv``):

- ``reset(**row)``: the env's reset for the dataset row (``index`` or ``sample_id``, ``epoch``, ``seed``,
  ``frame_budget``); returns the user's messages (``paravt_env.messages``: the question with the K overview
  frames, each after its time tag) as content blocks (text, image, ...);
- ``crop_video(start_time, end_time)``: async. TRL gathers the calls of one turn concurrently; the first
  call waits one loop iteration so that every call of the turn has arrived, then the whole turn goes to the
  env as ONE step (parallel dispatch, the env's ``max_parallel`` and validation); each call gets its own
  ``<tool_response>`` block of the env's feedback, with its frames as images (``tool_results``: the blocks
  concatenated are the env's feedback message exactly, which the adapter's chat template renders as the local
  trainer does, ``paravt.learners.adapters.trl.template``);
- ``paravt_reward`` (a TRL reward function): the env's reward of the episode as the policy wrote it. The
  turns are cut from the completion's token ids (what the policy generated, tool responses removed), and the
  episode is replayed through the env from the same reset: the reward is ``VideoToolEnv``'s own, over the
  exact generated text; the replay also checks that its frames match what the policy was shown.

Imports nothing of TRL: the class is plain Python that TRL inspects.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from paravt.learners.adapters.trl.template import ROLE_KEY
from paravt_env.messages import Message, observation_messages

logger = logging.getLogger(__name__)

RESET_KEYS = ("index", "sample_id", "epoch", "frame_budget")
_RESPONSE_START = re.compile(r"(?=<tool_response>)")


def content_blocks(text: str, frames: Sequence[np.ndarray] | np.ndarray) -> list[dict[str, Any]]:
    """An observation's text with its ``<image>`` placeholders replaced by image blocks (PIL), in order."""
    from PIL import Image

    parts = text.split("<image>")
    if len(parts) - 1 != len(frames):
        raise ValueError(f"the observation has {len(parts) - 1} <image> placeholders but {len(frames)} frames")
    blocks: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        if part:
            blocks.append({"type": "text", "text": part})
        if i < len(frames):
            blocks.append({"type": "image", "image": Image.fromarray(frames[i])})
    return blocks


def assistant_turns(text: str) -> list[str]:
    """The assistant turns of a decoded TRL completion (ChatML): the text before the first ``<|im_end|>``, then
    whatever follows each ``<|im_start|>assistant\\n`` up to its ``<|im_end|>`` (tool responses in between
    are the env's, not the policy's). A turn cut by the length limit is kept as it stands."""
    pieces = text.split("<|im_start|>assistant\n")
    return [p.split("<|im_end|>", 1)[0] for p in pieces]


def call_text(start_time: Any, end_time: Any) -> str:
    return "<tool_call>" + json.dumps({"name": "crop_video", "arguments": {"start_time": start_time, "end_time": end_time}}) + "</tool_call>"


class ParaVTEnvironment:
    """One rollout's episode for TRL's ``GRPOTrainer(environment_factory=...)``. TRL offers every public
    method but ``reset`` / ``get_reward`` to the model as a tool: ``crop_video`` is the only one.

    Args:
        env: a ``VideoToolEnv`` or a ``RemoteVideoToolEnv`` (``tool_result="frames"``).
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self._reset_args: dict[str, Any] = {}
        self._pending: list[tuple[Any, Any]] = []
        self._turn: asyncio.Future | None = None
        self.shown: list[np.ndarray] = []  # frames the policy was shown, in order (checked by the replay)
        self.last_info: dict[str, Any] = {}
        self.done = False

    def reset(self, **row: Any) -> list[dict[str, Any]]:
        """Start the episode of a dataset row; returns the user's content (question and overview frames)."""
        options = {k: row[k] for k in RESET_KEYS if row.get(k) is not None}
        self._reset_args = {"seed": row.get("seed"), "options": options}
        obs, info = self._reset()
        self.shown = [obs["frames"]]
        self._pending, self._turn, self.done = [], None, False
        self.last_info = info
        messages = observation_messages(obs, info)
        # TRL renders the row's prompt with this content appended to its last (user) message: the row must hold
        # the env's system prompt and an empty user message, or the policy reads another prompt than the local
        # trainer's (paravt.learners.adapters.trl.recipe.dataset_rows writes such rows).
        check_row_prompt(row.get("prompt"), messages)
        return [b for m in messages if m.role != "system" for b in content_blocks(m.text, m.images)]

    def _reset(self) -> tuple[dict, dict]:
        options = dict(self._reset_args["options"])
        if "sample_id" in options and not hasattr(self.env.unwrapped, "url"):  # in process: by index
            ids = [s.id for s in self.env.unwrapped.samples]
            options["index"] = ids.index(str(options.pop("sample_id")))
        return self.env.reset(seed=self._reset_args["seed"], options=options)

    async def crop_video(self, start_time: float, end_time: float) -> list[dict[str, Any]]:
        """Crop a time window of the video to look at it closely; call it several times in one turn to look
        at several windows at once.

        Args:
            start_time: Start of the window, in seconds from the beginning of the video.
            end_time: End of the window, in seconds.

        Returns:
            The frames of the window, each after its time in seconds.
        """
        index = len(self._pending)
        self._pending.append((start_time, end_time))
        if index == 0:  # the first call of the turn runs it, once every call has been scheduled
            self._turn = asyncio.get_running_loop().create_future()
            await asyncio.sleep(0)
            calls, self._pending = self._pending, []
            turn = self._turn
            try:
                turn.set_result(await asyncio.to_thread(self._step_turn, calls))
            except Exception as exc:  # every call of the turn reports it
                turn.set_exception(exc)
        results = await self._turn
        return results[index]

    def _step_turn(self, calls: list[tuple[Any, Any]]) -> list[list[dict[str, Any]]]:
        if self.done:
            raise RuntimeError("the episode has ended (the env's last turn allows no more crops)")
        obs, _, terminated, truncated, info = self.env.step("".join(call_text(a, b) for a, b in calls))
        self.done = terminated or truncated
        self.last_info = info
        self.shown.append(obs["frames"])
        return tool_results(observation_messages(obs, info), len(calls))

    def _replay(self, turns: list[str]) -> dict[str, Any]:
        """Replay the episode with the policy's own turns from the same reset; the env's final ``info``
        (``reward_breakdown``, ``prediction``...) plus ``reward`` and ``frames_match`` (the replay showed the
        frames the rollout showed)."""
        obs, _ = self._reset()
        replayed = [obs["frames"]]
        reward, info, crops = 0.0, {}, 0
        for text in turns or [""]:
            obs, reward, terminated, truncated, info = self.env.step(text)
            crops += int(info.get("tool_calls", {}).get("executed", 0))
            if terminated or truncated:
                break
            replayed.append(obs["frames"])
        else:  # the completion stopped mid-episode (length limit): the episode ends with what was written
            obs, reward, terminated, truncated, info = self.env.step("")
        # a rolled-back rollout replays fewer turns than it showed: what it kept must match
        match = all(np.array_equal(a, b) for a, b in zip(self.shown, replayed, strict=False)) and (
            len(replayed) >= len(self.shown) or rolled_back(self, turns) > 0)
        return {**info, "reward": float(reward), "frames_match": match, "crops": crops}


def check_row_prompt(prompt: Any, messages: Sequence[Message]) -> None:
    """Refuse a dataset row whose prompt is not the env's system prompt followed by an empty user message."""
    if prompt is None:
        return  # not a TRL row (a direct reset)
    system = [m.text for m in messages if m.role == "system"]
    want = [{"role": "system", "content": system[0]}] if system else []
    got = [{"role": m.get("role"), "content": m.get("content")} for m in prompt]
    if got[:-1] != want or not got or got[-1] != {"role": "user", "content": ""}:
        raise ValueError("the dataset row's prompt is not this env's: TRL renders the row's messages, then the reset's "
                         "user content, so the row must hold exactly the env's system prompt and an empty user "
                         "message (paravt.learners.adapters.trl.dataset_rows with the env's prompt_mode); the row's "
                         f"roles are {[m['role'] for m in got]}, the env's system prompt starts "
                         f"{(system or [''])[0][:60]!r}")  # fmt: skip


def tool_results(messages: Sequence[Message], n_calls: int) -> list[list[dict[str, Any]]]:
    """The env's feedback messages of a turn as one content list per call, such that the lists, concatenated in
    call order, hold the messages' text and frames exactly: every message is cut before each
    ``<tool_response>`` (call i gets the i-th piece, the last call every piece left, a call past the pieces an
    empty text) and the first block of each message carries its role (``ROLE_KEY``), from which the adapter's
    chat template rebuilds the messages as the local trainer renders them."""
    pieces: list[list[dict[str, Any]]] = []
    for message in messages:
        texts = [t for t in _RESPONSE_START.split(message.text) if t]
        if len(texts) > 1 and not texts[0].startswith("<tool_response>"):  # notes before the first response
            texts[:2] = [texts[0] + texts[1]]
        used = 0
        for i, text in enumerate(texts or [""]):
            k = text.count("<image>")
            blocks = content_blocks(text, message.images[used : used + k]) or [{"type": "text", "text": ""}]
            used += k
            if i == 0:
                blocks[0] = {**blocks[0], ROLE_KEY: message.role}
            pieces.append(blocks)
    out = [pieces[i] if i < len(pieces) else [{"type": "text", "text": ""}] for i in range(n_calls)]
    for rest in pieces[n_calls:]:
        out[-1] = out[-1] + rest
    return out


def rolled_back(env: ParaVTEnvironment, turns: list[str]) -> int:
    """Tool responses the env gave but the completion does not hold: TRL deletes a turn's tool responses (and
    their images) when they would push the completion past ``max_completion_length``, and ends the rollout
    after the calling turn. Every turn of the completion but its last was answered by a tool response."""
    return max(0, (len(env.shown) - 1) - (len(turns) - 1))


def paravt_reward(completion_ids: list[list[int]], environments: list[ParaVTEnvironment], trainer_state: Any = None,
                  *, tokenizer: Any, log_metric: Any = None, **_: Any) -> list[float]:  # fmt: skip
    """TRL reward function: each rollout's env reward over its generated turns (bind ``tokenizer`` with
    ``functools.partial`` or use ``make_reward``); the env's ``response_prefix`` (PARA-GRPO's forced
    ``<think>\n``, which the chat template's generation prompt writes) opens every turn, as in the local trainer.

    Logged through TRL's ``log_metric`` (means over the batch):
    ``paravt/rolled_back_tool_responses``: tool responses TRL rolled back at ``max_completion_length`` (the
    crops' frames never reached the model; the episode is scored as it ended, unanswered), also warned about;
    ``paravt/replay_mismatch``: replays that showed other frames than the rollout did (TRL's tool-call parser and
    the env's disagreed on a malformed turn), scored as the env scores the text: feedback, not a crash;
    ``paravt/crops_per_episode``: crops the env ran for the calls the policy wrote (the local trainer's
    ``tool_calls`` of a trajectory), to compare a checkpoint's tool use across engines."""
    rewards, mismatched, dropped, crops = [], 0, 0, 0
    for ids, env in zip(completion_ids, environments, strict=True):
        text = tokenizer.decode(ids, skip_special_tokens=False)
        prefix = env.env.unwrapped.config.response_prefix
        turns = [t if not prefix or t.startswith(prefix) else prefix + t for t in assistant_turns(text)]
        lost = rolled_back(env, turns)
        out = env._replay(turns)
        dropped += lost
        mismatched += not out["frames_match"] and not lost
        crops += out["crops"]
        rewards.append(out["reward"])
    if dropped:
        logger.warning("TRL rolled back %d tool responses in a batch of %d completions: they would have passed "
                       "max_completion_length, and their crop frames never reached the model; raise "
                       "max_completion_length (paravt.learners.adapters.trl.completion_budget)", dropped, len(rewards))  # fmt: skip
    if mismatched:
        logger.warning("%d of %d replays showed other frames than their rollout (tool-call parsers disagreed)",
                       mismatched, len(rewards))  # fmt: skip
    if log_metric is not None:
        log_metric("paravt/replay_mismatch", mismatched / max(1, len(rewards)))
        log_metric("paravt/rolled_back_tool_responses", dropped / max(1, len(rewards)))
        log_metric("paravt/crops_per_episode", crops / max(1, len(rewards)))
    return rewards


def make_reward(tokenizer: Any):
    """``paravt_reward`` bound to ``tokenizer``, named for TRL's logs."""

    def paravt(completion_ids, environments, **kwargs):
        return paravt_reward(completion_ids, environments, tokenizer=tokenizer, **kwargs)

    return paravt
