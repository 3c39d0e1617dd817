"""ParaVT episodes as a verl agent loop (``verl.experimental.agent_loop``, tested against verl==0.9.1).

verl's rollout workers call ``AgentLoopBase.run(sampling_params, **row)`` once per trajectory and train on
what it returns (``AgentLoopOutput``: prompt ids, response ids with a mask that is 1 only on generated
tokens, rollout log-probs, the images, a reward). ``ParaVTAgentLoop`` plays one env episode there:

1. reset the env for the row (``extra_info``: ``index`` or ``sample_id``, ``epoch``, ``seed``,
   ``frame_budget``); the system prompt and the question with its K overview frames become the prompt,
   built by verl's own Continuous Token builder (the processor renders the image placeholders);
2. generate a turn on verl's LLM server (``server_manager.generate``, token ids in and out), decode it and
   give the whole turn to ``env.step``: the turn's crops run in parallel in the env;
3. append the env's feedback (its ``<tool_response>`` blocks with the crop frames) as a user message, its
   tokens masked 0, and go on until the env ends the episode (answer, no call, last turn) or the response
   budget (``rollout.response_length``) is spent;
4. return the trajectory with ``reward_score`` = the env's reward and the breakdown in ``extra_fields``.

The env is a ``VideoToolEnv`` (``data``: a samples file in reach of every rollout worker) or, the usual case
with verl's Ray workers on many nodes, a ``RemoteVideoToolEnv`` of one ``paravt serve-env`` (``env_url``).
Registered as ``paravt``; in verl's agent-loop config file::

    - name: paravt
      _target_: paravt.learners.adapters.verl.agent_loop.ParaVTAgentLoop
      env_url: http://env-host:8100
      env_options: {frame_budget: 16, nframes_gating: true, max_turns: 3}
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from uuid import uuid4

from paravt_env.messages import observation_messages
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

RESET_KEYS = ("index", "sample_id", "epoch", "frame_budget")


def make_env(env_url: str | None, data: str | None, options: dict[str, Any]) -> Any:
    """A ``RemoteVideoToolEnv`` of ``env_url``, else a ``VideoToolEnv`` of ``data``."""
    if (env_url is None) == (data is None):
        raise ValueError("ParaVTAgentLoop needs exactly one of env_url (a paravt serve-env) or data (a samples file)")
    if env_url is not None:
        from paravt_env.remote import RemoteVideoToolEnv

        return RemoteVideoToolEnv(env_url, **options)
    from paravt_env import VideoToolEnv

    return VideoToolEnv(data, **options)


def chat_messages(obs: dict[str, Any], info: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """The env's messages (``paravt_env.messages``) as chat messages (text and image parts in order) and
    their images (PIL), in order."""
    from paravt.learners.adapters.trl.environment import content_blocks  # the conversion the TRL adapter uses

    messages = [{"role": m.role, "content": content_blocks(m.text, m.images) if m.images or m.as_parts else m.text}
                for m in observation_messages(obs, info)]  # fmt: skip
    return messages, [b["image"] for m in messages if isinstance(m["content"], list) for b in m["content"] if b["type"] == "image"]


@register("paravt")
class ParaVTAgentLoop(AgentLoopBase):
    """One ParaVT episode per trajectory (see the module docstring).

    Args (besides verl's):
        env_url: a ``paravt serve-env`` URL, or
        data: a samples file / directory every worker can read.
        env_options: the env's options (``EnvConfig`` fields), e.g. ``frame_budget``, ``nframes_gating``.
    """

    def __init__(self, *args: Any, env_url: str | None = None, data: str | None = None,
                 env_options: dict[str, Any] | None = None, tools: Any = None, **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.env_url, self.data = env_url, data
        self.env_options = dict(env_options or {})
        self.prompt_length = self.rollout_config.prompt_length
        self.response_length = self.rollout_config.response_length

    async def _env_call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)  # env calls decode video: off the event loop

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra = dict(kwargs.get("extra_info") or {})
        options = {k: extra[k] for k in RESET_KEYS if extra.get(k) is not None}
        metrics = {"generate_sequences": 0.0, "tool_calls": 0.0}
        env = await self._env_call(make_env, self.env_url, self.data, self.env_options)
        try:
            if "sample_id" in options and not hasattr(env, "url"):  # in process: by index
                ids = [s.id for s in env.samples]
                options["index"] = ids.index(str(options.pop("sample_id")))
            obs, info = await self._env_call(env.reset, seed=extra.get("seed"), options=options)
            messages, images = chat_messages(obs, info)
            self._assert_mm_supported(bool(images))
            runtime = await self.ct_build_initial_tokens(messages, images=images or None, mm_inputs_out={})
            prompt_len = len(runtime)
            mask: list[int] = []
            logprobs: list[float] | None = None
            request_id = uuid4().hex
            turns, reward, done, final = 0, 0.0, False, {}
            while not done:
                t0 = time.perf_counter()
                out = await self.server_manager.generate(request_id=request_id, prompt_ids=runtime,
                                                         sampling_params=sampling_params, image_data=images or None)  # fmt: skip
                metrics["generate_sequences"] += time.perf_counter() - t0
                if logprobs is None and out.log_probs:  # a server that reports log-probs: one per response token
                    logprobs = [0.0] * len(mask)
                merged, mask, logprobs = await self.ct_merge_assistant_token(
                    runtime, out.token_ids, mask, logprobs, assistant_logprobs=out.log_probs or None
                )
                runtime = merged.token_ids
                turns += 1
                text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
                t0 = time.perf_counter()
                obs, reward, terminated, truncated, final = await self._env_call(env.step, text)
                metrics["tool_calls"] += time.perf_counter() - t0
                done = terminated or truncated
                if done:
                    break
                if len(mask) >= self.response_length:  # budget spent mid-episode: it ends with what was written
                    obs, reward, terminated, truncated, final = await self._env_call(env.step, "")
                    break
                feedback, new_images = chat_messages(obs, final)
                previous = list(messages)
                messages += feedback
                merged, mask, logprobs = await self.ct_merge_context_msg(previous, messages, runtime, mask, logprobs)
                runtime = merged.token_ids
                images.extend(new_images)
                if len(mask) >= self.response_length:
                    obs, reward, terminated, truncated, final = await self._env_call(env.step, "")
                    break
        finally:
            await self._env_call(env.close)
        response = runtime[prompt_len:]
        return AgentLoopOutput(
            prompt_ids=runtime[:prompt_len],
            response_ids=response[: self.response_length],
            response_mask=mask[: self.response_length],
            response_logprobs=logprobs[: self.response_length] if logprobs else None,
            multi_modal_data={"images": images} if images else {},
            reward_score=float(reward),
            num_turns=2 * turns,
            metrics=AgentLoopMetrics(**metrics),
            extra_fields={"reward_breakdown": final.get("reward_breakdown", {}), "prediction": final.get("prediction"),
                          "frame_budget": info.get("frame_budget"), "executed_tool_calls": final.get("executed_tool_calls", 0)},  # fmt: skip
        )
