"""The local trainer: SFT cold start, then GRPO / PARA-GRPO on the env, on one machine.

    paravt train --recipe tiny_cpu --out runs/tiny [--steps N] [--resume] [key=value ...]

One step: ``prompts_per_step`` prompts, each played ``group_size`` times side by side (same sample, same
epoch, hence the same gated K), batched generation; rewards from the env; advantages (group-normalised,
per token with token anchoring); one PPO-clipped update with KL to the frozen initial policy. Every step
appends a row to ``RUN/metrics.jsonl`` (``RUN/curves.png`` is redrawn at most once a minute, at every checkpoint
and at the end); every ``save_every`` steps (and on Ctrl-C, and at the end) ``RUN/checkpoint`` gets the model, the
optimizer, the RNG states and the data position of the last completed step, so ``--resume`` continues the run as
if never interrupted.
"""

from __future__ import annotations

import copy
import json
import logging
import random
import statistics
from pathlib import Path
from typing import Any

import torch

from paravt.learners import checkpoint
from paravt.learners.advantages import kl_in_reward, training_units
from paravt.learners.coldstart.pipeline import run_cold_start
from paravt.learners.coldstart.sft import optimizer_step, progress_bar
from paravt.learners.coldstart.store import ColdStartStore
from paravt.learners.config import TrainConfig
from paravt.learners.cpu_numerics import record_numerics
from paravt.learners.grpo import (
    clipped_policy_loss,
    kl_penalty,
    masked_mean,
)
from paravt.learners.interrupts import commit_section, raise_if_requested
from paravt.learners.metrics import CurvesFile, MetricSinks, read_jsonl, rollout_metrics
from paravt.learners.optim import adamw
from paravt.learners.pipelined_update import OneForwardAtATime, pipelined_gradients, pipelines
from paravt.learners.rollout import run_batch
from paravt.learners.run_setup import (
    env_config,
    resolve_data,
    resolve_model_path,
    resolve_perception_data,
    write_validation,
)
from paravt.learners.selection import Selection, selects
from paravt.learners.step_clock import StepClock
from paravt.learners.trajectory import Trajectory, loss_positions
from paravt.policies.card import CARD_NAME
from paravt.policies.hf import HFPolicy
from paravt.policies.shared_prefix import prompt_groups, shared_prefix_logprobs, shares_prefix
from paravt.policies.vision_cache import VisionCache
from paravt_env import VideoToolEnv, storage
from paravt_env.config import flatten_dotted
from paravt_env.memory import freeze_survivors, release_free_memory, thaw_survivors

logger = logging.getLogger(__name__)

UPDATE_STATS = ("loss", "kl", "clip_fraction", "entropy")
"""Per trained trajectory, what the update records (their means go into the step's row)."""



# --- the trainer ------------------------------------------------------------------------------------------
class Trainer:
    def __init__(self, cfg: TrainConfig, out: str | Path, *, resume: bool = False, progress: bool = True,
                 allow_config_change: bool = False) -> None:  # fmt: skip
        self.cfg, self.out, self.progress = cfg, Path(out), progress
        self.out.mkdir(parents=True, exist_ok=True)
        # One writer per run directory: two trainers on one --out interleave metrics.jsonl and swap each
        # other's checkpoints. Released by close() or, if the process dies, by the kernel.
        self._lock = storage.DirectoryLock(self.out, "train.lock", "trained")
        try:
            self._setup(cfg, resume, allow_config_change)
        except BaseException:
            self._lock.release()
            raise

    def _setup(self, cfg: TrainConfig, resume: bool, allow_config_change: bool) -> None:
        self.envs: list[VideoToolEnv] = []
        self.ckpt = self.out / "checkpoint"
        self.metrics_path = self.out / "metrics.jsonl"
        self.resume_requested = resume
        if resume:
            checkpoint.recover(self.out)
            self._check_same_config(allow_config_change)
        elif (partial := ColdStartStore(self.out)).exists():
            raise FileExistsError(f"{self.out} holds an interrupted cold start ({partial.describe()}): pass --resume "
                                  "to continue it, or use a new --out")  # fmt: skip
        # An SFT-only run (the release's SFT recipe: steps 0, sft.data) needs no RL prompts.
        sft_only = cfg.steps == 0 and bool(cfg.sft.data) and not cfg.data.path
        self.samples = [] if sft_only else resolve_data(cfg, progress=self.progress)
        if not self.samples and not sft_only:
            raise ValueError("the training data holds no sample")
        base_path = resolve_model_path(cfg)
        self.base_path = Path(base_path) if Path(str(base_path)).exists() else None
        self.resumed = resume and (self.ckpt / "state.json").is_file()
        # Killed after the cold start but before the first RL checkpoint: start RL again from the saved cold
        # start (its steps are redone; their metrics go).
        coldstart = self.out / "coldstart" / "model"
        self.from_coldstart = resume and not self.resumed and (coldstart / CARD_NAME).is_file()
        if resume and not self.resumed and self.metrics_path.exists():
            logger.warning("%s: no checkpoint to resume from; RL restarts from %s", self.out,
                           "the saved cold start" if self.from_coldstart else "the beginning")  # fmt: skip
            self.metrics_path.unlink()
        load_from = self.ckpt / "model" if self.resumed else coldstart if self.from_coldstart else base_path
        dtype = torch.bfloat16 if cfg.model.dtype == "bf16" else torch.float32
        think = cfg.think_prefix
        if cfg.model.device == "cpu":
            record_numerics(self.out, resume)
        self.policy = HFPolicy.from_pretrained(
            load_from, device=cfg.model.device, dtype=dtype, max_new_tokens=cfg.rollout.max_new_tokens,
            temperature=cfg.rollout.temperature, think_prefix=think,
            **dict(zip(("min_pixels", "max_pixels"), cfg.model.processor_pixels(cfg.env.min_pixels, cfg.env.max_pixels), strict=True)),
            batch_tokens=cfg.rollout.batch_tokens,
        )  # fmt: skip
        if cfg.model.gradient_checkpointing:
            # transformers 5.23 names it gradient_checkpointing_enable (deprecated there for the new name)
            enable = getattr(self.policy.model, "activation_checkpointing_enable", None) or self.policy.model.gradient_checkpointing_enable
            enable()
        self.optimizer = self._new_optimizer()
        n_envs = cfg.rollout.prompts_per_step * cfg.rollout.group_size  # one env per rollout of a step
        self.envs = [VideoToolEnv(self.samples, env_config(cfg)) for _ in range(n_envs)] if self.samples else []
        self.step, self.epoch, self.cursor = 0, 0, 0
        self.order = list(range(len(self.samples)))
        self.ref_model = None
        self.selection = Selection(cfg.select.every, cfg.select.after, self.out) if selects(cfg) else None
        if cfg.select.every and self.selection is None:
            logger.warning("select.every %d: no validation split on real data (data.path; the split is drawn from the "
                           "synthetic training videos): the run reports its last step", cfg.select.every)  # fmt: skip
        if self.resumed:
            self._load_state()
        else:
            random.Random(cfg.seed).shuffle(self.order)
            torch.manual_seed(cfg.seed)
            if self.metrics_path.exists():
                raise FileExistsError(f"{self.metrics_path} exists: pass --resume to continue that run, or a new --out")
            (self.out / "config.json").write_text(json.dumps(cfg.as_dict(), indent=2) + "\n")
        self._commit()

    def _commit(self) -> None:
        """Snapshot the data position and every RNG: what a checkpoint saves, whenever it is saved. Taken only at
        step boundaries (inside ``commit_section``), so a checkpoint written on Ctrl-C in the middle of a step
        holds the position and RNGs of the last completed step, as its weights do: the interrupted step is
        replayed whole on ``--resume``, and the run continues as if never interrupted."""
        self._committed = {"step": self.step, "epoch": self.epoch, "cursor": self.cursor, "order": list(self.order),
                           "rng": checkpoint.rng_states()}  # fmt: skip

    def _new_optimizer(self) -> torch.optim.AdamW:
        return adamw(self.policy.model.parameters(), lr=self.cfg.optim.lr, weight_decay=self.cfg.optim.weight_decay)

    def _check_same_config(self, allow: bool) -> None:
        """``--resume`` continues the run it finds; other settings are refused unless asked for (``steps``
        may grow, logging may change)."""
        path = self.out / "config.json"
        if not path.is_file():
            return
        from paravt_env.storage import read_json

        old = flatten_dotted(read_json(path))  # a damaged config.json is named (DamagedFile), never overwritten
        new = flatten_dotted(json.loads(json.dumps(self.cfg.as_dict())))
        # A setting newer than the run (absent from its config.json) at its default changes nothing it did.
        defaults = flatten_dotted(json.loads(json.dumps(type(self.cfg)().as_dict())))
        changed = sorted(k for k in old.keys() | new.keys()
                         if k != "steps" and not k.startswith("log.") and old.get(k) != new.get(k)
                         and not (k not in old and k in defaults and new.get(k) == defaults[k]))  # fmt: skip
        if changed and not allow:
            details = "; ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in changed[:6])
            raise ValueError(f"--resume with settings other than {path}'s ({details}); pass --allow-config-change "
                             "to continue under the new ones, or use a new --out")  # fmt: skip
        if changed:
            logger.warning("resuming with changed settings: %s", ", ".join(changed))
            path.write_text(json.dumps(self.cfg.as_dict(), indent=2) + "\n")

    # -- data position ------------------------------------------------------------------------------------
    def next_prompts(self, n: int) -> list[tuple[int, int]]:
        """(sample index, epoch) of the next ``n`` prompts; the order is reshuffled at every epoch."""
        out = []
        for _ in range(n):
            if self.cursor >= len(self.order):
                self.epoch += 1
                self.cursor = 0
                random.Random(self.cfg.seed + self.epoch).shuffle(self.order)
            out.append((self.order[self.cursor], self.epoch))
            self.cursor += 1
        return out

    # -- cold start -------------------------------------------------------------------------------------
    def cold_start(self) -> None:
        """Perception + SFT (``paravt.learners.coldstart.pipeline``) when the recipe asks for them, saved as
        ``RUN/coldstart/model``: the checkpoint every RL arm of a comparison should start from. Its RNG states
        are saved beside it (``rng.pt``), so RL resumed from the saved cold start draws what it would have."""
        cfg = self.cfg
        rng_file = self.out / "coldstart" / "rng.pt"
        if self.from_coldstart and rng_file.is_file():
            checkpoint.set_rng_states(torch.load(rng_file, weights_only=False))
            self._commit()
        if self.resumed or self.from_coldstart or (cfg.perception.steps <= 0 and cfg.sft.steps <= 0):
            return
        perception = resolve_perception_data(cfg, progress=self.progress)
        summary = run_cold_start(self.policy, self.samples, cfg, self.out, perception_samples=perception,
                                 progress=self.progress, resume=self.resume_requested)  # fmt: skip
        target = self.out / "coldstart" / "model"
        # The cold start trained the weights with its own optimiser: RL's starts from them (a bf16 model's fp32
        # masters are copied from the weights as they are now, not as they were before the cold start).
        self.optimizer = self._new_optimizer()
        with commit_section():
            torch.save(checkpoint.rng_states(), rng_file)
            self._save_model(target, self.base_path)
            (self.out / "coldstart" / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
            storage.fsync_tree(self.out / "coldstart")
            self._commit()
        ColdStartStore(self.out).clear()  # saved whole: its partial state has served

    # -- one RL step --------------------------------------------------------------------------------------
    def rl_step(self) -> dict[str, Any]:
        """Collect one step's rollouts, update on them once, and record the step (metrics row, rollout records,
        the committed position); returns the step's metrics row. An interrupt before the optimiser step
        leaves the weights and the committed position of the previous step; the rest runs uninterrupted."""
        clock = StepClock(self.policy.device)
        groups = self.collect()
        rollout_s = clock.lap()
        trajs = [t for g in groups for t in g]
        stats = self.update(groups, apply=False, clock=clock)
        with commit_section():
            self._apply_gradients()
            self.step += 1
            self._write_rollouts(groups)
            row = {"step": self.step, **rollout_metrics(trajs), **stats}
            row["tokens_per_s"] = sum(t.n_generated for t in trajs) / max(rollout_s, 1e-9)
            row.update(clock.split(rollout_s, stats["train_tokens"]))
            row["epoch"] = self.epoch
            with open(self.metrics_path, "a") as f:
                f.write(json.dumps(row) + "\n")
            self._commit()
        return row

    def _write_rollouts(self, groups: list[list[Trajectory]]) -> None:
        """A sample of the step's episode records (``log.rollouts_per_step``), one per group first, as
        ``RUN/rollouts/step_NNNNNN.jsonl`` (a replayed step after ``--resume`` rewrites its file)."""
        n = self.cfg.log.rollouts_per_step
        if n == 0:
            return
        size = max((len(g) for g in groups), default=0)
        ordered = [g[i] for i in range(size) for g in groups if i < len(g)]  # one per group, then the next
        chosen = [t for t in (ordered if n < 0 else ordered[:n]) if t.record is not None]
        folder = self.out / "rollouts"
        folder.mkdir(exist_ok=True)
        rows = [{"id": f"{t.sample_id}@{self.step}.{k}", "episode": {**t.record, "step": self.step}} for k, t in enumerate(chosen)]
        storage.write_text_atomic(folder / f"step_{self.step:06d}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))

    def collect(self) -> list[list[Trajectory]]:
        """The next ``prompts_per_step`` prompts, each played ``group_size`` times (same sample and epoch, so
        the same gated K), all at once: one batched generation per turn for the whole step."""
        cfg = self.cfg
        self.policy.model.eval()
        size = cfg.rollout.group_size
        prompts = self.next_prompts(cfg.rollout.prompts_per_step)
        options = [{"sample": self.samples[index], "epoch": epoch} for index, epoch in prompts for _ in range(size)]
        trajs = run_batch(self.envs, self.policy, options)
        return [trajs[k * size : (k + 1) * size] for k in range(len(prompts))]

    def update(self, groups: list[list[Trajectory]], *, apply: bool = True, clock: StepClock | None = None) -> dict[str, float]:
        """One PPO-clipped optimiser step on the groups' trajectories (rewards already in them); returns the
        mean loss, KL, clip fraction and entropy over the trained trajectories and ``train_tokens``, the tokens
        of the sequences forwarded and backwarded. With ``apply=False`` only the gradients are computed
        (``_apply_gradients`` takes the step, inside ``rl_step``'s commit section). ``clock`` is charged with the
        frozen reference's forward passes (``StepClock.reference``)."""
        cfg = self.cfg
        clock = clock or StepClock(self.policy.device)
        step, cap = max(1, cfg.optim.micro_batch), cfg.optim.micro_batch_tokens

        # The loss reads generated positions only: the others' logits are never computed (sub-agent turns
        # included); a group's rollouts share their prompt, which each pass computes once (``shared_prefix``; not for a
        # gradient-checkpointed model in training, which keeps no cache).
        trained = [x for g in groups for tr in g for x in (tr, *tr.subagent_trajectories)]
        masks = {id(tr.encoded): tr.loss_mask for tr in trained}
        reference_vision = VisionCache(self._reference())  # the frozen tower's features, shared by the step's passes
        computed: dict[int, torch.Tensor] = {}  # the reference's log-probs of each sequence, computed once per step

        def score(encoded: list, model: Any = None, vision: Any = None) -> list[torch.Tensor]:
            out: list[torch.Tensor | None] = [None] * len(encoded)
            for rows, prefix in prompt_groups(self.policy, encoded, [masks[id(e)] for e in encoded], max_rows=step, max_tokens=cap):
                seqs = [encoded[i] for i in rows]
                picks = [loss_positions(masks[id(e)]) for e in seqs]
                # a gradient-checkpointed model in training keeps no cache: its rows are scored whole
                shared = prefix and shares_prefix(self.policy.model if model is None else model)
                lps = (shared_prefix_logprobs(self.policy, seqs, prefix, picks, model=model, vision=vision) if shared else
                       self.policy.batch_logprobs(seqs, model=model, micro_batch=step, max_tokens=cap, scored=picks, vision=vision))  # fmt: skip
                for i, lp in zip(rows, lps, strict=True):
                    out[i] = lp
            return out  # type: ignore[return-value]

        forwards = OneForwardAtATime()  # the pipelined update's threads: one pass of a model at a time

        def reference_logprobs(encoded: list) -> list[torch.Tensor]:  # the KL in the reward's form needs them first
            todo = [e for e in encoded if id(e) not in computed]
            if todo:
                with forwards.of(self._reference()), torch.no_grad(), clock.reference():
                    computed.update({id(e): lp for e, lp in zip(todo, score(todo, self._reference(), reference_vision), strict=True)})
            return [computed[id(e)] for e in encoded]

        units = training_units(groups, cfg, reference_logprobs)
        kl_in_loss = cfg.grpo.kl_coef > 0 and not kl_in_reward(cfg)  # in the reward form it is in the advantages

        # Update: one PPO-clipped step, forward/backward by chunks: a prompt's rollouts together, its prompt once
        # (``optim.micro_batch`` rows, ``optim.micro_batch_tokens`` tokens), the rest alone; two chunks at a time
        # where a core is free (``pipelined_update``: the same gradients, added in chunk order).
        chunks = [[units[i] for i in rows] for rows, _prefix in prompt_groups(
            self.policy, [u.trajectory.encoded for u in units], [u.trajectory.loss_mask for u in units],
            max_rows=step, max_tokens=cap)]  # fmt: skip

        def chunk_loss(k: int) -> tuple[torch.Tensor, dict[str, list[float]]]:
            """Chunk k's loss (the sum of its units' weighted losses) and its units' statistics."""
            chunk = chunks[k]
            encoded = [u.trajectory.encoded for u in chunk]
            with forwards.of(self.policy.model):
                logps = score(encoded)
            refs = reference_logprobs(encoded) if cfg.grpo.kl_coef > 0 else [None] * len(chunk)
            total = torch.zeros((), device=logps[0].device)
            part: dict[str, list[float]] = {key: [] for key in UPDATE_STATS}
            for unit, logp, ref in zip(chunk, logps, refs, strict=True):
                tr = unit.trajectory
                mask = torch.tensor(tr.loss_mask[1:], dtype=torch.float32, device=logp.device)
                old = torch.tensor(tr.logprobs[1:], dtype=torch.float32, device=logp.device)
                adv = unit.advantages.to(logp.device)
                loss, diag = clipped_policy_loss(logp, old, adv, mask, cfg.grpo.eps_clip, cfg.grpo.eps_clip_high, cfg.grpo.is_cap)
                kl = torch.zeros((), device=logp.device)
                if ref is not None:
                    kl = masked_mean(kl_penalty(logp, ref, cfg.grpo.kl_estimator), mask)
                    if kl_in_loss:
                        loss = loss + cfg.grpo.kl_coef * kl
                total = total + unit.weight * loss
                part["loss"].append(float(loss.detach()))
                part["kl"].append(float(kl.detach()))
                part["clip_fraction"].append(diag["clip_fraction"])
                part["entropy"].append(float(-masked_mean(logp.detach(), mask)))  # sampled-token estimate
            return total, part

        self.policy.model.train()
        self.optimizer.zero_grad()
        if pipelines(self.policy.device):  # a chunk's backward pass beside the next chunk's forward passes
            parts = pipelined_gradients(chunk_loss, len(chunks), [p for p in self.policy.model.parameters() if p.requires_grad])
        else:
            parts = []
            for k in range(len(chunks)):
                total, part = chunk_loss(k)
                total.backward()
                parts.append(part)
        self.policy.model.eval()
        if apply:
            self._apply_gradients()
        stats = {key: [x for part in parts for x in part[key]] for key in UPDATE_STATS}
        means = {k: (statistics.fmean(v) if v else 0.0) for k, v in stats.items()}
        return {**means, "train_tokens": sum(len(u.trajectory.encoded.input_ids) for u in units)}

    def _apply_gradients(self) -> None:
        optimizer_step(self.policy.model, self.optimizer, self.cfg.optim.grad_clip)

    def _reference(self):
        """The frozen initial policy (after the cold start), for the KL penalty."""
        if self.ref_model is None:
            self.ref_model = copy.deepcopy(self.policy.model).eval()
            for p in self.ref_model.parameters():
                p.requires_grad_(False)
        return self.ref_model

    # -- checkpoints (the files: ``paravt.learners.checkpoint``) -------------------------------------------
    def _save_model(self, target: Path, source: Path | None) -> None:
        checkpoint.save_model(self.policy.model, target, source, self.cfg)

    def _model_source(self) -> Path | None:
        """Where the tokenizer and processor files a saved model copies come from."""
        source = self.ckpt / "model" if self.resumed and (self.ckpt / "model").is_dir() else self.base_path
        if source is None and self.from_coldstart:
            source = self.out / "coldstart" / "model"
        return source

    def save(self) -> None:
        """The model, optimiser, RNG and data position of the last completed step, swapped in atomically."""
        state = {k: v for k, v in self._committed.items() if k != "rng"}
        source = self._model_source()
        checkpoint.save(self.out, state, checkpoint.training_files(self.policy.model, self.optimizer, self.ref_model,
                                                                   self._committed["rng"], source, self.cfg))  # fmt: skip
        self.resumed = True

    def _load_state(self) -> None:
        state, extra, reference = checkpoint.load(self.ckpt)
        self.step, self.epoch, self.cursor, self.order = state["step"], state["epoch"], state["cursor"], state["order"]
        self.optimizer.load_state_dict(extra["optimizer"])
        checkpoint.set_rng_states(extra)
        if reference is not None:
            self._reference().load_state_dict(reference)
        # Metrics after the checkpoint belong to steps that will be run again: drop them.
        if self.metrics_path.exists():
            rows = read_jsonl(self.metrics_path)
            keep = [r for r in rows if r["step"] <= self.step]
            self.metrics_path.write_text("".join(json.dumps(r) + "\n" for r in keep))

    # -- the run ------------------------------------------------------------------------------------------
    def train(self, steps: int | None = None) -> list[dict[str, Any]]:
        """Train up to step ``steps`` (default: the recipe's): the cold start first where the run has none, then RL
        steps from the run's current one. Returns the metrics rows of the steps trained by this call only (a
        resumed run's earlier rows stay in ``RUN/metrics.jsonl``): empty when the run was already there."""
        total = self.cfg.steps if steps is None else steps
        sinks = MetricSinks(self.cfg, self.out)  # fail before any work if a requested sink is missing
        if selects(self.cfg, total):  # the videos the run selects its checkpoint on, where it reaches a candidate
            write_validation(self.cfg, self.out, progress=self.progress)
        self.cold_start()
        if self.cfg.grpo.kl_coef > 0:
            self._reference()
        freeze_survivors()  # collected first; the per-step collection below then scans only what a step allocates
        release_free_memory()  # the cold start's examples and episodes are gone: give their pages back
        history = read_jsonl(self.metrics_path)  # the curves draw every step of the run
        rows: list[dict[str, Any]] = []  # the steps of this call
        bar = progress_bar(total, "train", self.progress, initial=self.step)
        curves = CurvesFile(self.out / "curves.png", self._sft_rows)
        try:
            self._validate()  # the step an interrupt stopped in its validation
            while self.step < total:
                raise_if_requested()  # a SIGTERM whose KeyboardInterrupt a finalizer swallowed
                row = self.rl_step()
                release_free_memory(collect=True)  # a step's trajectories (frames, activations) are freed by now
                rows.append(row)
                history.append(row)
                sinks.write(row)
                curves.after_step(history)
                if bar:
                    bar.update(1)
                    bar.set_postfix(reward=f"{row['reward_mean']:.2f}", fmt=f"{row['format_reward']:.2f}",
                                    kappa=f"{row['tool_calls_per_rollout']:.2f}")  # fmt: skip
                if self.step % self.cfg.save_every == 0:
                    self.save()
                    curves.draw(history)
                self._validate()
        except KeyboardInterrupt:
            logger.warning("interrupted during step %d: saving the checkpoint of step %d (the last completed one) "
                           "before exiting", self.step + 1, self.step)  # fmt: skip
            self.save()
            if rows:
                curves.draw(history)
            raise
        finally:
            thaw_survivors()
            if bar:
                bar.close()
            sinks.close()
        if rows or not self.resumed:  # a resumed run that trained nothing: its checkpoint is already this state
            self.save()
        if rows:
            curves.draw(history)  # the steps since the last drawing
        return rows

    def _validate(self) -> None:
        """The policy of this step as a candidate of the run's selection (``select``), where one is due and not yet
        scored: saved and evaluated on the validation split without touching the training RNGs."""
        if self.selection is None or not self.selection.due(self.step) or self.selection.done(self.step):
            return
        row, best = self.selection.evaluate(self.step, lambda target: self._save_model(target, self._model_source()))
        logger.info("step %d: validation accuracy %.3f (n %d); selected: step %d (%.3f)", row["step"], row["accuracy"],
                    row["n"], best["step"], best["accuracy"])  # fmt: skip

    def _sft_rows(self) -> list[dict[str, Any]]:
        path = self.out / "sft_metrics.jsonl"
        if not path.is_file():
            return []
        return read_jsonl(path)

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self._lock.release()
