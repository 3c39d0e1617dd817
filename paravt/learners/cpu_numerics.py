"""The same floats on every x86-64 CPU: torch's and MKL's vector code pinned to AVX2.

On a CPU, torch picks its vectorised kernels (``exp``, ``softmax``, reductions) by the widest instruction set the
machine has (AVX-512 here, AVX2 on an older machine), MKL picks its matrix-multiply code path the same way, and
oneDNN's convolutions (Qwen-VL's patch embedding) pick kernels by instruction set and cache sizes. Each path
rounds differently in the last bits. Measured on the main job: three RL steps from one cold start
give other losses and entropies from step 1 under each of torch's and MKL's choices; a sampled rollout then
draws another token wherever a uniform draw falls between the two roundings, and the run takes another path.
That is why the main job repeated its own numbers on one machine and not on another of the same kind.

``pin_cpu_numerics`` (called by ``set_torch_threads``, so by every entry point that runs a model) sets
``ATEN_CPU_CAPABILITY=avx2`` and ``MKL_CBWR=AVX2`` (MKL's conditional numerical reproducibility) where they are
unset, and turns oneDNN off (torch's own convolution runs instead). Every x86-64 machine with AVX2 (any made
since 2013) then computes the same floats for the same thread count. ``PARAVT_NATIVE_NUMERICS=1`` leaves
torch's own choice (faster where AVX-512 pays; not comparable across machines). Both variables must be read
before torch's first vectorised operation and MKL's first call: a process that computed something earlier keeps
what it had, and this says so.
"""

from __future__ import annotations

import json
import logging
import os
import platform
from pathlib import Path
from typing import Any

PINS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}
"""What is pinned, where the environment does not set it already."""
OPT_OUT = "PARAVT_NATIVE_NUMERICS"
"""Set to 1: leave torch's and MKL's choice of vector code as they make it."""

logger = logging.getLogger(__name__)


def _x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def pin_cpu_numerics() -> dict[str, Any]:
    """Pin torch's and MKL's CPU vector code to AVX2 and turn oneDNN off (x86-64 only, unless opted out); returns
    what is in force (``numerics_record``)."""
    import torch

    from paravt_env.environ import flag

    if _x86() and not flag(OPT_OUT):
        for name, value in PINS.items():
            os.environ.setdefault(name, value)
        torch.backends.mkldnn.enabled = False
        capability = torch.backends.cpu.get_cpu_capability()
        if capability != PINS["ATEN_CPU_CAPABILITY"].upper() and os.environ["ATEN_CPU_CAPABILITY"] == "avx2":
            logger.warning("torch computes with %s kernels, not AVX2: it ran a vectorised operation before the "
                           "pin, or this CPU lacks AVX2; its floats may differ from another machine's", capability)  # fmt: skip
    return numerics_record()


def numerics_record() -> dict[str, Any]:
    """What decides a CPU run's floats besides its inputs: the kernels torch and MKL use, oneDNN, the thread count,
    the versions and the processor (written beside a run, so that two machines' runs can be compared)."""
    import torch

    return {
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl_cbwr": os.environ.get("MKL_CBWR"),
        "onednn": bool(torch.backends.mkldnn.enabled),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "processor": _processor_name(),
    }


def _processor_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


NUMERICS_FILE = "numerics.json"
COMPARED = ("cpu_capability", "mkl_cbwr", "onednn", "threads", "torch")
"""What must match for a resumed run to continue on the same floats (the processor's name may differ)."""


def record_numerics(run: str | Path, resume: bool) -> dict[str, Any]:
    """Write ``RUN/numerics.json`` (``numerics_record``); on resume, first warn of every setting that differs from
    the one the run started with (it continues, on other floats from here on). A record that cannot be read
    (not JSON, not an object) stops the resume with a ``DamagedFile`` naming it, and is left as it is: it is the
    only witness of the numerics the run started with."""
    from paravt_env.storage import DamagedFile, read_json

    path = Path(run) / NUMERICS_FILE
    now = numerics_record()
    if resume and path.is_file():
        try:
            before = read_json(path)
        except DamagedFile as exc:
            raise DamagedFile(f"{exc}: it records the CPU numerics the run started with, and is kept as it is; move it "
                              "aside to resume without that check") from None  # fmt: skip
        changed = [f"{k} {before.get(k)!r} -> {now[k]!r}" for k in COMPARED if before.get(k, now[k]) != now[k]]
        if changed:
            logger.warning("%s was started with other CPU numerics (%s): the resumed run computes other floats from "
                           "here on, and will not repeat an uninterrupted one", run, "; ".join(changed))  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(now, indent=2) + "\n")
    return now
