"""``TrainConfig``: a recipe, section by section. YAML recipes map 1:1 onto these dataclasses; an unknown key
is an error that names it. ``key=value`` overrides use dotted paths (``grpo.kl_coef=0``, ``steps=5``)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from paravt.learners.coldstart.perception import PerceptionConfig
from paravt.learners.grpo import GRPOConfig
from paravt.learners.para_grpo import Algorithm, ParaGRPOConfig, algorithm
from paravt_env import EnvConfig
from paravt_env.tools import PENDING_SUBAGENT

logger = logging.getLogger(__name__)

RECIPES_DIR = Path(__file__).parent / "recipes"


@dataclass
class ModelConfig:
    path: str | None = None
    """Checkpoint directory or hub id (the paper: an SFT cold-start checkpoint of Qwen3-VL-8B). None: the
    tiny local model, built into the cache if absent."""
    tiny_arch: str = "qwen3_vl"
    """Architecture of the tiny model when ``path`` is None."""
    size: str = "tiny"
    """Size of the random-weight model built locally when ``path`` is None: "tiny" (0.28 M parameters, the CPU
    default) or a published Qwen3-VL size, "2b" / "8b" (Qwen3-VL-2B / -8B-Instruct's config: 2.13 B / 8.77 B
    parameters, random weights; ``tiny_arch`` qwen3_vl): what a step costs at real size, on a GPU."""
    dtype: str = "fp32"
    """"fp32" or "bf16" (release: bf16)."""
    device: str = "cpu"
    """"cpu", "cuda" or "auto"."""
    gradient_checkpointing: bool = False
    """Trade compute for memory in the training forward pass (release: on)."""
    processor_min_pixels: int | None = None
    """Pixel budget of the policy's image processor, lower bound, applied to the frames the env hands it (already
    sampled at ``env.min_pixels``-``env.max_pixels``). None: the env's, so a frame reaches the model as the env
    sampled it. The release loads Qwen3-VL's processor with its own budget (``AutoProcessor.from_pretrained``
    without pixel arguments: ``shortest_edge`` 65,536), which upscales its 784-50,176-pixel frames to at least
    65,536 pixels (a 224x224 frame becomes 256x256: 64 visual tokens, not 49)."""
    processor_max_pixels: int | None = None
    """Upper bound of the same (None: ``env.max_pixels``; Qwen3-VL's own: 16,777,216)."""

    def __post_init__(self) -> None:
        check_choice("model.dtype", self.dtype, ("fp32", "bf16"))
        check_choice("model.tiny_arch", self.tiny_arch, ("qwen3_vl", "qwen2_5_vl"))
        if not (self.device in ("cpu", "cuda", "auto") or re.fullmatch(r"cuda:\d+", str(self.device))):
            raise ValueError(f"model.device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {self.device!r}")

    def processor_pixels(self, env_min: int, env_max: int) -> tuple[int, int]:
        """(min, max) pixels the policy's image processor runs at."""
        return (self.processor_min_pixels or env_min, self.processor_max_pixels or env_max)


@dataclass
class DataConfig:
    path: str | None = None
    """A samples file or directory (anything ``load_samples`` reads). None: synthetic videos generated into
    the cache if absent."""
    video_root: str | None = None
    """Where ``path``'s relative video paths live (the released RL parquet names them under its video root)."""
    synth_n: int = 12
    """Synthetic training videos."""
    synth_seed: int = 0
    """Seed of the training videos (the held-out split and the perception pool use their own seeds)."""
    min_duration: float = 30.0
    max_duration: float = 90.0
    size: int = 224
    """Frame side of the synthetic videos, pixels."""
    events: int = 0
    """Needles per video (0: the generator's default, 2-4)."""
    min_event_seconds: float = 2.0
    max_event_seconds: float = 6.0
    event_scale: tuple[float, float] = (0.25, 0.38)
    """Needle side over frame side, (min, max). A tiny policy sees large needles only (0.6-0.85)."""
    distractors: int = 3
    """Soft grey blobs per video (never saturated)."""
    question_kinds: tuple[str, ...] = ()
    """Question kinds (``paravt_env.data.synth_plan.KNOWN_KINDS``); empty: the default ones, all but the
    multi-event kinds."""
    task: str = "needle"
    """The synthetic task family (``paravt_env.data.synth_plan.TASKS``, as ``paravt synth --task``): "needle"
    (the generator's settings, shaped by ``events`` and ``question_kinds``), or a family that sets the question
    kinds and needles itself ("two_colours": both colours of two needles; "count": how many needles): its
    settings replace ``events`` and ``question_kinds``, with a warning where the recipe set them, so that
    ``paravt train --recipe tiny_cpu data.task=two_colours`` runs the main job's pipeline on the family."""
    heldout_n: int = 0
    """Videos of a held-out split from the same distribution (seed ``heldout_seed``), written to
    ``RUN/heldout`` and never trained on; the run ends by evaluating the policy on it. 0: none."""
    heldout_seed: int = 1000
    validation_n: int = 0
    """Videos of a validation split from the same distribution (seed ``validation_seed``), written to
    ``RUN/validation``: never trained on and never the held-out split; ``select`` picks the RL checkpoint the run
    reports by its accuracy there. 0: none."""
    validation_seed: int = 2000

    def __post_init__(self) -> None:
        from paravt_env.data.synth_plan import task_settings

        if self.task != "needle":
            settings = task_settings(self.task)  # an unknown task is refused here, naming the known ones
            replaced = [f"data.{k}={v!r}" for k, v in (("events", self.events), ("question_kinds", self.question_kinds)) if v]
            if replaced:
                logger.warning("data.task=%s sets the needles and question kinds (%s): %s not used", self.task,
                               ", ".join(f"{k}={v}" for k, v in settings.items()), " and ".join(replaced))  # fmt: skip

    @property
    def perception_seed(self) -> int:
        """Seed of the perception stage's own pool of videos: apart from the training videos' and the splits'."""
        return self.synth_seed + 500_000

    def synth_config(self, n: int | None = None, seed: int | None = None, **changes: Any):
        """The generator settings of these videos (``n``/``seed`` and any field overridden)."""
        from paravt_env.data.synth_plan import QUESTION_KINDS, SynthConfig, task_settings

        events = {"min_events": self.events, "max_events": self.events} if self.events else {}
        kinds = {"question_kinds": tuple(self.question_kinds) or QUESTION_KINDS}
        if self.task != "needle":
            kinds, events = task_settings(self.task), {}
        base = dict(
            n=self.synth_n if n is None else n, seed=self.synth_seed if seed is None else seed,
            min_duration=self.min_duration, max_duration=self.max_duration, size=self.size,
            min_event_seconds=self.min_event_seconds, max_event_seconds=self.max_event_seconds,
            event_scale_min=float(self.event_scale[0]), event_scale_max=float(self.event_scale[1]),
            distractors=self.distractors, **kinds, **events,
        )  # fmt: skip
        base.update(changes)
        return SynthConfig(**base)


@dataclass
class RolloutConfig:
    prompts_per_step: int = 2
    """Prompts per optimiser step (each played ``group_size`` times)."""
    group_size: int = 8
    """Rollouts per prompt (release: 8 samples per prompt)."""
    temperature: float = 0.7
    """Sampling temperature (release: 0.7)."""
    max_new_tokens: int = 2048
    """Tokens per turn (release: 2048)."""
    batch_tokens: int | None = None
    """Padded prompt tokens per generation batch (the step's prompts go longest first in batches under it;
    None: all in one). Bounds the memory of prefilling many long multi-turn prompts at once."""
    include_subagents: bool = False
    """In "subagent" mode, also train on the sub-agent's generations (with their episode's advantage). The
    release trains only the main agent."""


@dataclass
class OptimConfig:
    lr: float = 2e-6
    """AdamW learning rate (release: 2e-6)."""
    weight_decay: float = 0.01
    """AdamW weight decay (release: 0.01)."""
    grad_clip: float = 1.0
    """Max gradient norm (release: 1.0)."""
    micro_batch: int = 8
    """Trajectories per forward/backward pass of the RL update (right-padded together, similar lengths
    together; lower it for memory). The loss does not depend on it."""
    micro_batch_tokens: int | None = None
    """Also at most this many padded tokens per update pass (rows x longest; a longer trajectory goes alone).
    Attention memory grows with rows x length^2: multi-turn crop episodes are thousands of tokens. None: no cap."""


@dataclass
class SFTConfig:
    steps: int = 0
    """Cold-start SFT optimiser steps on teacher episodes before RL (0: start from ``model.path`` as is)."""
    lr: float = 5e-4
    """AdamW learning rate of the cold start."""
    episodes: int = 12
    """Teacher episodes generated for the cold start (over the training videos, each with a frame budget
    drawn from the gating choices, so the data holds answer-from-overview and parallel-crop episodes)."""
    batch: int = 1
    """Episodes per optimiser step (gradient accumulation); episodes are reshuffled every pass. With ``data``:
    packs per step (the release: ``per_device_train_batch_size`` 4 packed sequences per device)."""
    window: float = 20.0
    """Length of the teacher's coverage crops, seconds (``paravt.learners.coldstart.teacher``)."""
    rehearsal: int = 0
    """Perception examples added to every SFT step (when the perception stage ran): without them the
    episodes' text overwrites what the perception stage taught (held-out perception 0.9 -> 0.37 measured)."""
    frame_budgets: tuple[int, ...] = (4, 8, 16, 32, 64)
    """Overview budgets of the teacher episodes, drawn per episode by the gating hash. The paper's cold start
    is tool-use trajectories: small budgets make most episodes need the crops."""
    crop_rate: float = 1.0
    """Share of the teacher episodes whose overview misses the needle in which the teacher crops; in the others
    it says it saw nothing and guesses (a base model with a weak tool prior). 1.0: always crops. Below 1 the
    cold start leaves RL a decision to learn from reward alone, when to call the tool (``paravt.learners.coldstart.teacher``)."""
    check_rate: float = 0.0
    """Share of the teacher episodes whose overview shows the needle in which the teacher still crops around
    it to check before answering (``paravt.learners.coldstart.teacher.check_turn``): the strong tool prior of the paper's cold
    start, whose calls RL can drop where they are redundant (the Tool Prior Paradox). 0.0: answers directly."""
    recrop: bool = False
    """After crops that show no needle, with a turn left, the teacher crops again, its windows shifted by half
    the crop frames' spacing (``paravt.learners.coldstart.teacher.recrop_turn``), instead of answering. A 2-3 s
    event falls between the frames of a 60 s crop of 16 frames (one round showed it in 35 of 40 long videos,
    two rounds in 40 of 40)."""
    coverage: str = "widen"
    """How the teacher covers a video that needs more than ``env.max_parallel`` windows of ``window`` seconds.
    "widen": one round of ``max_parallel`` wider windows, whose bounds are the duration's fractions (the
    repro's long videos, one round). "continue": the first ``max_parallel`` windows, then, where they show no
    needle, the next ones in the next turn (``teacher.continue_turn``): every bound is a multiple of
    ``window`` whatever the duration, so a policy that learnt them crops videos longer than it trained on
    (trained on 30-90 s with "widen", the main job's policy wrote "I will inspect 0." on 135-180 s)."""
    guess_after_miss: bool = False
    """Where the last crops still show no needle, the teacher says so and guesses one of the answers the question
    kind has in the data (as the tool-shy teacher guesses), instead of dropping the episode (``TeacherMiss``,
    counted as ``dropped``)."""
    lr_schedule: str = "cosine"
    """"cosine" (decay to 0 after ``warmup_ratio`` of the steps of linear warm-up, the release's
    ``paravt/sft/configs/qwen3vl_8b.yaml``: ``lr_scheduler_type: cosine``) or "constant". Measured on
    ``tiny_cpu``: at a constant 1e-3 with 2 episodes a step the cold start ended wherever its last batches
    left it (p(crop) 0.10 for a teacher that cropped in 30 % of its misses)."""
    warmup_ratio: float = 0.05
    """Share of the steps with linear warm-up (release: 0.05)."""
    weight_decay: float = 0.0
    """AdamW weight decay of the cold start (release's SFT: 0.01; the CPU recipes train without)."""
    data: str | None = None
    """The released SFT data instead of teacher episodes: a parquet / JSON(L) file, folder or glob in
    lmms-engine's chat schema (``ParaVT/ParaVT-Parquet``, config ``sft``; ``paravt.learners.coldstart.release_sft``), as the
    release cold-starts ParaVT-8B (500 steps at lr 2e-5 there)."""
    data_limit: int | None = None
    """Use at most this many rows of ``data`` per pass, counted over the shards in that pass's order (None:
    all)."""
    video_root: str | None = None
    """Where the relative media paths of ``data`` (videos, frames) resolve first, before the data file's own
    folder (as ``data.video_root`` for the RL data)."""
    pack_tokens: int = 0
    """With ``data``: conversations packed greedily, in stream order, into packs of at most this many tokens
    (text and image tokens); a conversation longer than that alone is dropped and counted (the release:
    ``packing_length: 8192``, ``filter_overlong: true``). 0: one conversation per pack. ``data`` is streamed
    either way (``paravt.learners.coldstart.sft_stream``)."""
    save_every_s: float = 60.0
    """The cold-start loops (perception, SFT) save their state at most this often, in seconds, besides at the
    end of each stage and on Ctrl-C / SIGTERM (``paravt.learners.coldstart.store``): raise it for large models, whose
    optimiser state takes long to write."""

    def __post_init__(self) -> None:
        check_choice("sft.coverage", self.coverage, ("widen", "continue"))
        check_choice("sft.lr_schedule", self.lr_schedule, ("cosine", "constant"))



@dataclass
class SelectConfig:
    """Which RL checkpoint a run reports (``paravt.learners.selection``): the one that scored best on the validation
    split, so that its figures do not depend on the step at which the run stops (one main-job seed of four
    read 0.975 held out at step 70 and 0.750 at step 80)."""

    every: int = 0
    """Evaluate the policy greedily on ``RUN/validation`` (``data.validation_n`` videos) every this many RL steps and
    keep the best-scoring weights as the run's selected checkpoint (``RUN/select``), evaluated held out beside the
    last step's. 0: off; the run reports its last step."""
    after: int = 0
    """The first RL step that is a candidate (earlier policies are not evaluated)."""


@dataclass
class LogConfig:
    tensorboard: bool = False
    """Also write every metric to TensorBoard (``RUN/tensorboard``; needs ``pip install tensorboard``)."""
    wandb_project: str | None = None
    """Also log to this Weights & Biases project (needs ``pip install wandb`` and a login)."""
    rollouts_per_step: int = 2
    """Episode records of this many rollouts per RL step (one per prompt group first) written to
    ``RUN/rollouts/step_NNNNNN.jsonl`` (``paravt_env.records``; ``paravt view RUN`` draws them); 0: none,
    -1: every rollout."""


@dataclass
class TrainConfig:
    algorithm: str = "para_grpo"
    """A name of ``para_grpo.ALGORITHMS``: "para_grpo" or "grpo" (vanilla: RewardConfig.vanilla(), no gating, no
    think prefix)."""
    steps: int = 100
    save_every: int = 10
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    """The rollouts' env (any ``paravt_env.EnvConfig`` field but those ``ALGORITHM_KEYS`` names: the algorithm
    table and ``seed`` set them)."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    para: ParaGRPOConfig = field(default_factory=ParaGRPOConfig)
    perception: PerceptionConfig = field(default_factory=PerceptionConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    select: SelectConfig = field(default_factory=SelectConfig)
    log: LogConfig = field(default_factory=LogConfig)

    def __post_init__(self) -> None:
        self.settings()  # an unknown algorithm is an error that names the known ones

    def settings(self) -> Algorithm:
        """What this run's algorithm sets (gating, think prefix, anchoring granularity, reward):
        ``para_grpo.ALGORITHMS``, with ``grpo.tool_credit`` applied to whichever reward it chose."""
        algo = algorithm(self.algorithm, self.para)
        if self.grpo.tool_credit == algo.reward.tool_credit:
            return algo
        return dataclasses.replace(algo, reward=dataclasses.replace(algo.reward, tool_credit=self.grpo.tool_credit))

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["env"].pop("subagent", None)  # the policy itself, attached at run time: not a setting
        return out

    @property
    def think_prefix(self) -> bool:
        """Whether every response starts with a forced ``<think>\\n`` (PARA-GRPO's constrained opening; the
        release's vanilla GRPO has none). The prefix is prompt: the reward scores only what follows it."""
        return self.settings().think_prefix


ALGORITHM_KEYS = {"nframes_gating": "para.nframes_gating", "gating_choices": "para.gating_choices",
                  "reward": "algorithm, para.* and grpo.tool_credit", "response_prefix": "para.think_prefix", "seed": "seed (top level)",
                  "subagent": "nothing: the policy itself answers"}  # fmt: skip
"""``EnvConfig`` fields a recipe's ``env:`` section may not set, and where they are set instead."""


def _build(cls, data: dict[str, Any], where: str):
    if not isinstance(data, dict):
        raise ValueError(f"recipe section {where or 'top level'} must be a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if cls is EnvConfig:
        owned = sorted(set(data) & set(ALGORITHM_KEYS))
        if owned:
            raise ValueError(f"recipe key {where}{owned[0]} is set by the algorithm, not the env section: set "
                             f"{ALGORITHM_KEYS[owned[0]]}")  # fmt: skip
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"unknown recipe key(s) {[f'{where}{k}' for k in unknown]}; known in {where or 'top level'}: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in data.items():
        default = fields[name].default_factory() if fields[name].default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(default):
            kwargs[name] = _build(type(default), value or {}, f"{where}{name}.")
        else:
            kwargs[name] = _typed(value, hints[name], f"{where}{name}")
    if cls is EnvConfig and kwargs.get("tool_result") == "subagent":
        kwargs["subagent"] = PENDING_SUBAGENT  # the trainer attaches the policy itself
    try:
        return cls(**kwargs)
    except ValueError as exc:  # the dataclass's own checks (EnvConfig's), naming the section
        raise ValueError(f"recipe section {where.rstrip('.') or 'top level'}: {exc}") from None


def _typed(value: Any, hint: Any, key: str) -> Any:
    """``value`` checked against the field's annotation (lists become tuples): a wrong type is an error naming
    the key, the type expected and the value, before any work starts."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _typed(value, arg, key)
            except ValueError as exc:
                errors.append(exc)
        raise errors[0]
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"recipe key {key} must be a list ({_name(hint)}), got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_typed(v, args[0], key) for v in value)
        if len(value) != len(args):
            raise ValueError(f"recipe key {key} must hold {len(args)} values ({_name(hint)}), got {value!r}")
        return tuple(_typed(v, a, key) for v, a in zip(value, args, strict=True))
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:  # an int is a float here; kept as written (cache keys hash the values as given)
        if isinstance(value, str):  # YAML 1.1 reads "1e-3" (no dot) as a string
            with contextlib.suppress(ValueError):
                value = float(value)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif hint is str:
        ok = isinstance(value, str)
    else:  # Any and anything else: left to the dataclass
        ok = True
    if not ok:
        raise ValueError(f"recipe key {key} must be {_name(hint)}, got {value!r} ({type(value).__name__})")
    return value


def _name(hint: Any) -> str:
    if typing.get_origin(hint) is None and hasattr(hint, "__name__"):
        return hint.__name__
    return str(hint).replace("typing.", "")


def check_counts(cfg: TrainConfig) -> None:
    """Counts that cannot be negative (or zero) are refused, naming the key."""
    rules = {"steps": (cfg.steps, 0), "save_every": (cfg.save_every, 1), "sft.steps": (cfg.sft.steps, 0),
             "sft.episodes": (cfg.sft.episodes, 0), "sft.batch": (cfg.sft.batch, 1),
             "perception.steps": (cfg.perception.steps, 0), "perception.batch": (cfg.perception.batch, 1),
             "perception.closeups": (cfg.perception.closeups, 0),
             "rollout.group_size": (cfg.rollout.group_size, 1), "rollout.prompts_per_step": (cfg.rollout.prompts_per_step, 1),
             "rollout.max_new_tokens": (cfg.rollout.max_new_tokens, 1), "env.frame_budget": (cfg.env.frame_budget, 1),
             "env.max_turns": (cfg.env.max_turns, 1), "optim.micro_batch": (cfg.optim.micro_batch, 1), "env.max_parallel": (cfg.env.max_parallel, 1)}  # fmt: skip
    from paravt.policies.tiny_model import SIZES

    if cfg.model.size not in SIZES:
        raise ValueError(f"recipe key model.size must be one of {', '.join(SIZES)}, got {cfg.model.size!r}")
    if cfg.model.size != "tiny" and cfg.model.tiny_arch != "qwen3_vl":
        raise ValueError(f"recipe key model.size {cfg.model.size!r} is a Qwen3-VL size: model.tiny_arch must be qwen3_vl")
    for key, (value, least) in rules.items():
        if value < least:
            raise ValueError(f"recipe key {key} must be at least {least}, got {value}")
    for key, value in (("select.every", cfg.select.every), ("select.after", cfg.select.after),
                       ("data.validation_n", cfg.data.validation_n)):  # fmt: skip
        if value < 0:
            raise ValueError(f"recipe key {key} must be at least 0, got {value}")
    if cfg.select.every and cfg.data.validation_n == 0 and not cfg.data.path:
        raise ValueError("recipe key select.every needs a validation split: data.validation_n > 0 videos of the "
                         "synthetic training distribution")  # fmt: skip
    if cfg.select.every and cfg.data.validation_seed in (cfg.data.heldout_seed, cfg.data.synth_seed, cfg.data.perception_seed):
        raise ValueError(f"recipe key data.validation_seed ({cfg.data.validation_seed}) must differ from "
                         "data.heldout_seed, data.synth_seed and the perception pool's: the validation videos would be held-out or training videos")  # fmt: skip
    if not 0.0 <= cfg.sft.crop_rate <= 1.0:
        raise ValueError(f"recipe key sft.crop_rate must lie in [0, 1], got {cfg.sft.crop_rate}")
    if cfg.log.rollouts_per_step < -1:
        raise ValueError(f"recipe key log.rollouts_per_step must be -1 (all), 0 (none) or more, got {cfg.log.rollouts_per_step}")
    if not 0.0 <= cfg.sft.check_rate <= 1.0:
        raise ValueError(f"recipe key sft.check_rate must lie in [0, 1], got {cfg.sft.check_rate}")
    if cfg.sft.coverage not in ("widen", "continue"):
        raise ValueError(f"recipe key sft.coverage must be 'widen' or 'continue', got {cfg.sft.coverage!r}")
    for key, value in (("rollout.batch_tokens", cfg.rollout.batch_tokens), ("optim.micro_batch_tokens", cfg.optim.micro_batch_tokens)):
        if value is not None and value < 1:
            raise ValueError(f"recipe key {key} must be at least 1 (or null: no cap), got {value}")
    if cfg.sft.weight_decay < 0:
        raise ValueError(f"recipe key sft.weight_decay must be >= 0, got {cfg.sft.weight_decay}")
    if not 0.0 <= cfg.sft.warmup_ratio < 1.0:
        raise ValueError(f"recipe key sft.warmup_ratio must lie in [0, 1), got {cfg.sft.warmup_ratio}")
    from paravt.learners.coldstart.sft import SCHEDULES

    if cfg.sft.lr_schedule not in SCHEDULES:
        raise ValueError(f"recipe key sft.lr_schedule must be one of {', '.join(SCHEDULES)}, got {cfg.sft.lr_schedule!r}")


def check_choice(key: str, value: Any, choices: tuple[str, ...]) -> None:
    """An enumerated setting is one of its values (a typo such as ``model.dtype=fp8`` would otherwise fall through
    to a default branch and run another configuration without a word)."""
    if value not in choices:
        raise ValueError(f"{key} must be one of {list(choices)}, got {value!r}")


def _parse_value(text: str) -> Any:
    """An override's value: numbers (``3e-3`` included, which YAML 1.1 reads as a string), else YAML."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return yaml.safe_load(text) if text != "" else ""


def read_yaml(path: Path) -> dict[str, Any]:
    """A recipe file's mapping; a YAML error (a tab indent, an unclosed bracket) names the file, line and column."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ValueError(f"{path}{where}: not valid YAML ({problem})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a recipe is a mapping of sections (model:, rollout:, ...), got a YAML {type(data).__name__}")
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str] | None) -> None:
    """``key=value`` overrides (dotted keys, YAML values) written into a recipe's mapping, in place."""
    for item in overrides or []:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not key=value")
        key, value = item.split("=", 1)
        try:
            parsed = _parse_value(value)
        except yaml.YAMLError as exc:
            raise ValueError(f"override {item!r}: its value is not valid YAML ({getattr(exc, 'problem', exc)})") from None
        node = data
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ValueError(f"override {item!r}: {'.'.join(parts[:-1])} is a value, not a section")
        node[parts[-1]] = parsed


def load_run_config(run: str | Path, overrides: list[str] | None = None) -> TrainConfig:
    """A run's own settings (``RUN/config.json``, as the run wrote them), with ``key=value`` overrides: what
    ``paravt train --out RUN --resume`` continues under when no recipe is named. The env keys the algorithm sets
    (``ALGORITHM_KEYS``) are left out of the file's env section and set again by the algorithm, as they were."""
    from paravt_env.storage import read_json

    path = Path(run) / "config.json"
    data = read_json(path)  # a damaged file is named, never overwritten
    if not isinstance(data, dict) or not isinstance(data.get("env"), dict):
        raise ValueError(f"{path} is not a paravt train run's settings (no env section)")
    for key in ALGORITHM_KEYS:
        data["env"].pop(key, None)
    apply_overrides(data, overrides)
    try:
        cfg = _build(TrainConfig, data, "")
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    check_counts(cfg)
    return cfg


def load_recipe(name_or_path: str, overrides: list[str] | None = None) -> TrainConfig:
    """A recipe by name (``paravt/learners/recipes/NAME.yaml``) or path, with ``key=value`` overrides."""
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        path = RECIPES_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))
        raise FileNotFoundError(f"no recipe {name_or_path!r} (not a file, not one of {known})")
    data = read_yaml(path)
    apply_overrides(data, overrides)
    cfg = _build(TrainConfig, data, "")
    check_counts(cfg)
    return cfg
