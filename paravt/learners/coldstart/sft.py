"""SFT: scripted episodes in token space, and the cross-entropy training loop of the cold-start stages.

The paper cold-starts PARA-GRPO from a model fine-tuned on successful parallel tool-use trajectories. Here a
script (``paravt.learners.coldstart.teacher``) writes the turns and the env really executes them (real crops, real frames);
the episode is tokenised exactly like a policy rollout (``paravt.learners.rollout``), and the loss is next-token
cross-entropy on the assistant's tokens only. ``train_cross_entropy`` is the loop both cold-start stages
(perception, SFT) run; ``token_means``, ``accumulate``, ``optimizer_step`` and ``run_steps`` are the step every
cross-entropy loop here takes (the streamed SFT's too; the RL trainer takes ``optimizer_step``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from paravt.learners.grpo import masked_mean
from paravt.learners.interrupts import commit_section, raise_if_requested
from paravt.learners.optim import adamw
from paravt.learners.trajectory import Trajectory, TrajectoryBuilder, loss_positions
from paravt.policies.base import Generation
from paravt.policies.encoded import length_buckets
from paravt.policies.hf import HFPolicy
from paravt_env.messages import observation_messages
from paravt_env.protocol import THINK_PREFIX


def run_scripted_episode(
    env, policy: HFPolicy, turns: Sequence[str] | Callable[[int, dict], str], options: dict[str, Any] | None = None
) -> Trajectory:
    """Play ``turns`` (texts, or a function of (turn index, observation)) through ``env`` and record the
    episode in token space with ``policy``'s tokenizer and chat template (behaviour log-probs are 0)."""
    obs, info = env.reset(options=options)
    history = observation_messages(obs, info)
    builder = TrajectoryBuilder(policy, policy.encode(history), history)
    eos = policy.end_of_turn_id
    done, turn, calls = False, 0, 0
    reward, breakdown, trunc = 0.0, {}, False
    while not done:
        text = turns(turn, obs) if callable(turns) else turns[min(turn, len(turns) - 1)]
        body = text
        prefix = THINK_PREFIX if policy.think_prefix else ""
        if prefix and body.startswith("<think>"):
            body = body[len("<think>") :].lstrip("\n")  # the prefix is part of the prompt encoding already
        ids = policy.tokenizer.encode(body, add_special_tokens=False) + [eos]
        builder.add_turn(Generation(text=prefix + body, token_ids=ids, logprobs=[0.0] * len(ids)))
        obs, reward, term, trunc, info = env.step(prefix + body)
        calls += info["tool_calls"]["executed"]
        turn += 1
        done = term or trunc
        if done:
            breakdown = info["reward_breakdown"]
        else:
            builder.add_feedback(observation_messages(obs, info))
    return Trajectory(
        input_ids=list(builder.encoded.input_ids), loss_mask=builder.loss_mask, logprobs=builder.logprobs,
        struct_mask=builder.struct, encoded=builder.encoded, reward=float(reward), breakdown=dict(breakdown),
        frame_budget=int(info["frame_budget"]), turns=turn, tool_calls=calls, turn_texts=builder.texts,
        truncated=bool(trunc),
    )  # fmt: skip


MICRO_BATCH = 8
"""At most this many items share one forward pass of a cold-start step."""
MIN_FILL = 0.8
"""An item shares a pass only with items whose longest it fills to at least this fraction. Measured on the main
job's items (CPU, one thread): 4 perception examples (50-220 tokens) in one padded pass 40 ms against 49 ms one
by one; 2 teacher episodes (300-1,700 tokens) padded together 111 ms against 78 ms one by one (a padding mask
takes attention off its fast path, and the short one pays for the long one's length)."""

Passes = Iterator[tuple[list[int], list[torch.Tensor]]]
"""What a loss function of the cross-entropy loop yields: per forward pass, the indices of the items it scored
and their losses (each differentiable)."""


def token_means(policy: HFPolicy, items: Sequence[Any], *, micro_batch: int = MICRO_BATCH, min_fill: float = MIN_FILL,
                max_tokens: int | None = None) -> Passes:  # fmt: skip
    """Each item's mean negative log-likelihood of its loss tokens (temperature 1; items have ``encoded`` and
    ``loss_mask``), a forward pass at a time: items of similar length (``length_buckets`` with ``min_fill``) share
    a right-padded pass, and only the loss positions are projected to the vocabulary (``loss_positions``)."""
    lengths = [len(item.encoded.input_ids) for item in items]
    for bucket in length_buckets(lengths, max_rows=max(1, micro_batch), max_tokens=max_tokens, min_fill=min_fill):
        rows = [items[i] for i in bucket]
        logps = policy.batch_logprobs([r.encoded for r in rows], temperature=1.0, micro_batch=len(rows),
                                      scored=[loss_positions(r.loss_mask) for r in rows])  # fmt: skip
        yield bucket, [-masked_mean(lp, torch.tensor(r.loss_mask[1:], dtype=torch.float32, device=lp.device))
                       for r, lp in zip(rows, logps, strict=True)]  # fmt: skip


sft_losses = token_means
"""The SFT stage's loss: a teacher episode's token mean (``token_means``)."""


def accumulate(policy: Any, items: Sequence[Any], weights: Sequence[float],
               losses: Callable[[Any, Sequence[Any]], Passes]) -> list[float]:  # fmt: skip
    """Backpropagates sum_i ``weights[i]`` x item i's loss, one forward pass at a time (a pass's graph is freed
    before the next: a step holds one micro-batch's activations, whatever its batch); returns each item's loss."""
    values = [0.0] * len(items)
    for bucket, values_of_pass in losses(policy, items):
        sum(weights[i] * v for i, v in zip(bucket, values_of_pass, strict=True)).backward()
        for i, v in zip(bucket, values_of_pass, strict=True):
            values[i] = float(v.detach())
    return values


def optimizer_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, grad_clip: float,
                   scheduler: Any = None) -> float:  # fmt: skip
    """The update every learner here takes once its gradients are in: the gradients' norm clipped to
    ``grad_clip``, the optimiser's step, then the schedule's; returns the learning rate the step used. Callers run
    it inside ``commit_section`` with what they record of the step, so a step is taken whole or not at all."""
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    lr = optimizer.param_groups[0]["lr"]
    if scheduler is not None:
        scheduler.step()
    return lr


def run_steps(model: torch.nn.Module, first: int, last: int, one_step: Callable[[int], float], *, bar: Any = None,
              save_state: Callable[[dict[str, Any]], None] | None = None,
              loop_state: Callable[[int], dict[str, Any]] | None = None, completed: Callable[[], int] | None = None,
              save_every_s: float = 60.0) -> None:  # fmt: skip
    """Steps ``first``..``last`` of a cross-entropy loop in train mode: ``one_step(k)`` takes step k whole and
    returns its loss. With ``save_state``, the loop's state after n completed steps (``loop_state(n)``) is handed
    to it every ``save_every_s`` seconds, at the end, and on Ctrl-C / SIGTERM before the interrupt goes on (n then
    ``completed()``). The model is left in eval mode."""
    model.train()
    last_save = time.monotonic()
    try:
        for k in range(first, last + 1):
            raise_if_requested()  # an interrupt a finalizer swallowed
            loss = one_step(k)
            if bar:
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}")
            if save_state is not None and k < last and time.monotonic() - last_save >= save_every_s:
                save_state(loop_state(k))
                last_save = time.monotonic()
    except KeyboardInterrupt:
        if save_state is not None:
            save_state(loop_state(completed()))
        raise
    finally:
        if bar:
            bar.close()
        model.eval()
    if save_state is not None:
        save_state(loop_state(last))


def progress_bar(total: int, desc: str, enabled: bool, initial: int = 0, unit: str = "step"):
    """A bar for the stage ``desc`` in steps: a tqdm bar, or None when progress is off; inside ``paravt train``'s
    job the stage's bar, which also counts the stage for the job's progress line
    (``paravt.evaluation.progress.stage_bar``)."""
    from paravt.evaluation.progress import stage_bar

    return stage_bar(desc, total, enabled=enabled, initial=initial, unit=unit)


def progress_iter(items: Sequence[Any], desc: str, enabled: bool, unit: str = "item"):
    """``items``, each counted on ``progress_bar``'s bar for ``desc`` (none when progress is off and no job runs)."""
    bar = progress_bar(len(items), desc, enabled, unit=unit)
    if bar is None:
        yield from items
        return
    try:
        for item in items:
            yield item
            bar.update(1)
    finally:
        bar.close()


SCHEDULES = ("constant", "cosine")


def lr_scheduler(opt: torch.optim.Optimizer, schedule: str, steps: int, warmup_ratio: float):
    """transformers' schedule of that name (warm-up ``warmup_ratio`` of ``steps``), stepped once per step."""
    from transformers import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

    if schedule not in SCHEDULES:
        raise ValueError(f"unknown lr schedule {schedule!r}: choose one of {', '.join(SCHEDULES)}")
    warmup = int(round(max(0.0, warmup_ratio) * steps))
    if schedule == "cosine":
        return get_cosine_schedule_with_warmup(opt, num_warmup_steps=warmup, num_training_steps=steps)
    return get_constant_schedule_with_warmup(opt, num_warmup_steps=warmup)


def train_cross_entropy(
    policy: HFPolicy, items: Sequence[Any], losses: Callable[[Any, Sequence[Any]], Passes], *, steps: int, batch: int,
    lr: float, grad_clip: float, seed: int, stage: str, rehearsal: Sequence[Any] = (),
    rehearsal_losses: Callable[[Any, Sequence[Any]], Passes] | None = None, rehearse: int = 0, progress: bool = False,
    schedule: str = "constant", warmup_ratio: float = 0.0, weight_decay: float = 0.0,
    resume: dict[str, Any] | None = None, save_state: Callable[[dict[str, Any]], None] | None = None,
    save_every_s: float = 60.0,
) -> list[dict]:
    """``steps`` AdamW steps (``weight_decay``, default none), each over ``batch`` items of ``items`` (reshuffled every
    pass; every loss token of ``items`` weighs the same: ``losses`` gives each item's token mean, weighted here by its
    token count over ``batch`` times the items' mean count; items have a ``loss_mask``) plus ``rehearse`` items drawn
    from ``rehearsal`` (each item's token mean over ``batch``), the learning rate on ``schedule`` ("constant", or
    "cosine" after ``warmup_ratio`` of linear warm-up); returns ``{"stage", "step", "loss", "lr"}`` rows (the loss
    of ``items`` only). ``losses`` scores several items a forward pass (``token_means``). The model is left in eval
    mode.

    With ``save_state``, the loop's state at its last completed step (weights, optimiser, schedule, data order,
    RNGs, rows: see ``loop_state``) is handed to it every ``save_every_s`` seconds, at the end, and on Ctrl-C /
    SIGTERM before the interrupt goes on; ``resume`` (such a state) continues the loop from that step, drawing
    exactly what the uninterrupted loop would have drawn (a finished state just restores the weights)."""
    if steps <= 0 or not items:
        return []
    opt = adamw(policy.model.parameters(), lr=lr, weight_decay=weight_decay)  # fp32 masters for a bf16 model
    sched = lr_scheduler(opt, schedule, steps, warmup_ratio)
    norm = batch * sum(max(1, sum(item.loss_mask[1:])) for item in items) / len(items)
    rng = random.Random(seed)
    order: list[int] = []
    rows: list[dict] = []
    start = 0
    if resume is not None:
        if resume["steps"] != steps or resume["stage"] != stage:
            raise ValueError(f"the saved {resume['stage']} state is of a {resume['steps']}-step loop, not of this "
                             f"{steps}-step {stage} loop")  # fmt: skip
        policy.model.load_state_dict(resume["model"])
        torch.set_rng_state(resume["torch_rng"])
        rows, start = list(resume["rows"]), resume["step"]
        if start >= steps:  # finished before the interrupt: its weights and the RNG it left are all that is needed
            policy.model.eval()
            return rows
        opt.load_state_dict(resume["optimizer"])
        sched.load_state_dict(resume["scheduler"])
        order = list(resume["order"])
        rng.setstate(resume["rng"])
    # What the loop drew up to its last completed step: a Ctrl-C mid-step saves these, not the half-drawn ones.
    boundary = (list(order), rng.getstate(), torch.get_rng_state())

    def loop_state(step: int) -> dict[str, Any]:
        return {"stage": stage, "step": step, "steps": steps, "model": policy.model.state_dict(),
                "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "order": boundary[0],
                "rng": boundary[1], "torch_rng": boundary[2], "rows": list(rows)}  # fmt: skip

    def one_step(step: int) -> float:
        nonlocal order, boundary
        opt.zero_grad()
        picked = []
        for _ in range(batch):
            if not order:
                order = list(range(len(items)))
                rng.shuffle(order)
            picked.append(items[order.pop()])
        # Every loss token of the data weighs the same: an item's token mean times its token count, over a
        # fixed normaliser (the batch's expected token count). A per-item mean weighs the one decision token of
        # a 200-token tool-use episode ten times less than the same token in a 20-token answer episode
        # (measured: 30 % crop episodes gave a policy that crops 1 % of the time); a token mean over the few
        # items of this batch still does, by the batch's length (2 guesses: 1/50 each; a guess beside a crop
        # episode: 1/245; measured: p(crop) 0.09 for 30 % crop episodes). Large batches make the two agree.
        weights = [max(1, sum(item.loss_mask[1:])) / norm for item in picked]
        total = sum(w * v for w, v in zip(weights, accumulate(policy, picked, weights, losses), strict=True))
        extras = rng.sample(list(rehearsal), min(rehearse, len(rehearsal))) if rehearsal else []
        if extras:
            accumulate(policy, extras, [1.0 / batch] * len(extras), rehearsal_losses)
        with commit_section():  # the step is taken whole, or not at all
            rows.append({"stage": stage, "step": step, "loss": total,
                         "lr": optimizer_step(policy.model, opt, grad_clip, sched)})  # fmt: skip
            boundary = (list(order), rng.getstate(), torch.get_rng_state())
        return total

    run_steps(policy.model, start + 1, steps, one_step, bar=progress_bar(steps, stage, progress, initial=start),
              save_state=save_state, loop_state=loop_state, completed=lambda: len(rows), save_every_s=save_every_s)  # fmt: skip
    return rows
