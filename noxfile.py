"""Each engine's adapter tests in that engine's own environment, under the engine's own pins (and OpenEnv's own
client against ``paravt serve-env``).

    python -m nox -s engines            # all three, one virtualenv each (~20 min on 2 cores, first run)
    python -m nox -s "engine(name='verl')"   # one of them; -R reuses an existing virtualenv

An engine's virtualenv holds what the engine's users get: the engine with its own dependencies as its package
declares them (transformers included, so verl runs on verl's transformers and OpenRLHF on OpenRLHF's), the CPU
torch wheel, then this project with that engine's extra (``paravt-gym[verl]``...). Only the GPU-only parts are
left out, each named below with the reason; everything else the engine requires is installed, and torchvision (no wheel
loads beside the CPU torch) is the repository's stand-in, ``benchmarks/tvshim``. The tests then run
with ``PARAVT_ENGINE`` set: an engine test that cannot import its engine fails there instead of skipping.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["engines"]


@dataclass(frozen=True)
class Engine:
    requirement: str
    """The engine as its users install it."""
    pins: tuple[str, ...] = ()
    """What the engine's GPU extras pin besides it, kept here (verl's ``[vllm]`` / ``[sglang]`` / ``[cpu]`` extras
    all pin transformers 5.9.0: what a verl user actually runs)."""
    gpu_only: dict[str, str] = field(default_factory=dict)
    """Dependencies left out (name -> why): they build or load CUDA code only."""
    extra: str = ""
    """This project's extra for the engine (its dependencies must co-install with the engine's)."""
    tests: tuple[str, ...] = ()
    expected: dict[str, str] = field(default_factory=dict)
    """Versions the environment must end up with (checked before the tests: a resolver that moved a pin fails)."""
    torch: bool = True
    """Whether the tests need torch (the CPU wheel, installed first)."""
    no_build_isolation: tuple[str, ...] = ()
    """Requirements of the engine built against the installed torch (their setup imports it): installed with
    ``--no-build-isolation`` after torch."""


ENGINES = {
    "trl": Engine(
        requirement="trl==1.16.0",
        # TRL's [vllm] extra without vLLM itself (GPU only; the tests' trl/vllm_standin answers in its place)
        pins=("requests", "aiohttp>=3.13.3"),
        extra="trl",
        tests=("tests/paravt/learners/adapters/trl",),
        expected={"trl": "1.16.0"},
    ),
    "verl": Engine(
        requirement="verl[verl-core]==0.9.1",
        pins=("transformers==5.9.0",),
        extra="verl",
        tests=("tests/paravt/learners/adapters/verl",),
        expected={"verl": "0.9.1", "transformers": "5.9.0"},
    ),
    "openrlhf": Engine(
        requirement="openrlhf==0.11.2",
        gpu_only={
            "flash-attn": "CUDA kernels, compiled against a CUDA toolkit at install",
            "vllm": "the GPU rollout server (OpenRLHF's [vllm] extra); the tests' vllm_standin answers behind "
                    "OpenRLHF's own RolloutRayActor",
        },
        extra="model",
        # DeepSpeed builds no ops at install (they compile on first use, on a GPU machine); its setup imports torch
        no_build_isolation=("deepspeed",),
        tests=("tests/paravt/learners/adapters/openrlhf",),
        expected={"openrlhf": "0.11.2", "transformers": "5.15.0", "ray": "2.55.0", "deepspeed": "0.19.6"},
    ),
    # Not a trainer: OpenEnv's own client package (what TRL's OpenEnv examples wrap) against serve-env's /openenv.
    "openenv": Engine(
        requirement="openenv-core==0.3.0",
        extra="serve",
        tests=("tests/paravt_env/remote/test_openenv.py",),
        expected={"openenv-core": "0.3.0"},
        torch=False,
    ),
    # Not a trainer either: the Open Reward Standard's SDK, its server inside serve-env and its client against it.
    "ors": Engine(
        requirement="openreward==0.1.167",
        extra="ors",
        tests=("tests/paravt_env/remote/test_ors.py",),
        expected={"openreward": "0.1.167"},
        torch=False,
    ),
}

# The engine's declared requirements (no extras), by importlib.metadata in the session's own interpreter.
LIST_REQUIREMENTS = """
import json, re, sys
from importlib.metadata import requires
skip = set(json.loads(sys.argv[2]))
out = []
for r in requires(sys.argv[1]) or []:
    if "extra ==" in r:
        continue
    name = re.match(r"[A-Za-z0-9_.\\-]+", r).group(0).lower().replace("_", "-")
    if name not in skip:
        out.append(r)
print(json.dumps(out))
"""

CHECK_VERSIONS = """
import json, sys
from importlib.metadata import version
wanted = json.loads(sys.argv[1])
got = {k: version(k) for k in wanted}
bad = {k: (got[k], v) for k, v in wanted.items() if got[k] != v}
print("versions:", json.dumps(got))
sys.exit(f"the environment moved the engine's pins (have, want): {bad}" if bad else 0)
"""


def install_engine(session: nox.Session, name: str, engine: Engine) -> None:
    # The local CPU wheel first: a plain torch requirement would pull several GB of CUDA packages.
    if engine.torch:
        session.install("torch==2.13.0")
    if engine.gpu_only:
        # pip cannot leave out one dependency, so the engine goes in alone and its other requirements after it.
        session.install("--no-deps", engine.requirement)
        package = engine.requirement.split("[")[0].split("=")[0]
        listed = session.run_install("python", "-c", LIST_REQUIREMENTS, package, json.dumps(sorted(engine.gpu_only)),
                                     silent=True)  # fmt: skip
        if listed is None:  # -R / --no-install: the environment is reused as it stands
            return
        requirements = json.loads(listed.strip().splitlines()[-1])
        built = [r for r in requirements if re.match(r"[A-Za-z0-9_.\-]+", r).group(0).lower() in engine.no_build_isolation]
        if built:
            session.install("--no-build-isolation", *built)
        session.install(*[r for r in requirements if r not in built], *engine.pins)
        for dep, why in engine.gpu_only.items():
            session.log(f"{name}: left out {dep} ({why})")
    else:
        session.install(engine.requirement, *engine.pins)
    # This project with the engine's extra, resolved against what the engine installed: a range of ours that
    # excludes the engine's pin makes pip move it, and the version check below fails.
    session.install("-e", f".[{engine.extra},test]")
    if engine.torch:
        # torchvision's wheels do not load beside the CPU torch wheel; without it transformers' Qwen-VL AutoProcessor
        # (verl's hf_processor, OpenRLHF's get_tokenizer, TRL's processor) cannot load. The repository's stand-in
        # (benchmarks/tvshim) lets the engines' own processor path run unmodified, as beside a real torchvision.
        session.install("--no-deps", "./benchmarks/tvshim")
    session.run_install("python", "-c", CHECK_VERSIONS, json.dumps(engine.expected))


@nox.session(python=False, name="engines")
def engines(session: nox.Session) -> None:
    """Run every engine's session (each in its own virtualenv)."""
    for name in ENGINES:
        session.notify(f"engine(name='{name}')")


@nox.session
@nox.parametrize("name", list(ENGINES))
def engine(session: nox.Session, name: str) -> None:
    """One engine's adapter tests in the engine's own environment."""
    spec = ENGINES[name]
    install_engine(session, name, spec)
    session.run("python", "-m", "pip", "freeze", silent=False)  # the environment the figures came from, in the log
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *spec.tests, *session.posargs,
                env={"PARAVT_ENGINE": name, "OMP_NUM_THREADS": "1"})  # fmt: skip
