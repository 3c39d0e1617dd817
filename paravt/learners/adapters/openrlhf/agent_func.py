"""The file passed to OpenRLHF's ``--train.agent_func_path``: ``AgentExecutor`` plays one ParaVT episode.

OpenRLHF's own ``MultiTurnAgentExecutor`` can neither vary the overview budget per prompt nor issue
sub-agent generations, so this executor drives ``VideoToolEnv`` itself:

1. the sample comes from the label (a JSON ``VideoQASample``, written by ``paravt export openrlhf``, its video
   by an absolute path: the actor runs in its Ray node's directory, not the exporter's);
2. K comes from the same nFrames gating as the local learner (sha256 of sample id, epoch, seed), so the
   prompt's ``n_samples_per_prompt`` rollouts share it;
3. the overview frames are tokenised as images through OpenRLHF's VLM utilities
   (``process_prompt_with_images``, with the processor OpenRLHF's ``get_tokenizer`` loads), each frame first
   resized to the size the local trainer's processor gives it (``pixels.py``: the recipe's budget, which vLLM and
   that processor then keep); main-agent turns are generated with ``await llm_engine.generate``;
4. crops run in the env (in parallel); in "subagent" mode each crop's sub-agent generation is issued on
   the same engine, concurrently (weight sharing);
5. tool responses (text and frames) come back as loss-masked user turns; the episode's scalar reward is
   the env's ``compute_reward`` (``RewardConfig.paravt()`` by default: sequence-granularity anchoring);
6. the env's messages (``info["messages"]``, ``paravt_env.messages``) are rendered through the checkpoint's chat
   template as the local trainer renders them (``paravt.policies.chat``; under the release protocols: the parquet's own
   prompt, one user message per crop); the sub-agent is prompted as the local trainer's ``PolicySubAgent``
   prompts it (the release's: no system prompt, the window only, its reply cut at 512 tokens);
7. with ``response_prefix`` set (PARA-GRPO: ``<think>\n``) every assistant turn opens with it: prompt tokens,
   outside the action ranges, and left out of what the reward scores, as in the local learner and the
   release.

The env's options come with each prompt, in its label (``label.py``: the sample, the recipe's ``EnvConfig``
and the epoch, written by ``paravt export openrlhf --recipe``): OpenRLHF instantiates this class with no
arguments inside a Ray actor that has none of the driver's environment.

Nothing is cut inside a tool response: OpenRLHF cuts every trajectory at ``max_length`` (``--data.max_len``),
which would keep a response's images but only part of their pads. A tool response that would not fit (with a
token left for the next turn) is not committed; the episode ends there, unanswered, as truncated (verl's own
``ToolAgentLoop`` does the same), and ``extra_logs["dropped_tool_responses"]`` counts it.

Token-granularity anchoring is local-only: OpenRLHF takes one scalar reward per sample and has no per-token
reward hook, and adding one means subclassing its experience maker across versions.
"""

from __future__ import annotations

import asyncio
from copy import deepcopy

from openrlhf.utils.agent import AgentExecutorBase
from openrlhf.utils.vlm_utils import accumulate_mm_inputs, process_prompt_with_images

from paravt.learners.adapters.openrlhf.label import check_files, parse_label
from paravt.learners.adapters.openrlhf.pixels import fit_frames
from paravt.policies.agent import cut_summary
from paravt.policies.chat import continuation_text as continuation
from paravt.policies.chat import render_chat as render
from paravt.policies.chat import strip_reasoning
from paravt_env import EnvConfig, VideoToolEnv
from paravt_env.messages import Message, observation_messages
from paravt_env.tools import SUBAGENT_SYSTEM_PROMPT

"""A sub-agent's reasoning, left out of its summary (as ``paravt.policies.agent.PolicySubAgent`` leaves it out)."""


def _images(messages: list[Message]) -> list:
    """The frames of ``messages`` in reading order (the order of their image parts)."""
    return [image for m in messages for image in m.images]


class AgentExecutor(AgentExecutorBase):
    """One ParaVT episode per call, in the OpenRLHF agent-executor contract (instantiated with no arguments,
    as OpenRLHF's ``_load_agent_executor`` does: everything an episode needs is in its label)."""

    async def _generate(self, llm_engine, tokens, images, sampling_params, max_tokens):
        params = deepcopy(sampling_params)
        params.max_tokens = max_tokens
        out = await llm_engine.generate(tokens, params, multi_modal_data={"image": images} if images else None)
        return out.outputs[0]

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None):
        loop = asyncio.get_running_loop()
        parsed = parse_label(label)
        sample, options, epoch = parsed.sample, parsed.env, parsed.epoch
        check_files(sample)  # before the env opens it: the sample, the field and this node named
        budget = parsed.pixels()

        def fit(frames):  # every frame at the local trainer's size, one the checkpoint's processor keeps
            return fit_frames(frames, budget, getattr(hf_tokenizer, "image_processor", None), f"sample {sample.id!r}")

        per_turn = int(getattr(sampling_params, "max_tokens", None) or 1024)

        def subagent(request):  # runs in the env's crop threads; the generation runs on the event loop
            release = request.release_style
            frames = list(request.frames.images)
            messages = ([Message("user", request.user_text(), frames, as_parts=True)] if release
                        else [Message("system", SUBAGENT_SYSTEM_PROMPT), Message("user", request.prompt(), frames)])  # fmt: skip
            tokens, _, pil = process_prompt_with_images(hf_tokenizer, render(hf_tokenizer, messages, True), fit(frames))
            # the local trainer's sub-agent writes up to the rollout's tokens per turn, as the main agent (the env
            # then cuts a summary at 2,000 characters, the release's at 512 tokens)
            coro = self._generate(llm_engine, tokens, pil, sampling_params, per_turn)
            reply = asyncio.run_coroutine_threadsafe(coro, loop).result().text
            if release:
                return cut_summary(reply, getattr(hf_tokenizer, "tokenizer", hf_tokenizer))
            return strip_reasoning(reply)

        cfg = EnvConfig.from_kwargs(**{**options, **({"subagent": subagent} if options.get("tool_result") == "subagent" else {})})
        env = VideoToolEnv([sample], cfg)
        try:
            return await self._play(env, sample, epoch, prompt, label, sampling_params, max_length, hf_tokenizer,
                                     llm_engine, per_turn, fit)  # fmt: skip
        finally:
            env.close()

    async def _play(self, env, sample, epoch, prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine,
                    per_turn, fit):  # fmt: skip
        # The forced opening of every assistant turn (PARA-GRPO: "<think>\n"): prompt tokens here, and the env's
        # reward scores only the text after it.
        prefix = env.config.response_prefix
        obs, info = await asyncio.to_thread(env.reset, options={"sample": sample, "epoch": epoch})
        history = observation_messages(obs, info)
        first = render(hf_tokenizer, history, add_generation_prompt=True) + prefix
        tokens, mm, pil = process_prompt_with_images(hf_tokenizer, first, fit(_images(history)))
        if len(tokens) >= max_length:
            raise ValueError(f"sample {sample.id}: its prompt ({len(tokens)} tokens, {len(pil)} frames) leaves no room "
                             f"under max_length {max_length}: raise --data.max_len (paravt's launcher sizes it from the recipe)")  # fmt: skip
        logprobs = [0.0] * len(tokens)
        action_ranges, truncated, reward, breakdown, calls, dropped = [], False, 0.0, {}, 0, 0
        end_of_turn = getattr(hf_tokenizer, "tokenizer", hf_tokenizer).encode("<|im_end|>\n", add_special_tokens=False)
        done = False
        while not done:
            budget = min(per_turn, max_length - len(tokens))  # >= 1: the prompt and every committed response leave one
            out = await self._generate(llm_engine, tokens, pil, sampling_params, budget)
            start = len(tokens)
            generated = list(out.token_ids)
            tokens = tokens + generated
            action_ranges.append((start, len(tokens)))
            logprobs += [next(iter(d.values())).logprob for d in (out.logprobs or [])] or [0.0] * len(generated)
            obs, reward, term, trunc, info = await asyncio.to_thread(env.step, prefix + out.text)
            calls += info["tool_calls"]["executed"]
            done = term or trunc
            if done:
                breakdown = info["reward_breakdown"]
                truncated = truncated or trunc
                break
            # The template closes an assistant turn with "<|im_end|>\n": a turn that stopped on <|im_end|> gets the
            # "\n", one cut at max_tokens (or stopped on another end token) the whole closing (the local trainer's rule).
            closing = end_of_turn
            if out.finish_reason != "length" and generated and generated[-1] == end_of_turn[0]:
                closing = end_of_turn[1:]
            history.append(Message("assistant", prefix + out.text))
            feedback = observation_messages(obs, info)
            text = continuation(hf_tokenizer, history, feedback) + prefix
            new_tokens, new_mm, new_pil = process_prompt_with_images(hf_tokenizer, text, fit(_images(feedback)))
            new_tokens = closing + new_tokens
            if len(tokens) + len(new_tokens) >= max_length:  # it would be cut, pads and all: not committed
                dropped, truncated = 1, True
                obs, reward, term, trunc, info = await asyncio.to_thread(env.step, "")  # the episode ends unanswered
                breakdown = info["reward_breakdown"]
                break
            history.extend(feedback)
            tokens = tokens + new_tokens
            logprobs += [0.0] * len(new_tokens)
            mm = accumulate_mm_inputs(mm, new_mm)
            pil = pil + new_pil
        return {
            "prompt": prompt, "label": label, "images": None, "mm_train_inputs": mm,
            "reward": float(reward), "scores": float(reward),
            "observation_tokens": tokens, "action_ranges": action_ranges, "rollout_log_probs": logprobs,
            "truncated": truncated,
            "extra_logs": {"accuracy": breakdown.get("accuracy", 0.0), "format": breakdown.get("format", 0.0),
                           "tool": breakdown.get("tool", 0.0), "f_tau": breakdown.get("format", 0.0),
                           "kappa": float(calls), "K": float(info.get("frame_budget", env.frame_budget)),
                           "dropped_tool_responses": float(dropped)},
        }  # fmt: skip
