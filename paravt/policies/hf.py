"""``HFPolicy``: a transformers Qwen-VL checkpoint (Qwen2.5-VL, Qwen3-VL) as a batched policy.

    policy = HFPolicy.from_pretrained("Qwen/Qwen3-VL-8B-Instruct", max_new_tokens=2048, temperature=0.7)
    [gen] = policy.generate([[Message("system", prompt), Message("user", obs_text, list(obs_frames))]])

Frames go through the checkpoint's own image processor and chat template (an image part per ``<image>``
placeholder, right after its ``<t seconds>`` marker). Sampling returns the generated ids and their
log-probabilities under the sampling distribution, which is what GRPO's importance ratio needs.
``think_prefix=True`` forces every response to start with ``<think>\\n`` (a PARA-GRPO knob): the prefix is
part of the prompt, so it is neither sampled nor trained on.

The encoding is also exposed piecewise (``encode``, ``encode_continuation``, ``generate_encoded``) so that a
multi-turn rollout can extend the exact token sequence the model generated instead of re-tokenising text; the
sequences themselves (``Encoded``) and their batching (``length_buckets``) live in ``paravt.policies.encoded``.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessorList

from paravt.policies.base import Conversation, Generation
from paravt.policies.chat import continuation_text, render_chat
from paravt.policies.encoded import Encoded, PackedFrames, length_buckets
from paravt.policies.gather import Turn, TurnGather
from paravt.policies.kv_engine import CachedGenerator
from paravt.policies.logprobs import SampledLogprobs, target_logprobs
from paravt.policies.patch_embed import linear_patch_embed
from paravt.policies.vision_inputs import (
    IMAGE_PAD,
    ProcessedFrames,
    expand_image_tokens,
    load_tokenizer_and_image_processor,
)
from paravt.policies.weights import weights_problem
from paravt_env.messages import Message
from paravt_env.protocol import THINK_PREFIX

ENGINES = ("cached", "generate")
"""How ``HFPolicy`` generates: ``cached``, the rollout engine of ``paravt.policies.kv_engine`` (an episode's cache
kept across turns, prefill without padding, one vision pass per distinct image); ``generate``, transformers'
``model.generate`` on left-padded batches, re-reading every conversation whole (the path before the rollout engine, kept
as the reference the engine is tested and benchmarked against)."""


def _rgb_arrays(images: Sequence[Any]) -> list[np.ndarray]:
    return [np.asarray(im.convert("RGB")) if hasattr(im, "convert") else np.asarray(im) for im in images]


class HFPolicy:
    """A Qwen-VL model with its tokenizer and image processor, generating in batches."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        image_processor: Any,
        *,
        max_new_tokens: int = 512,
        temperature: float = 0.7,
        top_p: float = 1.0,
        think_prefix: bool = False,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        batch_tokens: int | None = None,
        engine: str = "cached",
    ) -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        linear_patch_embed(model)  # the patch convolution as the matrix product it is: faster, pinned floats
        self.model = model
        self.batch_tokens = batch_tokens  # padded prompt tokens per generation batch (None: one batch)
        self.engine = engine
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.think_prefix = bool(think_prefix)
        self.pixel_kwargs = {}
        if min_pixels is not None or max_pixels is not None:
            size = dict(getattr(image_processor, "size", None) or {})
            size.update({k: v for k, v in (("shortest_edge", min_pixels), ("longest_edge", max_pixels)) if v})
            self.pixel_kwargs["size"] = size
        self.merge_size = int(getattr(image_processor, "merge_size", 2))
        eos = model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.eos_ids = sorted({*eos, *([im_end] if isinstance(im_end, int) and im_end >= 0 else [])})
        if not self.eos_ids:
            raise ValueError("the model has no end-of-turn token (generation_config.eos_token_id and <|im_end|> missing)")
        # The token that closes an assistant turn (Instruct checkpoints also list <|endoftext|> as eos).
        self.end_of_turn_id = im_end if isinstance(im_end, int) and im_end in self.eos_ids else (eos or self.eos_ids)[0]
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]
        self.image_pad_id = tokenizer.convert_tokens_to_ids(IMAGE_PAD)
        video_pad = tokenizer.convert_tokens_to_ids("<|video_pad|>")
        self.video_pad_id = video_pad if isinstance(video_pad, int) and video_pad != tokenizer.unk_token_id else None
        self._lock = threading.Lock()  # one generate() at a time: concurrent episodes share the weights
        self._ending = threading.Lock()
        self._ended: list[Any] = []  # session keys of ended episodes, dropped when the engine is free
        # A sampled image/video pad would claim pixels that do not exist and break the next forward pass.
        pads = [i for i in (tokenizer.convert_tokens_to_ids(t) for t in (IMAGE_PAD, "<|video_pad|>"))
                if isinstance(i, int) and i >= 0 and i != tokenizer.unk_token_id]  # fmt: skip
        # Ids past the tokenizer decode to nothing: released checkpoints pad the embedding beyond it (Qwen3-VL: 267
        # ids), which a trained model never samples and a random-weight model of a published size samples almost
        # always (``tiny_model.published_config``): never sampled either.
        vocab = getattr(model.config.get_text_config(), "vocab_size", None) or 0
        self.suppress_ids = [*pads, *range(len(tokenizer), vocab)]
        self.cached = CachedGenerator(self)
        self._processed = ProcessedFrames(image_processor)
        self.gather = TurnGather(self._run_turns)

    @property
    def suppress_ids(self) -> tuple[int, ...]:
        """Ids never sampled and scored 0 (image and video pads, ids past the tokenizer); assign a new sequence to
        change them (a tuple: changed in place, the masks below would go stale)."""
        return self._suppress_ids

    @suppress_ids.setter
    def suppress_ids(self, ids: Sequence[int]) -> None:
        self._suppress_ids = tuple(int(i) for i in ids)
        self._suppress_masks: dict[tuple[int, str], torch.Tensor] = {}

    def suppress_mask(self, vocab: int, device: torch.device | str) -> torch.Tensor | None:
        """``suppress_ids`` as a (vocab,) bool mask on ``device`` (None when there are none), built once: indexing
        with the ids themselves turned the list into a tensor at every sampled token: 30 ms on a 2-core CPU at a
        published size's ~150k padding ids (docs/gpu.md)."""
        if not self._suppress_ids:
            return None
        key = (vocab, str(device))
        mask = self._suppress_masks.get(key)
        if mask is None:
            mask = torch.zeros(vocab, dtype=torch.bool)
            mask[[i for i in self._suppress_ids if i < vocab]] = True
            mask = self._suppress_masks[key] = mask.to(device)
        return mask

    @classmethod
    def from_pretrained(
        cls, path: str | Path, *, device: str = "cpu", dtype: str | torch.dtype | None = None, **kwargs: Any
    ) -> HFPolicy:
        """Load any image-text-to-text checkpoint of the Qwen2.5-VL / Qwen3-VL families."""
        from transformers import AutoModelForImageTextToText

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if isinstance(dtype, str):
            dtype = {"auto": "auto", "bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp32": torch.float32,
                     "float32": torch.float32, "fp16": torch.float16}[dtype]  # fmt: skip
        if (why := weights_problem(path)) is not None:
            raise ValueError(f"{path}: cannot load the checkpoint: {why}")
        model = AutoModelForImageTextToText.from_pretrained(path, dtype=dtype or torch.float32).to(device)
        model.eval()
        tokenizer, image_processor = load_tokenizer_and_image_processor(path)
        return cls(model, tokenizer, image_processor, **kwargs)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # --- encoding -------------------------------------------------------------------------------------------
    def render(self, messages: Sequence[Message], add_generation_prompt: bool) -> str:
        if any(m.video_url for m in messages):
            raise ValueError("a video_url message needs a server that samples videos itself (openai:URL to vLLM); "
                             "local checkpoints take frames: use --video-channel image_url")  # fmt: skip
        return render_chat(self.tokenizer, messages, add_generation_prompt)

    def _encode_text(self, text: str, images: Sequence[np.ndarray]) -> Encoded:
        if not images:
            return Encoded(self.tokenizer.encode(text, add_special_tokens=False))
        arrays = _rgb_arrays(images)
        frames = PackedFrames(arrays)
        pixels, grid = self.process_images(arrays, digests=frames.digests)
        text = expand_image_tokens(text, grid, self.merge_size)
        return Encoded(self.tokenizer.encode(text, add_special_tokens=False), pixels, grid,
                       frames=frames, process=self.process_images)  # fmt: skip

    def encode_ids(self, ids: Sequence[int], images: Sequence[Any] = ()) -> Encoded:
        """Ids that already hold every image's expanded pads, with those images' pixels."""
        if not images:
            return Encoded(list(ids))
        arrays = _rgb_arrays(images)
        frames = PackedFrames(arrays)
        return Encoded(list(ids), *self.process_images(arrays, digests=frames.digests), frames=frames,
                       process=self.process_images)  # fmt: skip

    def process_images(self, images: Sequence[Any], digests: Sequence[bytes] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(pixel_values, image_grid_thw)`` of frames, at this policy's pixel budget (``digests``: the frames'
        ``frame_digest``s where the caller has them, e.g. from their ``PackedFrames``)."""
        return self._processed(images, self.pixel_kwargs, digests)

    def encode(self, messages: Sequence[Message], add_generation_prompt: bool = True, *,
               think_prefix: bool | None = None) -> Encoded:  # fmt: skip
        """A whole conversation (plus the think prefix when generating; ``think_prefix`` overrides the policy's
        for this call, e.g. False for the weight-sharing sub-agent, which the release never prefixes)."""
        text = self.render(messages, add_generation_prompt)
        if add_generation_prompt and (self.think_prefix if think_prefix is None else think_prefix):
            text += THINK_PREFIX
        return self._encode_text(text, [im for m in messages for im in m.images])

    def encode_continuation(self, history: Sequence[Message], new: Sequence[Message]) -> Encoded:
        """The tokens that follow ``history`` (ending with the assistant's last turn) when ``new`` messages
        are added and the assistant is prompted again: the chat template's text of the extension only."""
        if any(m.video_url for m in [*history, *new]):
            self.render([*history, *new], add_generation_prompt=True)  # refused, as render refuses it
        delta = continuation_text(self.tokenizer, history, new)
        if self.think_prefix:
            delta += THINK_PREFIX
        return self._encode_text(delta, [im for m in new for im in m.images])

    def end_of_turn(self) -> list[int]:
        """What closes an assistant turn that was cut at max_new_tokens (the template's end token)."""
        return self.tokenizer.encode("<|im_end|>\n", add_special_tokens=False)

    # --- generation -----------------------------------------------------------------------------------------
    def generate_encoded(
        self, prompts: Sequence[Encoded], *, temperature: float | None = None, max_new_tokens: int | None = None,
        think_prefix: bool | None = None, sessions: Sequence[Any] | None = None,
    ) -> list[Generation]:
        """Sample one continuation per prompt, rows of similar length batched under ``batch_tokens`` (per-call
        overrides for servers; ``think_prefix``: whether the prompts end with the forced prefix, which the returned
        text then starts with; default the policy's); the results come back in prompt order. ``sessions``: a key
        per prompt (None: none) naming the episode it continues, whose cache the engine keeps between turns
        (``end_sessions`` when the episode ends); the ``generate`` engine ignores them. Called from several
        episodes in flight (``with policy.gather.episode():``, ``paravt eval``), their turns run as one batch."""
        if not prompts:
            return []
        keys = list(sessions) if sessions is not None else [None] * len(prompts)
        if len(keys) != len(prompts):
            raise ValueError(f"generate_encoded: {len(prompts)} prompts but {len(keys)} session keys")
        settings = self._settings(temperature, max_new_tokens, think_prefix)
        return self.gather.submit(Turn(list(zip(prompts, keys, strict=True)), settings))

    def _settings(self, temperature: float | None, max_new_tokens: int | None, think_prefix: bool | None) -> dict[str, Any]:
        """A call's generation settings: its overrides, else the policy's own."""
        return {"temperature": self.temperature if temperature is None else float(temperature),
                "max_new_tokens": self.max_new_tokens if max_new_tokens is None else int(max_new_tokens),
                "think_prefix": self.think_prefix if think_prefix is None else bool(think_prefix)}  # fmt: skip

    def generate_as_ready(
        self, pairs: Iterable[tuple[Encoded, Any]], *, temperature: float | None = None,
        max_new_tokens: int | None = None, think_prefix: bool | None = None,
    ) -> list[Generation]:
        """``generate_encoded`` of (prompt, session key) pairs that arrive one at a time (an iterator that waits
        for each, as the trainer's rollouts yield a turn's prompts while their envs still run). The rollout
        engine prefills each prompt as it arrives, so the work that makes the next one runs beside it, and decodes
        the batch once the last has come: the same tokens and floats as ``generate_encoded`` of the whole list
        (a prompt is prefilled alone either way). Generations come back in arrival order. Not through ``gather``:
        for a caller with no episodes in flight; the ``generate`` engine, and a subclass with its own
        ``generate_encoded``, read the whole list first and generate it there."""
        settings = self._settings(temperature, max_new_tokens, think_prefix)
        # a subclass that generates its own way (a scripted policy, a user's override) is asked for the whole list
        if self.engine != "cached" or type(self).generate_encoded is not HFPolicy.generate_encoded:
            listed = list(pairs)
            return self.generate_encoded([p for p, _ in listed], sessions=[k for _, k in listed], **settings)
        return self._generate_arriving(pairs, **settings)

    def _generate_arriving(self, pairs: Iterable[tuple[Encoded, Any]], *, temperature: float, max_new_tokens: int,
                           think_prefix: bool) -> list[Generation]:  # fmt: skip
        """The rollout engine on (prompt, key) pairs read as they arrive: each prefilled on arrival, the batch
        decoded after the last; generations in arrival order."""
        arrived: list[Encoded] = []

        def tap() -> Iterator[tuple[Encoded, Any]]:
            for prompt, key in pairs:
                arrived.append(prompt)
                yield prompt, key

        with self._engine():
            rows = self.cached.generate(tap(), temperature=temperature, top_p=self.top_p,
                                              max_new_tokens=max_new_tokens, batch_tokens=self.batch_tokens)  # fmt: skip
        prefix = THINK_PREFIX if think_prefix else ""
        return [self._generation(*row, prefix, len(p.input_ids)) for row, p in zip(rows, arrived, strict=True)]

    def _run_turns(self, turns: Iterator[Turn]) -> None:
        """Generate a gathered batch (``TurnGather``'s ``run``: turns of one settings, as they come): the rollout
        engine prefills each turn's prompts as it arrives; the ``generate`` engine reads the whole batch first."""
        first = next(turns, None)
        if first is None:
            return
        taken: list[Turn] = []

        def pairs() -> Iterator[tuple[Encoded, Any]]:
            for t in itertools.chain([first], turns):
                taken.append(t)
                yield from t.prompts

        if self.engine != "cached":
            gens = self._generate_whole([p for p, _ in pairs()], **first.settings)
        else:
            gens = self._generate_arriving(pairs(), **first.settings)
        for t in taken:
            t.results, gens = gens[: len(t.prompts)], gens[len(t.prompts) :]

    def _generate_whole(self, prompts: Sequence[Encoded], *, temperature: float, max_new_tokens: int,
                        think_prefix: bool) -> list[Generation]:  # fmt: skip
        """The ``generate`` engine: ``model.generate`` on left-padded batches of similar length."""
        with self._engine():
            prefix = THINK_PREFIX if think_prefix else ""
            out: list[Generation | None] = [None] * len(prompts)
            for bucket in length_buckets([len(p.input_ids) for p in prompts], max_tokens=self.batch_tokens):
                rows = self._hf_generate([prompts[i] for i in bucket], temperature, max_new_tokens)
                for i, row in zip(bucket, rows, strict=True):
                    out[i] = self._generation(*row, prefix, len(prompts[i].input_ids))
            return out  # type: ignore[return-value]

    def end_sessions(self, keys: Sequence[Any]) -> None:
        """The episodes under these session keys ended: their caches are dropped, now if the engine is free, else
        as the running generation ends (a streamed batch waits for the episodes in flight: one that ends must not
        wait for that batch)."""
        with self._ending:
            self._ended.extend(keys)
        if self._lock.acquire(blocking=False):
            try:
                self._drop_ended()
            finally:
                self._lock.release()

    @contextlib.contextmanager
    def _engine(self) -> Iterator[None]:
        """The model, for one generation: one at a time, without grad, the ended episodes' caches dropped before
        and after it."""
        with self._lock, torch.no_grad():
            self._drop_ended()
            try:
                yield
            finally:
                self._drop_ended()

    def _drop_ended(self) -> None:
        """Drop the caches of the ended episodes (with ``_lock`` held)."""
        with self._ending:
            keys, self._ended = self._ended, []
        if keys:
            self.cached.end(keys)

    def new_step(self) -> None:
        """A rollout step begins: every kept cache and image feature is dropped (what a step computes never
        depends on an earlier one, so a resumed run repeats it bit for bit)."""
        with self._lock:
            self.cached.reset()

    def _generation(self, token_ids: list[int], logprobs: list[float], stopped: bool, prefix: str,
                    prompt_tokens: int | None = None) -> Generation:  # fmt: skip
        text = self.tokenizer.decode([t for t in token_ids if t not in self.eos_ids], skip_special_tokens=False)
        return Generation(
            text=prefix + text,
            token_ids=token_ids,
            logprobs=logprobs,
            prefix=prefix,
            prefix_ids=self.tokenizer.encode(prefix, add_special_tokens=False) if prefix else [],
            finish_reason="stop" if stopped else "length",
            prompt_tokens=prompt_tokens,
        )

    def _hf_generate(self, prompts: Sequence[Encoded], temperature: float, max_new_tokens: int
                     ) -> list[tuple[list[int], list[float], bool]]:  # fmt: skip
        """``model.generate`` on one left-padded batch: per prompt, the ids up to its end token, their log-probs,
        and whether it stopped on an end token."""
        inputs = self._padded_inputs(prompts, left=True)
        width = inputs["input_ids"].shape[1]
        sample = temperature > 0
        # The recorder warps the scores itself (temperature, top-p) and keeps only each sampled token's
        # log-probability: ``output_scores`` would hold every step's (rows x vocabulary) fp32 scores
        # (``paravt.policies.logprobs``). generate then adds no warper of its own (1.0 = none).
        recorder = SampledLogprobs(temperature if sample else 0.0, self.top_p if sample else None)
        out = self.model.generate(
            **inputs,
            max_new_tokens=max_new_tokens,
            do_sample=sample,
            temperature=1.0 if sample else None,
            top_p=1.0 if sample else None,
            top_k=None,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
            suppress_tokens=list(self.suppress_ids) or None,
            logits_processor=LogitsProcessorList([recorder]),
            return_dict_in_generate=True,
        )
        new = out.sequences[:, width:].cpu()
        chosen = recorder.finish(new)
        rows = []
        for i in range(len(prompts)):
            row = new[i].tolist()
            stop = next((j for j, t in enumerate(row) if t in self.eos_ids), None)
            n = len(row) if stop is None else stop + 1
            rows.append((row[:n], [float(x) for x in chosen[i, :n]], stop is not None))
        return rows

    def _padded_inputs(self, encodeds: Sequence[Encoded], *, left: bool) -> dict[str, Any]:
        """Forward-pass inputs of several sequences padded to one width: on the left for generation (every
        row ends where its continuation starts), on the right for scoring (positions stay where they were)."""
        width = max(len(e.input_ids) for e in encodeds)
        ids = torch.full((len(encodeds), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(encodeds), width), dtype=torch.long)
        for i, e in enumerate(encodeds):
            span = slice(width - len(e.input_ids), width) if left else slice(0, len(e.input_ids))
            ids[i, span] = torch.tensor(e.input_ids, dtype=torch.long)
            mask[i, span] = 1
        inputs: dict[str, Any] = {"input_ids": ids.to(self.device), "attention_mask": mask.to(self.device),
                                  "mm_token_type_ids": self._token_types(ids).to(self.device)}  # fmt: skip
        with_images = [e for e in encodeds if e.n_images]
        if with_images:
            inputs["pixel_values"] = torch.cat([e.pixel_values for e in with_images]).to(self.device, self.model.dtype)
            inputs["image_grid_thw"] = torch.cat([e.image_grid_thw for e in with_images]).to(self.device)
        return inputs

    def model_inputs(self, encoded: Encoded) -> dict[str, Any]:
        """Forward-pass inputs of one whole sequence (batch of 1)."""
        ids = torch.tensor([encoded.input_ids])
        inputs: dict[str, Any] = {"input_ids": ids.to(self.device), "mm_token_type_ids": self._token_types(ids).to(self.device)}
        if encoded.n_images:
            inputs["pixel_values"] = encoded.pixel_values.to(self.device, self.model.dtype)
            inputs["image_grid_thw"] = encoded.image_grid_thw.to(self.device)
        return inputs

    def _token_types(self, ids: torch.Tensor) -> torch.Tensor:
        """Multimodal RoPE needs to know which tokens are image (1) or video (2) placeholders."""
        types = torch.zeros_like(ids)
        types[ids == self.image_pad_id] = 1
        if self.video_pad_id is not None:
            types[ids == self.video_pad_id] = 2
        return types

    def sequence_logprobs(self, encoded: Encoded, model: Any = None, temperature: float | None = None, *,
                          scored: Sequence[int] | None = None, vision: Any = None) -> torch.Tensor:  # fmt: skip
        """log p(token_t | tokens_<t) for t = 1..T-1 under ``model`` (default: this policy's), at the sampling
        temperature; differentiable when grad is enabled (the learners' forward pass). ``scored``: only these
        positions t are scored (the logits of the others are never computed; they come back 0). ``vision``: a
        ``VisionCache`` of ``model`` whose image features are reused (a frozen model's: the reference)."""
        return self.batch_logprobs([encoded], model=model, temperature=temperature,
                                   scored=None if scored is None else [scored], vision=vision)[0]  # fmt: skip

    def batch_logprobs(self, encodeds: Sequence[Encoded], model: Any = None, temperature: float | None = None,
                       micro_batch: int = 8, max_tokens: int | None = None, *,
                       scored: Sequence[Sequence[int]] | None = None, vision: Any = None) -> list[torch.Tensor]:  # fmt: skip
        """``sequence_logprobs`` of several sequences in right-padded forward passes of at most ``micro_batch``
        rows and ``max_tokens`` padded tokens, similar lengths together (``length_buckets``; one pass per
        bucket instead of one per sequence: the learners' update). Element i has length len(i) - 1, in input
        order. ``scored[i]``: the positions of sequence i to score (the learners pass the generated tokens': the
        logits of prompt and tool-response positions are never computed, and those positions come back 0)."""
        model = self.model if model is None else model
        temperature = self.temperature if temperature is None else temperature
        out: list[torch.Tensor | None] = [None] * len(encodeds)
        lengths = [len(e.input_ids) for e in encodeds]
        for bucket in length_buckets(lengths, max_rows=max(1, micro_batch), max_tokens=max_tokens):
            rows = [encodeds[i] for i in bucket]
            inputs = self.model_inputs(rows[0]) if len(rows) == 1 else self._padded_inputs(rows, left=False)
            if vision is not None and vision.supported and "pixel_values" in inputs:
                del inputs["pixel_values"]
                inputs["mm_encoder_outputs"] = {"image": vision.features_of([e for e in rows if e.n_images])}
            ids = inputs["input_ids"]
            if scored is None:
                lp = self._next_token_logprobs(model(**inputs).logits, ids, temperature)
                for row, i in enumerate(bucket):
                    out[i] = lp[row, : lengths[i] - 1]
                continue
            # the hidden state at t - 1 predicts token t: only the union of the rows' scored positions is projected
            keep = sorted({t - 1 for i in bucket for t in scored[i] if 1 <= t < lengths[i]})
            if not keep:
                for i in bucket:
                    out[i] = torch.zeros(lengths[i] - 1, device=ids.device)
                continue
            index = torch.tensor(keep, dtype=torch.long, device=ids.device)
            logits = model(**inputs, logits_to_keep=index).logits
            lp = target_logprobs(logits, ids[:, index + 1], temperature=temperature,
                                 suppress_ids=self.suppress_mask(logits.shape[-1], logits.device))
            for row, i in enumerate(bucket):
                inside = index < lengths[i] - 1
                out[i] = torch.zeros(lengths[i] - 1, dtype=lp.dtype, device=lp.device).index_copy(
                    0, index[inside], lp[row, inside])
        return out  # type: ignore[return-value]

    def _next_token_logprobs(self, logits: torch.Tensor, ids: torch.Tensor, temperature: float | None) -> torch.Tensor:
        """log p(ids[..., t] | ids[..., <t]) for t >= 1 from the logits (..., T, V) of ``ids`` (..., T), at
        ``temperature``, image pads masked out as sampling masks them (and scored 0: they are prompt, never
        trained on). Scored on the whole logits with a dummy last target, then cut: slicing off the last position
        first would copy the logits (``paravt.policies.logprobs`` keeps no vocabulary-wide fp32 copy either)."""
        targets = torch.cat([ids[..., 1:], ids[..., :1]], dim=-1)  # the last column is a placeholder
        banned = self.suppress_mask(logits.shape[-1], logits.device)
        return target_logprobs(logits, targets, temperature=temperature, suppress_ids=banned)[..., :-1]

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int | None = None,
                 think_prefix: bool | None = None, sessions: Sequence[Any] | None = None) -> list[Generation]:  # fmt: skip
        """The next assistant turn of each conversation (``max_new_tokens``: this call's cap; ``think_prefix``
        overrides the policy's forced prefix for this call; ``sessions``: as ``generate_encoded``'s: a conversation
        re-rendered whole reuses the cache up to where its tokens first differ from what was generated)."""
        return self.generate_encoded([self.encode(c, think_prefix=think_prefix) for c in conversations],
                                     max_new_tokens=max_new_tokens, think_prefix=think_prefix,
                                     sessions=sessions)  # fmt: skip
