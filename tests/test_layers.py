"""The import graph of the shipped code, read from the source (every ``import``, function-level ones included):
no module imports a layer above its own (the order written in docs/reference.md#layout), no import circle among
modules, ``paravt_env`` never imports ``paravt``, and ``paravt.evaluation`` imports nothing of ``paravt.learners``."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOTS = ("paravt", "paravt_env")


def modules(top: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for both installed roots (a package is named by its ``__init__``)."""
    found = {}
    for root in ROOTS:
        for path in (top / root).rglob("*.py"):
            parts = list(path.relative_to(top).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The project modules ``name`` imports (the deepest known module of each import)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def graph(top: Path = ROOT) -> dict[str, set[str]]:
    known = modules(top)
    return {name: set(imported(name, path, known)) for name, path in known.items()}


def documented_layers() -> list[list[str]]:
    """docs/reference.md's layer line, top first: ``a  ->  b  ->  {c, d}  ->  e`` gives [[a], [b], [c, d], [e]]."""
    page = (ROOT / "docs" / "reference.md").read_text()
    line = next(x for x in page.splitlines() if x.startswith("paravt.cli") and "->" in x)
    return [re.findall(r"[\w.]+", part) for part in line.split("->")]


def layer_of(module: str, layers: list[list[str]]) -> tuple[int, str] | None:
    """(rank, the layer's package) of the deepest documented package holding ``module``."""
    best = None
    for rank, names in enumerate(layers):
        for package in names:
            if (module == package or module.startswith(package + ".")) and (best is None or len(package) > len(best[1])):
                best = (rank, package)
    return best


def against_layers(edges: dict[str, set[str]], layers: list[list[str]]) -> list[str]:
    """``source -> target`` of every import into a layer above the source's or beside it (same rank)."""
    bad = []
    for source, targets in edges.items():
        mine = layer_of(source, layers)
        if mine is None:  # the package's root and `python -m paravt`: the entry points
            continue
        for target in targets:
            theirs = layer_of(target, layers)
            if theirs is not None and theirs[1] != mine[1] and theirs[0] <= mine[0]:
                bad.append(f"{source} -> {target}")
    return sorted(bad)


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_every_package_of_the_shipped_code_has_a_documented_layer():
    layers = documented_layers()
    missing = sorted({m for m in modules() if m not in ("paravt", "paravt.__main__") and layer_of(m, layers) is None})
    assert not missing, f"modules in no layer of docs/reference.md#layout: {missing}"


def test_no_module_imports_upwards_or_sideways():
    bad = against_layers(graph(), documented_layers())
    assert not bad, "imports against docs/reference.md#layout:\n" + "\n".join(bad)


def test_the_env_never_imports_paravt_and_evaluation_never_imports_the_learners():
    edges = graph()
    assert not [(s, t) for s, ts in edges.items() if s.startswith("paravt_env") for t in ts if t.split(".")[0] == "paravt"]
    assert not [(s, t) for s, ts in edges.items() if s.startswith("paravt.evaluation")
                for t in ts if t.startswith("paravt.learners")]  # fmt: skip


def test_no_import_circle_among_modules():
    assert not circles(graph()), f"import circles: {circles(graph())}"


def test_the_checks_see_an_upward_import_and_a_circle(tmp_path):
    """The checks themselves, on a tree with a function-level upward import that closes a circle."""
    for folder in ("paravt_env", "paravt", "paravt/evaluation", "paravt/learners"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "paravt" / "evaluation" / "a.py").write_text("def f():\n    from paravt.learners import b\n")
    (tmp_path / "paravt" / "learners" / "b.py").write_text("from ..evaluation import a\n")
    edges = graph(tmp_path)
    assert edges["paravt.evaluation.a"] == {"paravt.learners.b"} and edges["paravt.learners.b"] == {"paravt.evaluation.a"}
    assert against_layers(edges, [["paravt.learners"], ["paravt.evaluation"]]) == ["paravt.evaluation.a -> paravt.learners.b"]
    assert circles(edges) == [["paravt.evaluation.a", "paravt.learners.b"]]
