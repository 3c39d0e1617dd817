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
   budget (``rollout.response_length``) is spent. A tool response is committed only if it fits, images and all
   (with a token left for the next turn): otherwise the episode ends there, unanswered, as verl's own
   ``ToolAgentLoop`` ends it, and ``extra_fields["dropped_tool_responses"]`` counts it. Each generation asks for
   at most the tokens left (``max_tokens``), so nothing is cut afterwards;
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

from omegaconf import DictConfig, OmegaConf
from verl.experimental.agent_loop import agent_loop as verl_agent_loop
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from paravt.learners.adapters.trl.environment import content_blocks  # the conversion the TRL adapter uses
from paravt_env.messages import observation_messages

RESET_KEYS = ("index", "sample_id", "epoch", "frame_budget")


def make_env(env_url: str | None, data: str | None, options: dict[str, Any], subagent: Any = None) -> Any:
    """A ``RemoteVideoToolEnv`` of ``env_url``, else a ``VideoToolEnv`` of ``data`` (``subagent``: the
    sub-agent it calls in ``tool_result: subagent`` mode)."""
    if (env_url is None) == (data is None):
        raise ValueError("ParaVTAgentLoop needs exactly one of env_url (a paravt serve-env) or data (a samples file)")
    if env_url is not None:
        from paravt_env.remote import RemoteVideoToolEnv

        return RemoteVideoToolEnv(env_url, **options)
    from paravt_env import VideoToolEnv

    if options.get("tool_result") == "subagent":
        options = {**options, "subagent": subagent}
    return VideoToolEnv(data, **options)


def chat_messages(obs: dict[str, Any], info: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """The env's messages (``paravt_env.messages``) as chat messages (text and image parts in order) and
    their images (PIL), in order."""
    messages = [{"role": m.role, "content": content_blocks(m.text, m.images) if m.images or m.as_parts else m.text}
                for m in observation_messages(obs, info)]  # fmt: skip
    return messages, [b["image"] for m in messages if isinstance(m["content"], list) for b in m["content"] if b["type"] == "image"]


class ParaVTAgentLoop(AgentLoopBase):
    """One ParaVT episode per trajectory (see the module docstring).

    Args (besides verl's):
        env_url: a ``paravt serve-env`` URL, or
        data: a samples file / directory every worker can read.
        env_options: the env's options (``EnvConfig`` fields), e.g. ``frame_budget``, ``nframes_gating``.
        max_new_tokens: the most tokens one turn may generate, the main agent's and each sub-agent summary's (the
            recipe's ``rollout.max_new_tokens``, as the local trainer and the OpenRLHF executor cap them; ``paravt
            export verl`` writes it). None: a turn may take the whole response budget left, and a sub-agent 256
            tokens (1024 in the release's mode).
    """

    def __init__(self, *args: Any, env_url: str | None = None, data: str | None = None,
                 env_options: dict[str, Any] | None = None, max_new_tokens: int | None = None, tools: Any = None,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.env_url, self.data = env_url, data
        if max_new_tokens is not None and int(max_new_tokens) < 1:
            raise ValueError(f"ParaVTAgentLoop max_new_tokens must be at least 1 (or null), got {max_new_tokens}")
        self.max_new_tokens = None if max_new_tokens is None else int(max_new_tokens)
        # hydra hands the agent-loop config's mapping over as a DictConfig: plain JSON types for the env
        self.env_options = OmegaConf.to_container(env_options, resolve=True) if isinstance(env_options, DictConfig) else dict(env_options or {})
        self.prompt_length = self.rollout_config.prompt_length
        self.response_length = self.rollout_config.response_length

    def _pixels(self) -> dict[str, Any]:
        """``data.mm_processor_kwargs`` (``paravt export verl`` writes the recipe's pixel budget there) for the
        server, which re-processes the images: its features must be exactly the pads verl's processor put in the
        prompt."""
        kwargs = dict(getattr(self, "mm_processor_kwargs", None) or {})
        return {"mm_processor_kwargs": kwargs} if kwargs else {}

    async def _env_call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)  # env calls decode video: off the event loop

    def _subagent(self, loop: asyncio.AbstractEventLoop, sampling_params: dict[str, Any]):
        """The sub-agent of ``tool_result: subagent``: each crop's frames go to verl's server, the same weights
        (ParaVT's weight sharing), from the env's crop threads, concurrently; its tokens are not trained (the
        main agent's trajectory carries only its summary, as in the local trainer and the OpenRLHF executor).
        The release's sub-agent is cut at 512 tokens of the policy's tokenizer."""
        import threading

        from paravt.policies.agent import cut_summary
        from paravt_env.tools import SUBAGENT_SYSTEM_PROMPT

        lock = threading.Lock()  # the crop threads share one tokenizer and processor: one render at a time

        def subagent(request: Any) -> str:
            release = request.release_style
            messages = [] if release else [{"role": "system", "content": SUBAGENT_SYSTEM_PROMPT}]
            blocks = content_blocks(request.user_text(), request.frames.images)
            messages.append({"role": "user", "content": blocks})
            pil = [b["image"] for b in blocks if b["type"] == "image"]
            with lock:
                ids = self.continuous_token_builder.build_initial_tokens(messages, images=pil or None)
            cap = self.max_new_tokens if self.max_new_tokens is not None else (1024 if release else 256)
            params = {**sampling_params, "max_tokens": cap}
            coro = self.server_manager.generate(request_id=uuid4().hex, prompt_ids=ids, sampling_params=params,
                                                image_data=pil or None, **self._pixels())  # fmt: skip
            token_ids = asyncio.run_coroutine_threadsafe(coro, loop).result().token_ids
            with lock:
                reply = self.tokenizer.decode(token_ids, skip_special_tokens=True)
                return cut_summary(reply, self.tokenizer) if release else reply

        return subagent

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra = dict(kwargs.get("extra_info") or {})
        options = {k: extra[k] for k in RESET_KEYS if extra.get(k) is not None}
        metrics = {"generate_sequences": 0.0, "tool_calls": 0.0}
        # PARA-GRPO's forced "<think>\n": prompt tokens at the head of every assistant turn (mask 0), and the env
        # scores only what follows it (as the local trainer and the OpenRLHF executor do).
        prefix = str(self.env_options.get("response_prefix") or "")
        prefix_ids = self.tokenizer.encode(prefix, add_special_tokens=False) if prefix else []
        env = await self._env_call(make_env, self.env_url, self.data, self.env_options,
                                   self._subagent(asyncio.get_running_loop(), sampling_params))  # fmt: skip
        try:
            if "sample_id" in options:  # the row names its sample twice (paravt export verl): reset by one key
                if hasattr(env, "url"):  # a serve-env: by id, whatever order its dataset is in
                    options.pop("index", None)
                else:  # in process: by index
                    ids = [s.id for s in env.samples]
                    options["index"] = ids.index(str(options.pop("sample_id")))
            obs, info = await self._env_call(env.reset, seed=extra.get("seed"), options=options)
            messages, images = chat_messages(obs, info)
            self._assert_mm_supported(bool(images))
            # verl refuses a multimodal prompt longer than rollout.prompt_length (its pads must stay whole)
            runtime = await self.ct_build_initial_tokens(messages, images=images or None, mm_inputs_out={})
            runtime = runtime + prefix_ids
            if len(runtime) > self.prompt_length:
                raise ValueError(f"the prompt with its think prefix is {len(runtime)} tokens, above "
                                 f"rollout.prompt_length={self.prompt_length}: raise data.max_prompt_length "
                                 "(paravt export verl sizes it from the recipe)")  # fmt: skip
            prompt_len = len(runtime)
            mask: list[int] = []
            logprobs: list[float] | None = None
            request_id = uuid4().hex
            turns, reward, done, final, dropped, executed = 0, 0.0, False, {}, 0, 0
            while not done:
                room = self.response_length - len(mask)  # >= 1: every committed response leaves one token
                if self.max_new_tokens is not None:  # the recipe's per-turn cap, as the local trainer's
                    room = min(room, self.max_new_tokens)
                params = {**sampling_params, "max_tokens": room}
                t0 = time.perf_counter()
                out = await self.server_manager.generate(request_id=request_id, prompt_ids=runtime, sampling_params=params,
                                                         image_data=images or None, **self._pixels())  # fmt: skip
                metrics["generate_sequences"] += time.perf_counter() - t0
                token_ids = list(out.token_ids)[:room]  # a server that ignored max_tokens: cut here, text only
                out_logprobs = list(out.log_probs)[:room] if out.log_probs else None
                if logprobs is None and out_logprobs:  # a server that reports log-probs: one per response token
                    logprobs = [0.0] * len(mask)
                merged, mask, logprobs = await self.ct_merge_assistant_token(
                    runtime, token_ids, mask, logprobs, assistant_logprobs=out_logprobs
                )
                runtime = merged.token_ids
                turns += 1
                text = prefix + self.tokenizer.decode(token_ids, skip_special_tokens=True)
                t0 = time.perf_counter()
                obs, reward, terminated, truncated, final = await self._env_call(env.step, text)
                executed += int((final.get("tool_calls") or {}).get("executed", 0))
                metrics["tool_calls"] += time.perf_counter() - t0
                done = terminated or truncated
                if done:
                    break
                if len(mask) >= self.response_length:  # budget spent mid-episode: it ends with what was written
                    obs, reward, terminated, truncated, final = await self._env_call(env.step, "")
                    break
                feedback, new_images = chat_messages(obs, final)
                merged, new_mask, new_logprobs = await self.ct_merge_context_msg(
                    list(messages), messages + feedback, runtime, mask, logprobs
                )
                if len(new_mask) + len(prefix_ids) >= self.response_length:
                    # verl would cut the response inside this tool response: its images would stay, part of their
                    # pads would not. Not committed; the episode ends unanswered, as verl's ToolAgentLoop ends it.
                    dropped = 1
                    obs, reward, terminated, truncated, final = await self._env_call(env.step, "")
                    break
                messages += feedback
                runtime, mask, logprobs = merged.token_ids + prefix_ids, new_mask + [0] * len(prefix_ids), new_logprobs
                if logprobs is not None:
                    logprobs = logprobs + [0.0] * len(prefix_ids)
                images.extend(new_images)
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
                          "frame_budget": info.get("frame_budget"), "executed_tool_calls": executed,
                          "dropped_tool_responses": dropped},  # fmt: skip
        )


AGENT_NAME = "paravt"


def register_once(name: str = AGENT_NAME) -> None:
    """Register ``ParaVTAgentLoop`` as ``name`` unless verl's registry holds an entry of that name already.

    verl's ``register`` writes a bare ``{"_target_": ...}`` over whatever the name held. A Ray
    ``AgentLoopWorker`` puts the ``agent_loops.yaml`` entry (with ``data`` / ``env_url`` and ``env_options``) into
    the registry when it starts, and imports this module only when hydra instantiates the first trajectory's loop:
    a module-level ``@register`` would then replace the configured entry, and every later trajectory of the worker
    would be built without its env (verl 0.9.1). The configured entry wins; the bare one is only a default."""
    if name not in verl_agent_loop._agent_loop_registry:  # verl has no public lookup
        register(name)(ParaVTAgentLoop)


register_once()
