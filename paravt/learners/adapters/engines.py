"""The engines a recipe trains on: one table that the adapters, ``paravt export``, ``paravt train --backend`` and the
CLI read, and that ``noxfile.py`` and ``pyproject.toml`` are checked against (``tests/paravt/learners/adapters/
test_engines.py``). Adding an engine starts with a row here; docs/engines.md#adding-an-engine lists the rest.

Standard library only: the CLI reads it for ``--help`` without importing torch or an engine.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Engine:
    """One engine and what this project provides for it."""

    name: str
    """The name every place uses: ``env_options(cfg, name)``, ``paravt export NAME``, the nox session, the extra."""
    requirement: str | None
    """The engine as its users install it (the nox session installs exactly this); None for the local trainer."""
    extra: str | None
    """This project's ``pyproject.toml`` extra for the engine (``pip install -e ".[EXTRA]"``); None: none needed."""
    adapter: str
    """The package that plays ParaVT episodes on the engine."""
    tests: str | None
    """The folder of the adapter's tests, run in the engine's own virtualenv (``nox -s "engine(name='NAME')"``)."""
    token_anchoring: str | None
    """Why token-granularity anchoring (``para.anchoring: token``) cannot run on the engine; None: it can."""
    export: str | None = None
    """What ``paravt export NAME`` writes (its ``--help`` line); None: the engine takes no export."""
    launcher: bool = False
    """Whether ``paravt train --backend NAME`` runs (or, with ``--dry-run``, prints) the engine's training command."""


ENGINES: dict[str, Engine] = {
    "local": Engine(
        name="local", requirement=None, extra="train", adapter="paravt.learners.trainer", tests=None,
        token_anchoring=None, launcher=True,
    ),
    "trl": Engine(
        name="trl", requirement="trl==1.16.0", extra="trl", adapter="paravt.learners.adapters.trl",
        tests="tests/paravt/learners/adapters/trl",
        token_anchoring="TRL's GRPOTrainer takes one scalar per completion from each reward function",
    ),
    "verl": Engine(
        name="verl", requirement="verl[verl-core]==0.9.1", extra="verl", adapter="paravt.learners.adapters.verl",
        tests="tests/paravt/learners/adapters/verl",
        token_anchoring="verl's agent loop returns one scalar (reward_score), which its worker places on the last response token",
        export="a parquet for verl's RLHFDataset, the agent-loop config and the length settings",
    ),
    "openrlhf": Engine(
        name="openrlhf", requirement="openrlhf==0.11.2", extra="openrlhf", adapter="paravt.learners.adapters.openrlhf",
        tests="tests/paravt/learners/adapters/openrlhf",
        token_anchoring="OpenRLHF takes one scalar reward per sample (the agent executor's 'reward') and has no per-token reward hook",
        export="JSONL rows for openrlhf.cli.train_ppo_ray (--data.input_key prompt --data.label_key label)",
        launcher=True,
    ),
}  # fmt: skip
"""Engine name -> what this project provides for it. The local trainer is a row too: every recipe can run there."""


def engine(name: str) -> Engine:
    """The table's row for ``name``; an unknown name is an error that names the known ones."""
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; known: {sorted(ENGINES)}")
    return ENGINES[name]


def exporters() -> dict[str, str]:
    """``paravt export`` targets -> their help lines."""
    return {e.name: e.export for e in ENGINES.values() if e.export}


def backends() -> tuple[str, ...]:
    """``paravt train --backend`` choices."""
    return tuple(e.name for e in ENGINES.values() if e.launcher)
