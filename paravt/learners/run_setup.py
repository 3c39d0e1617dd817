"""What a training run is made of, before any step: its data (the training samples, the perception pool, the
held-out split and its recoloured copy, the validation split), its model path (a checkpoint, a hub id or the tiny model built
locally), and the env and reward configuration each algorithm trains under."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from paravt.evaluation.heldout import COUNTERFACTUAL_SPLIT, HELDOUT_SPLIT, VALIDATION_SPLIT
from paravt.learners.config import TrainConfig
from paravt.learners.selection import selects
from paravt_env import EnvConfig, load_samples
from paravt_env.paths import cache_root
from paravt_env.protocol import THINK_PREFIX


def synth_dir(synth) -> Path:
    """Cache directory of a synthetic dataset: named by everything that shapes its videos and questions."""
    qkey = hashlib.sha256(json.dumps(list(synth.question_kinds)).encode()).hexdigest()[:6]
    return cache_root() / f"synth_{synth.video_key()}_n{synth.n}_s{synth.seed}_q{qkey}"  # generate_dataset creates it


def build_videos(where: Path, synth, what: str, progress: bool):
    """``generate_dataset`` into ``where`` with a bar named ``what`` (and the job's ``[k/n]`` in a job), its new
    videos counted as the job's "videos" stage (``paravt.evaluation.progress``)."""
    from paravt.evaluation.progress import count_units, enter_stage, stage_label
    from paravt_env.data.synthetic import generate_dataset, missing_videos

    enter_stage("videos")
    todo = missing_videos(where, synth)
    samples = generate_dataset(where, synth, progress=progress, workers=2, desc=stage_label("videos", what))
    count_units("videos", todo)
    return samples


def resolve_data(cfg: TrainConfig, progress: bool = False):
    if cfg.data.path:
        return load_samples(cfg.data.path, video_root=cfg.data.video_root)
    synth = cfg.data.synth_config()
    return build_videos(synth_dir(synth), synth, "training videos", progress)


def resolve_perception_data(cfg: TrainConfig, progress: bool = False):
    """The perception stage's own pool of short synthetic videos (None: no stage, or real data)."""
    if cfg.perception.steps <= 0 or cfg.data.path:
        return None
    p = cfg.perception
    synth = cfg.data.synth_config(n=p.videos, seed=cfg.data.perception_seed, min_duration=p.min_duration,
                                  max_duration=p.max_duration)  # fmt: skip
    return build_videos(synth_dir(synth), synth, "perception videos", progress)


"""The held-out split's counterfactual copy (``write_heldout(..., counterfactual=True)``)."""


def write_heldout(cfg: TrainConfig, out: Path, *, counterfactual: bool = False, progress: bool = False):
    """The held-out split (``data.heldout_n`` videos of the training distribution, their own seed) in
    ``OUT/heldout`` (videos and samples.jsonl): never trained on, evaluated at the end of the run. With
    ``counterfactual``, the same videos with every needle recoloured (``SynthConfig.counterfactual``: time,
    place, size and shape kept) in ``OUT/heldout_counterfactual``: a policy that reads the pixels gives the new
    colour there, one that answers from memory or the text gives the old one."""
    if cfg.data.heldout_n <= 0 or cfg.data.path:
        return None
    synth = cfg.data.synth_config(n=cfg.data.heldout_n, seed=cfg.data.heldout_seed,
                                  counterfactual="colour" if counterfactual else "")  # fmt: skip
    return build_videos(out / (COUNTERFACTUAL_SPLIT if counterfactual else HELDOUT_SPLIT), synth,
                        "recoloured held-out videos" if counterfactual else "held-out videos", progress)  # fmt: skip


def write_validation(cfg: TrainConfig, out: Path, *, progress: bool = False):
    """The validation split (``data.validation_n`` videos of the training distribution, seed ``data.validation_seed``)
    in ``OUT/validation``, where the run selects its checkpoint on it (``select.every``; ``paravt.learners.selection``);
    None otherwise."""
    if not selects(cfg):
        return None
    synth = cfg.data.synth_config(n=cfg.data.validation_n, seed=cfg.data.validation_seed)
    return build_videos(out / VALIDATION_SPLIT, synth, "validation videos", progress)


def resolve_model_path(cfg: TrainConfig) -> Path | str:
    if cfg.model.path:
        path = Path(cfg.model.path).expanduser()
        # "org/name" is a hub id; an absolute or ./-relative path, or one with more parts, is a directory.
        local = path.is_absolute() or cfg.model.path.startswith((".", "~")) or len(path.parts) > 2
        if local and not path.is_dir():
            raise FileNotFoundError(f"model.path {cfg.model.path} is not a checkpoint directory (it does not exist)")
        return str(path) if local else cfg.model.path
    from paravt.policies.tiny_model import build_tiny_model

    size = cfg.model.size
    path = tiny_model_dir(cfg)
    if not (path / "tiny_model.json").is_file():
        # A published size is initialised where it will run (seconds on a GPU, minutes on 2 cores).
        device = "cpu" if size == "tiny" else _build_device(cfg.model.device)
        build_tiny_model(path, arch=cfg.model.tiny_arch, seed=0, overwrite=True, size=size, device=device)
    return path


def tiny_model_dir(cfg: TrainConfig) -> Path:
    """Where the random-weight model of a recipe without ``model.path`` is built once and cached."""
    from paravt.policies.tiny_model import BUILDER_VERSION

    size = cfg.model.size
    name = f"tiny_{cfg.model.tiny_arch}" if size == "tiny" else f"random_{cfg.model.tiny_arch}_{size}"
    return cache_root() / f"{name}_seed0_v{BUILDER_VERSION}"  # build_tiny_model creates it


def _build_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def env_config(cfg: TrainConfig) -> EnvConfig:
    """The rollouts' env: the recipe's ``env`` section with what the algorithm table sets (gating, reward, think
    prefix) and the run's seed. The launcher of every engine builds its env from this too."""
    algo = cfg.settings()
    # in sub-agent mode the recipe's sub-agent is PENDING_SUBAGENT: the rollouts attach the policy itself
    return dataclasses.replace(
        cfg.env, nframes_gating=algo.nframes_gating, gating_choices=cfg.para.gating_choices, seed=cfg.seed,
        reward=algo.reward, subagent=cfg.env.subagent if cfg.env.tool_result == "subagent" else None,
        response_prefix=THINK_PREFIX if algo.think_prefix else "",  # the reward scores generated text only
    )  # fmt: skip
