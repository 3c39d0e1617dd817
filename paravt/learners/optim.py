"""The learners' optimiser: AdamW, on fp32 master weights when the model is held in bf16 / fp16.

A bf16 weight of magnitude 0.02 has a spacing of 2^-13 ~ 1.2e-4 between representable values; an AdamW step
moves a weight by about the learning rate, 2e-6 in the release's RL recipes, so written straight into bf16
weights nearly every update rounds back to the old value and training barely happens (measured in
``tests/paravt/learners/test_optim.py``: 200 steps at lr 1e-5 move 16 % of a bf16 layer's weights, the smallest ones, and
leave the rest where they were). Mixed-precision
trainers (DeepSpeed's bf16 mode, the release's AReaL stack) keep an fp32 master copy for the optimiser and copy it
back, rounded, after each step: so does ``MasterWeightAdamW``. The model keeps its bf16 weights for generation
and the forward / backward passes; memory per parameter: 2 (weight) + 2 (grad) + 4 (master) + 8 (Adam moments)
bytes instead of 2 + 2 + 4.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

LOW_PRECISION = (torch.bfloat16, torch.float16)


class MasterWeightAdamW(torch.optim.AdamW):
    """AdamW over fp32 copies of ``params``; ``step`` takes the model's gradients (in fp32), updates the copies,
    and writes them back into the model's parameters in their own dtype. ``state_dict`` carries the masters, so
    a resumed run continues from the same fp32 values, not from the rounded ones."""

    def __init__(self, params: Iterable[torch.nn.Parameter], **kwargs: Any) -> None:
        self.model_params = [p for p in params if p.requires_grad]
        masters = [p.detach().float().clone().requires_grad_(True) for p in self.model_params]
        super().__init__(masters, **kwargs)
        self.masters = masters

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001, ANN201 - torch's signature
        for p, master in zip(self.model_params, self.masters, strict=True):
            master.grad = None if p.grad is None else p.grad.float()
        loss = super().step(closure)
        for p, master in zip(self.model_params, self.masters, strict=True):
            p.copy_(master)
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none=set_to_none)
        for p in self.model_params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["master_weights"] = [m.detach().clone() for m in self.masters]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        masters = state.pop("master_weights", None)
        super().load_state_dict(state)
        if masters is not None:  # a checkpoint written without them starts from the loaded (rounded) weights
            with torch.no_grad():
                for master, saved in zip(self.masters, masters, strict=True):
                    master.copy_(saved)


def adamw(params: Iterable[torch.nn.Parameter], *, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW for ``params``: plain for fp32 weights, on fp32 master copies for bf16 / fp16 ones."""
    params = list(params)
    if any(p.dtype in LOW_PRECISION for p in params):
        return MasterWeightAdamW(params, lr=lr, weight_decay=weight_decay)
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
