"""The wheels carried to the lent GPU machine (``requirements/gpu-carry.txt``, installed there with ``--no-deps``)
plus its image's packages (``benchmarks/gpu/image_packages.txt``) must hold everything they need: the second GPU
session lost every server test to FastAPI 0.165's new dependency (opentelemetry-api), carried by no one."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest

packaging = pytest.importorskip("packaging")
from packaging.requirements import Requirement  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
# OpenRLHF is carried for the episode phase alone, which imports its few pure-Python modules; its own requirements
# (DeepSpeed, Ray, vLLM, flash-attn) cannot install there (docs/gpu.md).
NOT_CLOSED = {"openrlhf"}
# The machine's interpreter (docs/gpu.md, "The first GPU session")
THERE = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux", "platform_system": "Linux",
         "platform_machine": "x86_64", "os_name": "posix", "implementation_name": "cpython", "extra": ""}  # fmt: skip


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements" / "gpu-carry.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"requirements/gpu-carry.txt: {line!r} is not pinned (name==version)"
            pins[_name(name)] = version
    return pins


def test_the_carried_wheels_and_the_image_hold_every_requirement():
    pins = _pins()
    image = {_name(x) for x in (ROOT / "benchmarks" / "gpu" / "image_packages.txt").read_text().split() if not x.startswith("#")}
    checked, missing = [], []
    for name, version in pins.items():
        if name in NOT_CLOSED:
            continue
        try:
            if metadata.version(name) != version:
                continue  # another version here: its requirements are not the carried one's
        except metadata.PackageNotFoundError:
            continue
        checked.append(name)
        for text in metadata.requires(name) or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(THERE):
                continue  # an extra, or for another interpreter
            if _name(req.name) not in pins and _name(req.name) not in image:
                missing.append(f"{name}=={version} needs {req}")
    if not checked:
        pytest.skip("none of the carried versions is installed here, so their requirements cannot be read")
    assert not missing, "carry these too (requirements/gpu-carry.txt): " + "; ".join(missing)
