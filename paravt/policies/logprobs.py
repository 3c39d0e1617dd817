"""Token log-probabilities without a vocabulary-wide fp32 copy of every position.

At Qwen-VL size the vocabulary is 151,936 ids. A training forward pass of one 10k-token rollout gives logits of
10k x 151,936: 3 GB in bf16, 6 GB once cast to fp32, and ``log_softmax`` keeps another fp32 copy for its
backward pass; eight such rows in a micro-batch need ~100 GB. Sampling with ``output_scores`` keeps every
step's processed logits in fp32 as well: 2,048 steps x 56 rollouts x 151,936 ids is 70 GB. Both are what an 80 GB
GPU cannot hold, so the policy computes log-probs here instead:

* ``target_logprobs``: log-softmax at the targets, in fp32, a chunk of positions at a time, forward and
  backward (each chunk's graph is rebuilt in the backward pass, which writes the logits' gradient chunk by
  chunk): at most one chunk's fp32 copies are alive at any moment, besides the gradient itself;
* ``SampledLogprobs``: a logits processor that applies the sampling warpers itself (temperature, top-p: the
  library's own) and keeps, per row, only the log-probability of the token that was sampled from them.

Values, gradients and sampled tokens are bit for bit those of the plain computations, whatever the chunking
(``tests/paravt/policies/test_logprobs.py`` compares both ways): runs give the numbers they gave before.
``python -m benchmarks.perf.logprob_memory`` measures the memory and time of both.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import LogitsProcessor, TemperatureLogitsWarper, TopPLogitsWarper

CHUNK_ELEMENTS = 1 << 26
"""fp32 logits computed at once: 64 M elements (256 MB), 441 positions of a 151,936-id vocabulary."""


def _scaled(logits: torch.Tensor, banned: torch.Tensor | None, temperature: float) -> torch.Tensor:
    scaled = logits.float()
    if temperature > 0:
        scaled = scaled / temperature
    if banned is not None:
        scaled = scaled.masked_fill(banned, float("-inf"))
    return scaled


def _chunk_logprobs(logits: torch.Tensor, targets: torch.Tensor, banned: torch.Tensor | None, temperature: float) -> torch.Tensor:
    return torch.log_softmax(_scaled(logits, banned, temperature), dim=-1).gather(-1, targets[:, None]).squeeze(-1)


class _ChunkedTargetLogprobs(torch.autograd.Function):
    """log-softmax at the targets, a chunk of rows at a time, forward and backward. The backward pass recomputes
    each chunk's graph and writes its gradient into one tensor of the logits' dtype (autograd over sliced
    chunks would instead materialise a zero-filled logits-sized gradient per chunk); the per-row arithmetic is
    autograd's own, so values and gradients are bit for bit those of one log-softmax over every position."""

    @staticmethod
    def forward(ctx, logits, targets, banned, temperature, rows):  # noqa: ANN001, ANN205
        out = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
        for start in range(0, logits.shape[0], rows):
            stop = start + rows
            out[start:stop] = _chunk_logprobs(logits[start:stop], targets[start:stop], banned, temperature)
        ctx.save_for_backward(logits, targets)
        ctx.banned, ctx.temperature, ctx.rows = banned, temperature, rows
        return out

    @staticmethod
    def backward(ctx, grad_out):  # noqa: ANN001, ANN205
        logits, targets = ctx.saved_tensors
        grad = torch.empty_like(logits)
        for start in range(0, logits.shape[0], ctx.rows):
            stop = start + ctx.rows
            with torch.enable_grad():
                piece = logits[start:stop].detach().requires_grad_(True)
                lp = _chunk_logprobs(piece, targets[start:stop], ctx.banned, ctx.temperature)
                (grad[start:stop],) = torch.autograd.grad(lp, piece, grad_out[start:stop])
        return grad, None, None, None, None


def target_logprobs(logits: torch.Tensor, targets: torch.Tensor, *, temperature: float | None = None,
                    suppress_ids: Sequence[int] | torch.Tensor | None = (),
                    chunk_elements: int = CHUNK_ELEMENTS) -> torch.Tensor:  # fmt: skip
    """``log_softmax(logits / temperature)`` at ``targets``, in fp32, for logits (..., V) and targets (...).

    ``suppress_ids`` (ids, or a (V,) bool mask: ``HFPolicy.suppress_mask``, built once) are masked out of the
    distribution as sampling masks them, and a target that is one of them scores 0 (image pads: prompt, never
    trained on). Computed ``chunk_elements // V`` positions at a time, in the backward pass too (the softmax is
    recomputed there rather than kept)."""
    vocab = logits.shape[-1]
    flat, flat_targets = logits.reshape(-1, vocab), targets.reshape(-1).to(logits.device)
    banned = None
    if isinstance(suppress_ids, torch.Tensor):
        if suppress_ids.shape != (vocab,) or suppress_ids.dtype != torch.bool:
            raise ValueError(f"a suppress mask is ({vocab},) bool; got {tuple(suppress_ids.shape)} {suppress_ids.dtype}")
        banned = suppress_ids.to(logits.device)
    elif suppress_ids:
        banned = torch.zeros(vocab, dtype=torch.bool, device=logits.device)
        banned[list(suppress_ids)] = True
    lp = _ChunkedTargetLogprobs.apply(flat, flat_targets, banned, float(temperature or 0.0), max(1, chunk_elements // vocab))
    if banned is not None:
        lp = torch.where(banned[flat_targets], torch.zeros_like(lp), lp)
    return lp.reshape(targets.shape)


class SampledLogprobs(LogitsProcessor):
    """The last logits processor of a sampling ``generate``: it warps the scores (temperature, then top-p, as
    ``generate`` would after it; pass ``temperature=1.0, top_p=1.0`` to ``generate`` so that it adds no warper of
    its own) and keeps only the log-probability of each row's sampled token under the warped distribution
    (the behaviour policy's, what the importance ratio divides by).

    The token sampled at step t is known at step t+1 (it ends ``input_ids``), so one step's log-softmax is held
    until then; ``finish(new_tokens)`` reads the last step's. Memory: one step's (batch, vocab), not all of them."""

    def __init__(self, temperature: float, top_p: float | None = None) -> None:
        self.warpers = []
        if temperature > 0 and temperature != 1.0:
            self.warpers.append(TemperatureLogitsWarper(temperature))
        if top_p is not None and top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(top_p=top_p))
        self._held: torch.Tensor | None = None
        self._chosen: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._held is not None:
            self._chosen.append(self._held.gather(-1, input_ids[:, -1:]).squeeze(-1))
        for warp in self.warpers:
            scores = warp(input_ids, scores)
        self._held = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, new_tokens: torch.Tensor) -> torch.Tensor:
        """(batch, steps) log-probs of ``new_tokens`` (the generated ids, batch x steps), on the CPU."""
        if self._held is not None and len(self._chosen) < new_tokens.shape[1]:
            last = new_tokens[:, len(self._chosen)].to(self._held.device)
            self._chosen.append(self._held.gather(-1, last.unsqueeze(-1)).squeeze(-1))
        self._held = None
        if not self._chosen:
            return torch.zeros(new_tokens.shape, dtype=torch.float32)
        return torch.stack(self._chosen, dim=1).cpu()[:, : new_tokens.shape[1]]
