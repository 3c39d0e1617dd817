"""The README's two commands are the ones the docs give and the ones CI runs: the main job's install-and-train
line and the test line are docs/index.md's, the test line is the command .ci/run runs, and so is the engines
command the README names. (The docs' own code runs in tests/test_docs.py; the README's links resolve there too.)"""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def bash_blocks(path: Path) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", path.read_text(), re.S)]


def test_the_readme_has_the_two_commands_of_the_docs_home_page():
    readme = bash_blocks(REPO / "README.md")
    assert len(readme) == 2, "the README holds exactly two commands: the main job and the tests"
    home = bash_blocks(REPO / "docs" / "index.md")
    assert readme == home[:2]
    assert readme[0].endswith("paravt train --recipe tiny_cpu --out runs/tiny --threads 1")
    assert readme[1].endswith("python -m pytest -q -p no:cacheprovider")


def test_ci_runs_the_readme_test_command_and_the_engines():
    ci = (REPO / ".ci" / "run").read_text()
    test_command = bash_blocks(REPO / "README.md")[1].split("&&")[-1].strip()
    assert re.search(rf"^{re.escape(test_command)}$", ci, re.M)
    assert "python -m nox -s engines" in (REPO / "README.md").read_text()
    assert re.search(r"^python -m nox -s engines$", ci, re.M)
