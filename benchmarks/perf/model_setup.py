"""What the model benchmarks share: one torch thread for a module's measurements, and the checkpoint they run on
(a run's, from an environment variable, else a tiny random-weight Qwen3-VL built once)."""

from __future__ import annotations

import os
from collections.abc import Iterator


def one_thread() -> Iterator[None]:
    """Body of a module fixture: torch at 1 thread for the module (the 2-core measurements' setting), then back."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def bench_checkpoint(tmp_path_factory, *variables: str) -> str:  # noqa: ANN001
    """The first of ``variables`` set in the environment (a checkpoint directory), else a tiny random model."""
    for name in variables:
        if os.environ.get(name):
            return os.environ[name]
    from paravt.policies.tiny_model import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("bench_model") / "model", arch="qwen3_vl", seed=0))
