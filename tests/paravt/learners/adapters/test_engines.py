"""``paravt.learners.adapters.engines``: the one engine table. Every place that lists engines reads it (adapters,
``paravt export``, ``paravt train --backend``) or is checked against it here (``noxfile.py``, ``pyproject.toml``'s
extras, docs/engines.md)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from paravt.cli import build_parser
from paravt.learners.adapters.engines import ENGINES, backends, engine, exporters

try:
    import tomllib  # Python >= 3.11
except ImportError:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[4]


def _noxfile():
    import sys

    pytest.importorskip("nox")
    spec = importlib.util.spec_from_file_location("paravt_noxfile", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their annotations through sys.modules
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _name_version(requirement: str) -> tuple[str, str]:
    """``verl[verl-core]==0.9.1`` -> ("verl", "0.9.1"): a requirement without its extras."""
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==(\S+)", requirement)
    assert m, f"{requirement!r} is not pinned with =="
    return m.group(1).lower(), m.group(2)


def test_every_engine_row_is_complete_and_its_adapter_exists():
    for name, row in ENGINES.items():
        assert row.name == name
        assert importlib.util.find_spec(row.adapter) is not None, f"{name}: adapter {row.adapter} not found"
        if row.tests:
            assert (ROOT / row.tests).is_dir(), f"{name}: {row.tests} does not exist"
    with pytest.raises(ValueError, match="unknown engine 'deepspeed'; known"):
        engine("deepspeed")


def test_noxfile_runs_every_engine_of_the_table_as_the_table_says():
    nox_engines = _noxfile().ENGINES
    trainers = {name for name, row in ENGINES.items() if row.requirement}
    assert trainers <= set(nox_engines), f"engines without a nox session: {trainers - set(nox_engines)}"
    extras = _extras()
    for name in trainers:
        row, session = ENGINES[name], nox_engines[name]
        assert session.requirement == row.requirement, name
        assert session.tests == (row.tests,), name
        # the session installs the user's extra, or (where GPU-only parts must stay out) one the user's extra includes
        assert session.extra == row.extra or f"paravt-gym[{session.extra}]" in extras[row.extra], name


def test_pyproject_has_each_engines_extra_pinned_as_the_table_says():
    extras = _extras()
    for name, row in ENGINES.items():
        assert row.extra in extras, f"{name}: no [{row.extra}] extra in pyproject.toml"
        if row.requirement:
            pinned = {_name_version(r) for r in extras[row.extra] if "==" in r and not r.startswith("paravt-gym")}
            assert _name_version(row.requirement) in pinned, f"{name}: [{row.extra}] does not pin {row.requirement}"


def test_the_cli_offers_what_the_table_lists():
    parser = build_parser()
    export = parser.parse_args(["export", "verl", "--recipe", "tiny_cpu", "--data", "d", "--out", "o"])
    assert export.target == "verl"
    sub = next(a for a in parser._subparsers._group_actions if a.dest)  # noqa: SLF001 (argparse has no public API)
    targets = sub.choices["export"]._subparsers._group_actions[0].choices  # noqa: SLF001
    assert set(targets) == set(exporters())
    train = next(a for a in sub.choices["train"]._actions if a.dest == "backend")  # noqa: SLF001
    assert tuple(train.choices) == backends() and "local" in backends()


def test_token_anchoring_is_refused_where_the_table_says_why():
    from paravt.learners.adapters.recipe_env import env_options
    from paravt.learners.config import load_recipe

    cfg = load_recipe("tiny_cpu", ["para.anchoring=token"])
    for name, row in ENGINES.items():
        if row.token_anchoring:
            with pytest.raises(ValueError, match="local-only"):
                env_options(cfg, name)
        else:
            assert env_options(cfg, name)["nframes_gating"] is True


def test_docs_list_every_engine_and_how_to_add_one():
    page = (ROOT / "docs" / "engines.md").read_text()
    assert "## Adding an engine" in page
    for name, row in ENGINES.items():
        if row.requirement:
            assert f'"paravt-gym[{row.extra}]"' in page or f'".[{row.extra}]"' in page, f"docs/engines.md: no install line for {name}"
