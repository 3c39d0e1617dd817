"""The OpenRLHF backend: PARA-GRPO on Ray + vLLM + DeepSpeed, with this project's env, rewards, gating and
sub-agent dispatch plugged in through a custom agent executor (``agent_func.py``).

``run_local_episode`` runs that executor once against ``LocalEngine`` (the ``llm_engine.generate`` contract
served by a transformers model), with the processor OpenRLHF's own ``get_tokenizer`` loads: how the tests exercise
the integration without vLLM or GPUs, and ``alignment.check_alignment`` checks what it returns against one
teacher-forced forward pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def run_local_episode(
    model_dir: str | Path,
    sample: Any,
    *,
    temperature: float = 1.0,
    max_new_tokens: int = 128,
    max_length: int = 16384,
    engine: Any = None,
    device: str = "cpu",
    dtype: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Play one episode through ``AgentExecutor`` with the checkpoint in ``model_dir`` (loaded on ``device`` in
    ``dtype``); ``options`` are ``EnvConfig`` fields (plus ``epoch``, and ``processor_pixels``: the (min, max)
    pixels the local trainer's processor runs at, default the env's), carried in the label as OpenRLHF carries
    them. The executor gets the processor OpenRLHF's ``get_tokenizer`` loads for the checkpoint, as every GPU run
    does. ``engine``: an engine, or a callable that makes one from the policy (default ``LocalEngine``, which
    loads the policy at the checkpoint's own pixel budget, as vLLM does). Returns the executor's result dict."""
    import asyncio

    from openrlhf.utils.utils import get_tokenizer

    from paravt.learners.adapters.openrlhf.agent_func import AgentExecutor
    from paravt.learners.adapters.openrlhf.label import make_label
    from paravt.learners.adapters.openrlhf.local_engine import LocalEngine, SamplingParams
    from paravt.policies.hf import HFPolicy
    from paravt_env import VideoQASample

    policy = HFPolicy.from_pretrained(model_dir, device=device, dtype=dtype, temperature=temperature,
                                      max_new_tokens=max_new_tokens)  # fmt: skip
    processor = get_tokenizer(str(model_dir), None, "left")  # OpenRLHF's own: AutoProcessor for a VLM
    epoch = int(options.pop("epoch", 0))
    pixels = options.pop("processor_pixels", None)
    sample = sample if isinstance(sample, VideoQASample) else VideoQASample.from_dict(sample)
    label = make_label(sample, options, epoch, processor_pixels=pixels)
    executor = AgentExecutor()
    params = SamplingParams(temperature=temperature, max_tokens=max_new_tokens, logprobs=1)
    engine = engine(policy) if callable(engine) else (engine or LocalEngine(policy))
    return asyncio.run(executor.execute("", label, params, max_length, processor, engine))
