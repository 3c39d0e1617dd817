"""Log-probs of sequences that share a prompt, the prompt computed once: a GRPO group's rollouts.

A group's G rollouts start from one prompt (the question, the overview, the forced prefix), and at the release's
64-frame overview the prompt is most of each sequence (``repro_cpu``: 1,400 of 1,500-4,200 tokens). Scoring each
rollout whole runs the prompt and its images through the model G times, forward and backward. Here the prompt
runs once, keeping its keys and values; each rollout's continuation then runs alone (no padding) on top of them,
its images encoded in the same pass. Gradients flow through the shared keys and values into the prompt's graph,
which autograd accumulates over the group's rollouts: the same gradient as G whole passes (tested against
``HFPolicy.batch_logprobs`` within float tolerance: ``tests/paravt/policies/test_shared_prefix.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from transformers.cache_utils import Cache, DynamicLayer

from paravt.policies.encoded import Encoded
from paravt.policies.kv_engine import chunk_positions
from paravt.policies.logprobs import target_logprobs

if TYPE_CHECKING:
    from paravt.policies.hf import HFPolicy


def shares_prefix(model: Any) -> bool:
    """Whether ``model`` can score through a shared prompt's keys and values: not while it trains with gradient
    checkpointing, where transformers drops the cache in every decoder layer (the prompt's keys and values are
    never kept, and a continuation would attend to itself alone). The 2B step's update on a GPU broke so."""
    # transformers 5.23 renames the flag (is_activation_checkpointing); older releases know the first name only
    flag = "is_activation_checkpointing" if hasattr(type(model), "is_activation_checkpointing") else "is_gradient_checkpointing"
    return not (model.training and getattr(model, flag, False))


def prompt_length(loss_mask: Sequence[int]) -> int:
    """Where a trajectory's first generated token is (its prompt's length); its length if nothing was generated."""
    return next((t for t, m in enumerate(loss_mask) if m), len(loss_mask))


def images_in(encoded: Encoded, stop: int, pad_id: int, merge_size: int) -> int:
    """How many whole images the first ``stop`` tokens hold (a prompt never ends inside an image)."""
    pads = sum(1 for t in encoded.input_ids[:stop] if t == pad_id)
    n = seen = 0
    for thw in encoded.image_grid_thw.tolist() if encoded.n_images else []:
        if seen >= pads:
            break
        seen += thw[0] * thw[1] * thw[2] // merge_size**2
        n += 1
    if seen != pads:
        raise ValueError(f"the first {stop} tokens end inside an image ({pads} image pads, images of {seen})")
    return n


def _image_inputs(policy: HFPolicy, model: Any, encoded: Encoded, first: int, stop: int, vision: Any) -> dict[str, Any]:
    """Forward-pass inputs for images ``first:stop`` of ``encoded``: precomputed features from ``vision`` (a
    frozen model's cache), else their pixels."""
    if stop <= first:
        return {}
    if vision is not None and vision.supported:
        return {"mm_encoder_outputs": {"image": vision.features(encoded, first, stop=stop)}}
    rows = encoded.image_grid_thw.prod(-1).tolist()
    begin, end = int(sum(rows[:first])), int(sum(rows[:stop]))
    return {"pixel_values": encoded.pixel_values[begin:end].to(policy.device, model.dtype),
            "image_grid_thw": encoded.image_grid_thw[first:stop].to(policy.device)}  # fmt: skip


def shared_prefix_logprobs(
    policy: HFPolicy, encodeds: Sequence[Encoded], prefix: int, scored: Sequence[Sequence[int]], *, model: Any = None,
    temperature: float | None = None, vision: Any = None,
) -> list[torch.Tensor]:
    """``HFPolicy.batch_logprobs(encodeds, scored=scored)`` for sequences whose first ``prefix`` tokens (and the
    images among them) are the same: element i has length len(i) - 1, the scored positions filled, 0 elsewhere."""
    model = policy.model if model is None else model
    if not shares_prefix(model):
        raise ValueError("shared_prefix_logprobs needs the model's cache, which transformers drops while a gradient-"
                         "checkpointed model trains: score such a model with HFPolicy.batch_logprobs")  # fmt: skip
    temperature = policy.temperature if temperature is None else temperature
    head = encodeds[0]
    if not 0 < prefix < min(len(e.input_ids) for e in encodeds):
        raise ValueError(f"a shared prefix of {prefix} tokens must leave every sequence a continuation")
    if any(e.input_ids[:prefix] != head.input_ids[:prefix] for e in encodeds[1:]):
        raise ValueError("the sequences do not share their first tokens")
    device = policy.device
    n_pre = images_in(head, prefix, policy.image_pad_id, policy.merge_size)
    ids = torch.tensor([head.input_ids[:prefix]], dtype=torch.long)
    positions = chunk_positions(model, ids, policy._token_types(ids), head.image_grid_thw[:n_pre] if n_pre else None)
    layers = [DynamicLayer() for _ in range(int(model.config.get_text_config().num_hidden_layers))]
    out = model(input_ids=ids.to(device), position_ids=positions.to(device), past_key_values=Cache(layers=layers),
                use_cache=True, logits_to_keep=torch.tensor([prefix - 1], device=device),
                **_image_inputs(policy, model, head, 0, n_pre, vision))  # fmt: skip
    first_logits = out.logits[0]  # (1, V): predicts token ``prefix``
    banned = policy.suppress_mask(first_logits.shape[-1], first_logits.device)
    kept = [(layer.keys, layer.values) for layer in layers]
    offset = int(positions.max()) + 1
    results = []
    for e, picks in zip(encodeds, scored, strict=True):
        n = len(e.input_ids)
        lp = torch.zeros(n - 1, device=device, dtype=torch.float32)
        picks = sorted(t for t in set(picks) if 1 <= t < n)
        targets = torch.tensor(e.input_ids, dtype=torch.long, device=device)
        if prefix in picks:
            first = target_logprobs(first_logits, targets[prefix : prefix + 1], temperature=temperature,
                                    suppress_ids=banned)  # fmt: skip
            lp = lp.index_copy(0, torch.tensor([prefix - 1], device=device), first)
        keep = [t - 1 - prefix for t in picks if t > prefix]
        if keep:
            chunk = torch.tensor([e.input_ids[prefix:]], dtype=torch.long)
            grid = e.image_grid_thw[n_pre:] if e.n_images > n_pre else None
            pos = chunk_positions(model, chunk, policy._token_types(chunk), grid) + offset
            own = [DynamicLayer() for _ in kept]
            for layer, (k, v) in zip(own, kept, strict=True):
                layer.update(k, v)  # a copy of the prompt's keys and values, still in its graph
            index = torch.tensor(keep, dtype=torch.long, device=device)
            logits = model(input_ids=chunk.to(device), position_ids=pos.to(device), past_key_values=Cache(layers=own),
                           use_cache=True, logits_to_keep=index,
                           **_image_inputs(policy, model, e, n_pre, e.n_images, vision)).logits[0]  # fmt: skip
            part = target_logprobs(logits, targets[index + prefix + 1], temperature=temperature,
                                   suppress_ids=banned)  # fmt: skip
            lp = lp.index_copy(0, index + prefix, part)
        results.append(lp)
    return results


def prompt_groups(policy: HFPolicy, encodeds: Sequence[Encoded], loss_masks: Sequence[Sequence[int]], *, max_rows: int,
                  max_tokens: int | None = None) -> list[tuple[list[int], int]]:  # fmt: skip
    """The sequences in forward-pass groups that share their prompt (its tokens and frames), each with that
    prompt's length (0 for a sequence alone): at most ``max_rows`` rows and ``max_tokens`` tokens (the prompt
    once, each continuation) a group, in first-seen order. A sequence whose frames are not kept (no digests) goes
    alone."""
    keyed: dict[Any, list[int]] = {}
    prompts: dict[Any, int] = {}
    for i, (e, mask) in enumerate(zip(encodeds, loss_masks, strict=True)):
        n = prompt_length(mask)
        key: Any = ("alone", i)
        if 0 < n < len(e.input_ids) and (not e.n_images or e.frame_digests is not None):
            n_pre = images_in(e, n, policy.image_pad_id, policy.merge_size) if e.n_images else 0
            key = (n, tuple(e.input_ids[:n]), tuple((e.frame_digests or ())[:n_pre]))
        keyed.setdefault(key, []).append(i)
        prompts[key] = n if key[0] != "alone" else 0
    out: list[tuple[list[int], int]] = []
    for key, members in keyed.items():
        n = prompts[key]
        group: list[int] = []
        tokens = n
        for i in members:
            extra = len(encodeds[i].input_ids) - n
            if group and (len(group) >= max_rows or (max_tokens is not None and tokens + extra > max_tokens)):
                out.append((group, n if len(group) > 1 else 0))
                group, tokens = [], n
            group.append(i)
            tokens += extra
        out.append((group, n if len(group) > 1 else 0))
    return out
