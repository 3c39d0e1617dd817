"""The label of an OpenRLHF prompt row: the sample and the env it is played in, as one JSON string.

OpenRLHF hands each rollout actor a prompt row's ``label`` and instantiates the agent executor with no
arguments, in a Ray actor that does not inherit the driver's environment variables. So the env's options travel
in the label, beside the sample: ``{"sample": {...VideoQASample...}, "env": {...EnvConfig fields...},
"epoch": 0}`` (written by ``paravt export openrlhf --recipe``). A label without them is refused: falling back
to ``EnvConfig()`` defaults would train without gating, in another tool mode, without the think prefix.
"""

from __future__ import annotations

import json
from typing import Any

KEYS = ("sample", "env", "epoch")


def make_label(sample: Any, options: dict[str, Any], epoch: int = 0) -> str:
    """The label of ``sample`` (a ``VideoQASample`` or its dict) played with the env ``options`` at ``epoch``
    (nFrames Gating's draw: every rollout of the prompt gets the same K)."""
    data = sample.to_dict() if hasattr(sample, "to_dict") else dict(sample)
    return json.dumps({"sample": data, "env": dict(options), "epoch": int(epoch)})


def read_label(label: Any) -> tuple[Any, dict[str, Any], int]:
    """``(VideoQASample, env options, epoch)`` of a label; a clear error for one that is not ours."""
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
    return VideoQASample.from_dict(data["sample"]), dict(data["env"]), int(data.get("epoch", 0))
