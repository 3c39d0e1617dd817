"""The label of an OpenRLHF prompt row: the sample and the env it is played in, as one JSON string.

OpenRLHF hands each rollout actor a prompt row's ``label`` and instantiates the agent executor with no
arguments, in a Ray actor that does not inherit the driver's environment variables nor its working directory. So
the env's options travel in the label, beside the sample: ``{"sample": {...VideoQASample...}, "env": {...EnvConfig
fields...}, "epoch": 0, "processor_pixels": [min, max]}`` (written by ``paravt export openrlhf --recipe``). A label
without the sample and the env is refused: falling back to ``EnvConfig()`` defaults would train without gating, in
another tool mode, without the think prefix.

The sample's files (``video_path``, ``extra["subtitle_path"]``) are written absolute, resolved where the label is
made: a rollout actor runs in whatever directory its Ray node was started from (``ray start --head`` elsewhere,
another node), where a path relative to the exporter's directory names nothing or another file. A label with a
relative path is refused by name; a node that does not see the file at that path (no shared filesystem, another
mount point) fails with the sample, the field and the node named.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from typing import Any

KEYS = ("sample", "env", "epoch", "processor_pixels")
FILE_FIELDS = ("video_path", "extra.subtitle_path")
"""The sample's fields that name files the rollout actor opens."""


@dataclass(frozen=True)
class Label:
    """A label read back: the sample, the env options, the epoch (nFrames Gating's draw) and the (min, max) pixels
    the local trainer's image processor runs at for this recipe (None: the env's ``min_pixels``/``max_pixels``)."""

    sample: Any
    env: dict[str, Any]
    epoch: int
    processor_pixels: tuple[int, int] | None

    def pixels(self) -> tuple[int, int]:
        """The (min, max) pixel budget every frame of this label is given to the policy at."""
        if self.processor_pixels is not None:
            return self.processor_pixels
        from paravt_env import EnvConfig

        defaults = EnvConfig()
        return int(self.env.get("min_pixels", defaults.min_pixels)), int(self.env.get("max_pixels", defaults.max_pixels))


def _absolute(path: str) -> str:
    """``path`` made absolute against this process's working directory (``~`` and ``file://`` understood)."""
    return os.path.abspath(os.path.expanduser(str(path).removeprefix("file://")))


def make_label(sample: Any, options: dict[str, Any], epoch: int = 0,
               processor_pixels: tuple[int, int] | None = None) -> str:  # fmt: skip
    """The label of ``sample`` (a ``VideoQASample`` or its dict) played with the env ``options`` at ``epoch``
    (nFrames Gating's draw: every rollout of the prompt gets the same K), its files made absolute here;
    ``processor_pixels``: the recipe's (min, max) image-processor budget (``ModelConfig.processor_pixels``)."""
    data = sample.to_dict() if hasattr(sample, "to_dict") else dict(sample)
    data = {**data, "video_path": _absolute(data["video_path"])}
    extra = dict(data.get("extra") or {})
    if extra.get("subtitle_path"):
        data["extra"] = {**extra, "subtitle_path": _absolute(extra["subtitle_path"])}
    label: dict[str, Any] = {"sample": data, "env": dict(options), "epoch": int(epoch)}
    if processor_pixels is not None:
        lo, hi = processor_pixels
        label["processor_pixels"] = [int(lo), int(hi)]
    return json.dumps(label)


def parse_label(label: Any) -> Label:
    """A label read back; a clear error for one that is not ours or that names a file by a relative path."""
    from paravt_env import VideoQASample

    try:
        data = json.loads(label) if isinstance(label, (str, bytes)) else dict(label)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"an OpenRLHF label must be the JSON written by `paravt export openrlhf`: {exc}") from None
    if not isinstance(data, dict) or not {"sample", "env"} <= set(data):
        keys = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"this OpenRLHF label has {keys}, not the sample and its env options ('sample', 'env'): "
                         "write the prompts with `paravt export openrlhf --recipe NAME` (labels of older exports "
                         "carried the sample alone, and the env fell back to its defaults)")  # fmt: skip
    if not isinstance(data["env"], dict):
        raise ValueError(f"the label's 'env' must be an object of EnvConfig fields, not {type(data['env']).__name__}")
    sample = VideoQASample.from_dict(data["sample"])
    for name, path in _files(sample):
        if not os.path.isabs(os.path.expanduser(path)):
            raise ValueError(f"the label of sample {sample.id!r} names its file by a relative path (field "
                             f"'sample.{name}': {path!r}): a rollout actor resolves it against its own working "
                             f"directory, not the exporter's; write the prompts again with `paravt export openrlhf` "
                             "(it writes absolute paths)")  # fmt: skip
    pixels = data.get("processor_pixels")
    if pixels is not None and not (isinstance(pixels, list) and len(pixels) == 2 and all(isinstance(p, int) for p in pixels)):
        raise ValueError(f"the label of sample {sample.id!r}: 'processor_pixels' must be [min, max] pixels, not {pixels!r}")
    return Label(sample, dict(data["env"]), int(data.get("epoch", 0)), tuple(pixels) if pixels else None)


def read_label(label: Any) -> tuple[Any, dict[str, Any], int]:
    """``(VideoQASample, env options, epoch)`` of a label; a clear error for one that is not ours."""
    parsed = parse_label(label)
    return parsed.sample, parsed.env, parsed.epoch


def _files(sample: Any) -> list[tuple[str, str]]:
    """``(field, path)`` of every file the sample names."""
    out = [("video_path", sample.video_path)]
    if sample.extra.get("subtitle_path"):
        out.append(("extra.subtitle_path", str(sample.extra["subtitle_path"])))
    return out


def check_files(sample: Any) -> None:
    """Fail, naming the sample, the field, the path and this node, where a file the sample names is not here."""
    for name, path in _files(sample):
        if not os.path.isfile(os.path.expanduser(path)):
            raise FileNotFoundError(f"sample {sample.id!r}: field 'sample.{name}' names {path!r}, which this rollout "
                                    f"actor (host {socket.gethostname()}, working directory {os.getcwd()}) cannot "
                                    "open: every node must see the videos at the path the export wrote (a shared "
                                    "filesystem, mounted at the same place)")  # fmt: skip
