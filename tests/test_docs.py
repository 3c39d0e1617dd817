"""The documentation runs as written and builds clean.

Every code block of the site (``docs/*.md``, in ``mkdocs.yml``'s nav order) is run in one fresh directory, so a page
may use what an earlier page made (``runs/synth``): each ```bash block's ``paravt`` commands (continuation lines
joined, comments dropped) except those SKIP names with its reason, and each ```python block as a script. A block
that cannot run here says why on the line before its fence: ``<!-- skip-test: reason -->``. A page that starts
``paravt serve-env`` has it running in the background while its Python blocks talk to it. The site builds with
``mkdocs build --strict`` (a warning fails), and no page links outside the repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
SKIP = [
    (r"^paravt train (?!.*--dry-run)", "training takes minutes to hours (the main job is timed by hand)"),
    (r"^paravt repro", "hours of training; --report-only needs a finished repro"),
    (r"\bRUN/|\bOUT/", "RUN / OUT stand for a run's directory"),
    (r"\$HF_HOME|\$DATA", "the released benchmark / training data"),
    (r"^paravt export openrlhf .*--data /data/", "/data/paravt_rl.parquet stands for the released parquet"),
    (r"openai:|sglang:", "a model server"),
    (r"^paravt serve\b(?!-env)", "a model server runs until stopped (tests/paravt/policies test it as a process)"),
]
FENCE = re.compile(r"(?:<!--\s*skip-test:\s*(?P<why>.*?)\s*-->\s*\n)?^```(?P<lang>[\w-]*)\n(?P<code>.*?)^```", re.S | re.M)


@dataclass
class Block:
    page: str
    line: int
    lang: str
    code: str
    skip: str | None


def nav_pages() -> list[str]:
    """The pages of ``mkdocs.yml``'s nav, in order (paths relative to ``docs/``)."""
    import yaml

    def walk(node):  # noqa: ANN001, ANN202
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from walk(value)

    return list(walk(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]))


def blocks(page: str) -> list[Block]:
    text = (DOCS / page).read_text()
    return [Block(page, text[: m.start("code")].count("\n"), m["lang"], m["code"], m["why"]) for m in FENCE.finditer(text)]


def commands(code: str) -> list[str]:
    """A bash block's commands: continuation lines joined, comments dropped."""
    out = []
    for line in code.replace("\\\n", " ").splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#"):
            out.append(re.sub(r"\s+", " ", line))
    return out


RUN_PREFIXES = ("paravt ", "python -m benchmarks.gpu.gpu_step --quick")
"""The commands run: the CLI's, and the GPU benchmark's CPU check (the others are installs, test runs, servers
and benchmarks of minutes, each documented where it is shown)."""


def runnable(command: str) -> bool:
    return command.startswith(RUN_PREFIXES) and not command.startswith("paravt serve-env") and \
        not any(re.search(p, command) for p, _ in SKIP)


def all_blocks() -> list[Block]:
    return [b for page in nav_pages() for b in blocks(page)]


def test_the_nav_holds_every_page_by_task():
    pages = nav_pages()
    for page in ("index.md", "quickstart.md", "env.md", "data.md", "evaluation.md", "training.md", "engines.md",
                 "env-server.md", "repro.md", "gpu.md", "reference.md"):  # fmt: skip
        assert page in pages, page
    assert all((DOCS / p).is_file() for p in pages)


def test_every_block_runs_or_says_why_not():
    found = all_blocks()
    run = [c for b in found if b.lang == "bash" and not b.skip for c in commands(b.code) if runnable(c)]
    # the fast ones a newcomer tries first are among those run (an edit cannot make the run test vacuous)
    for expected in ("paravt synth --out runs/synth", "paravt eval compare runs/eval_detector runs/eval_no_tool",
                     "paravt tiny-model", "paravt bench dispatch", "--dry-run", "paravt view"):  # fmt: skip
        assert any(expected in c for c in run), expected
    python = [b for b in found if b.lang == "python"]
    assert sum(not b.skip for b in python) >= 4, "the env, video, data and rollout snippets run"
    for b in found:
        assert b.lang in ("bash", "python", "bibtex", "text", "yaml", ""), f"{b.page}:{b.line}: a ```{b.lang} block"
        assert b.skip is None or len(b.skip) > 10, f"{b.page}:{b.line}: say why the block cannot run here"


def _serve_env(command: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """Start a page's ``paravt serve-env`` command and wait for its ``/health``."""
    import httpx

    port = int(re.search(r"--port (\d+)", command)[1])
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:
            pytest.fail(f"port {port} is taken: the docs' server example cannot start")
    proc = subprocess.Popen(command, shell=True, cwd=cwd, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{command} exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)
    pytest.fail(f"{command} did not answer /health within 120 s")


@pytest.mark.skipif(shutil.which("paravt") is None, reason="the paravt console script is not installed")
def test_the_docs_code_runs_as_written(tmp_path):
    env = {**os.environ, "PARAVT_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}  # benchmarks/ is not installed
    ran = 0
    for page in nav_pages():
        server = None
        try:
            for b in blocks(page):
                where = f"docs/{b.page}:{b.line}"
                if b.skip or b.lang not in ("bash", "python"):
                    continue
                if b.lang == "python":
                    done = subprocess.run([sys.executable, "-c", b.code], cwd=tmp_path, env=env, capture_output=True,
                                          text=True, timeout=600)  # fmt: skip
                    assert done.returncode == 0, f"{where}\n{b.code}\n{done.stderr[-3000:]}"
                    ran += 1
                    continue
                for command in commands(b.code):
                    if command.startswith("paravt serve-env") and server is None:
                        server = _serve_env(command, tmp_path, env)
                        continue
                    if not runnable(command):
                        continue
                    done = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True,
                                          timeout=600)  # fmt: skip
                    assert done.returncode == 0, f"{where}: {command}\n{done.stderr[-3000:]}"
                    assert "Traceback" not in done.stderr, f"{where}: {command}\n{done.stderr[-3000:]}"
                    ran += 1
        finally:
            if server is not None:
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(timeout=30)
    assert ran > 10
    assert not (tmp_path / "runs" / "paragrpo").exists()  # the dry run read no data and wrote nothing
    assert (tmp_path / "runs" / "eval_detector" / "view.html").is_file()


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)")


@pytest.mark.parametrize("path", ["README.md", *sorted(str(p.relative_to(REPO)) for p in DOCS.glob("*.md"))])
def test_links_stay_in_the_repository_and_resolve(path):
    text = (REPO / path).read_text()
    prose = FENCE.sub("", text)  # a URL inside a code block is code (a server's address), not a link
    assert not re.search(r"\]\(\s*https?:|<https?:", prose), f"{path} links outside the repository"
    for target in LINK.findall(prose):
        target = target.split("#", 1)[0]
        if target:
            assert (REPO / path).parent.joinpath(target).resolve().exists(), f"{path}: {target} does not exist"


REPO_PATH = re.compile(r"`((?:tests|benchmarks|paravt|paravt_env|docs|requirements|scripts|\.ci)/[\w./-]*\w)`")


@pytest.mark.parametrize("path", ["README.md", *sorted(str(p.relative_to(REPO)) for p in DOCS.glob("*.md"))])
def test_every_repository_path_the_docs_name_exists(path):
    """A file or folder of the repository named in inline code (``tests/...``, ``benchmarks/...``) exists: a
    moved module or test leaves no stale pointer behind."""
    text = FENCE.sub("", (REPO / path).read_text())
    named = [m for m in REPO_PATH.finditer(text)
             if not re.search(r"release|metric", text[max(0, m.start() - 70) : m.start()])]  # the release's own files; metric names
    missing = sorted({m[1] for m in named if not any(c in m[1] for c in "*{") and not (REPO / m[1]).exists()})
    assert not missing, f"{path} names paths that do not exist: {missing}"


def test_the_site_builds_without_a_warning(tmp_path):
    pytest.importorskip("mkdocs")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "quickstart" / "index.html").is_file()


def test_every_generated_table_is_what_its_committed_results_give():
    """Measured figures in the README and the docs (``<!-- generated: MODULE:FUNCTION FILE -->`` blocks) are the
    rendering of the committed result file: a rerun that changes a figure cannot leave a page stale
    (``python scripts/docs_tables.py`` rewrites them)."""
    from scripts.docs_tables import blocks, pages, render

    found = {}
    for path in pages():
        for module, function, source, table in blocks(path):
            assert table == render(module, function, source), f"{path.name}: stale table from {source}; run scripts/docs_tables.py"
            found.setdefault(function, set()).add(path.name)
    assert {"README.md", "training.md"} <= found.get("to_markdown", set()), "the main job's table"
    assert "results.md" in found.get("comparison_table", set()), "the perception probe's table (with the recipes' history)"
    main_job = json.loads((REPO / "results/tiny_cpu/main_job.json").read_text())
    assert len(main_job["seeds"]) >= 3, "the headline is a mean over at least 3 seeds"


def test_the_main_job_guards_verdicts_are_what_their_committed_runs_give():
    """docs/training.md's verdicts on the broken-call penalty and the validation selection recompute from
    the committed runs (``scripts/main_job_guards.py``)."""
    from scripts.main_job_guards import ROOT, judge

    assert judge() == json.loads((ROOT / "guards.json").read_text())


def test_the_spread_over_cold_starts_is_what_the_committed_reports_give():
    """docs/repro.md's spread over cold starts recomputes from the committed repro reports and gates
    (``scripts/coldstart_spread.py``), and names what it lacks instead of filling it in."""
    from scripts.coldstart_spread import OUT, judge, to_markdown

    result = judge()
    assert result == json.loads(OUT.read_text())
    assert result["cold_starts"]["1"]["gate_passed"], "the comparison's cold start passed its gate"
    for seed, start in result["cold_starts"].items():
        for arm, figures in start["arms"].items():
            assert (figures is None) == any(f"pipeline seed {seed}: {arm} " in m for m in result["missing"])
    assert "| 1 | passed |" in to_markdown(result)


@pytest.mark.parametrize(("evaluation", "name"), [("eval_selected", "comparison"), ("eval_selected_turns2", "comparison_turns2"),
                                                ("eval_selected_turns3", "comparison_turns3"),
                                                ("eval_coldstart", "coldstart/comparison")])  # fmt: skip
def test_the_two_colours_comparison_recomputes_from_its_committed_runs(monkeypatch, evaluation, name):
    """results/dispatch_trained_two_colours: each comparison docs/repro.md quotes is what the six slim runs give."""
    from paravt.experiments.dispatch_trained import compare

    monkeypatch.chdir(REPO)  # the committed comparisons name their runs relative to the repository
    root = REPO / "results" / "dispatch_trained_two_colours"
    runs = {side: [root / "runs" / f"{side[:3]}_s{s}" for s in (0, 1, 2)] for side in ("parallel", "sequential")}
    result = compare([p.relative_to(REPO) for p in runs["parallel"]], [p.relative_to(REPO) for p in runs["sequential"]],
                     evaluation)  # fmt: skip
    assert json.loads(json.dumps(result)) == json.loads((root / f"{name}.json").read_text())


@pytest.mark.parametrize(("evaluation", "name"), [("eval_selected", "comparison"), ("eval_selected_turns3", "comparison_turns3")])
def test_the_powered_comparison_b_recomputes_from_its_committed_runs(monkeypatch, evaluation, name):
    """results/powered_b: design (b)'s comparisons are what its twenty slim runs (seed pairs 3-12) give, and its
    verdicts are what the goals code makes of them; docs/repro.md quotes that table."""
    from paravt.experiments import powered_goals
    from paravt.experiments.dispatch_trained import compare

    monkeypatch.chdir(REPO)  # the committed comparisons name their runs relative to the repository
    root = Path("results") / "powered_b"
    runs = {side: [root / "runs" / f"{side[:3]}_s{s}" for s in powered_goals.SEEDS] for side in ("parallel", "sequential")}
    result = compare(runs["parallel"], runs["sequential"], evaluation)
    assert json.loads(json.dumps(result)) == json.loads((root / f"{name}.json").read_text())
    verdicts = powered_goals.judge(None, json.loads((root / "comparison.json").read_text()),
                                   json.loads((root / "comparison_turns3.json").read_text()))  # fmt: skip
    assert verdicts == json.loads((root / "verdicts.json").read_text())
    table = powered_goals.to_markdown(verdicts)
    for goal in ("B1", "B2", "B3"):
        row = next(x for x in table.splitlines() if x.startswith(f"| {goal} |"))
        assert row in (DOCS / "repro.md").read_text()


def test_the_powered_design_a_verdicts_are_what_its_committed_report_gives():
    """results/powered_a/verdicts.json: the six goals judged by the goals code on design (a)'s committed report and
    design (b)'s committed comparisons; docs/repro.md quotes the A rows."""
    from paravt.experiments import powered_goals

    a, b = REPO / "results" / "powered_a", REPO / "results" / "powered_b"
    verdicts = powered_goals.judge(json.loads((a / "report.json").read_text()), json.loads((b / "comparison.json").read_text()),
                                   json.loads((b / "comparison_turns3.json").read_text()))  # fmt: skip
    assert verdicts == json.loads((a / "verdicts.json").read_text())
    assert all(t["passed"] is not None for t in verdicts["tests"])  # every run in: each goal judged
    table = powered_goals.to_markdown(verdicts)
    for goal in ("A1", "A2", "A3"):
        row = next(x for x in table.splitlines() if x.startswith(f"| {goal} |"))
        assert row in (DOCS / "repro.md").read_text()


def test_the_powered_designs_power_is_what_the_pilots_committed_figures_give():
    """docs/repro.md's power table (the powered design, written before its runs) recomputes from the pilots'
    committed reports (``scripts/power.py``); neither pilot is missing."""
    from scripts.power import OUT, compute, to_markdown

    result = compute()
    assert result == json.loads(OUT.read_text()) and "missing" not in result
    assert to_markdown(result).strip() in (DOCS / "repro.md").read_text()


@pytest.mark.parametrize("name", [*sorted(f"repro/{p.name}" for p in (REPO / "results" / "repro").glob("repro_cpu_prior*")),
                                  "powered_a"])  # fmt: skip
def test_the_comparisons_verdicts_recompute_from_its_committed_runs(tmp_path, name):
    """The preregistered comparison, its cold starts and the powered design (a): ``paravt repro --report-only`` on a
    copy of the committed directory (slim runs, gates, evaluations: ``scripts/slim_repro.py``) writes the committed
    report.json again, goals and verdicts included."""
    from paravt.cli import main

    out = tmp_path / Path(name).name
    shutil.copytree(REPO / "results" / name, out)
    committed = json.loads((out / "report.json").read_text())
    (out / "report.json").unlink()
    assert main(["repro", "--out", str(out), "--report-only", "--no-progress"]) == 0
    recomputed = json.loads((out / "report.json").read_text())
    assert recomputed["goals"] == committed["goals"]
    assert recomputed == committed


def test_the_main_jobs_figures_recompute_from_its_committed_runs():
    """results/tiny_cpu/main_job.json (the README's table) is what the committed slim runs give
    (results/tiny_cpu/main_job_runs/seedS: samples, evaluations, the selection's choice and metrics; no videos)."""
    from paravt.experiments.main_job import summarise

    runs = sorted((REPO / "results/tiny_cpu/main_job_runs").glob("seed*"))
    assert len(runs) >= 3
    assert summarise(runs) == json.loads((REPO / "results/tiny_cpu/main_job.json").read_text())
