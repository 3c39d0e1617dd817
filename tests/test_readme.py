"""The README's commands run as written, in order, on a fresh directory: every ``paravt`` command of its
```bash blocks except those listed in SKIP with the reason (hours of training, a model server, the released
data, a placeholder path). A command added to the README is run here unless it is added to SKIP."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SKIP = [
    (r"^paravt train (?!.*--dry-run)", "training takes minutes to hours (the main job is timed by hand)"),
    (r"^paravt repro", "hours of training; --report-only needs a finished repro"),
    (r"\bRUN/", "RUN stands for a training run's directory"),
    (r"\$HF_HOME|\$DATA", "the released benchmark / training data"),
    (r"openai:|sglang:", "a model server"),
    (r"^paravt export openrlhf .*--data /data/", "/data/paravt_rl.parquet stands for the released parquet"),
    (r"^paravt serve-env", "a server runs until stopped (tests/scripts/test_serve_env.py starts it as a process)"),
]


def readme_commands() -> list[str]:
    """The commands of the README's ```bash blocks, continuation lines joined, comments dropped."""
    text = (REPO / "README.md").read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(re.sub(r"\s+", " ", line))
    return commands


def runnable(commands: list[str]) -> list[str]:
    return [c for c in commands if c.startswith("paravt ") and not any(re.search(p, c) for p, _ in SKIP)]


def test_the_readme_lists_the_commands_this_test_runs():
    run = runnable(readme_commands())
    # the fast ones a newcomer tries first are among them (a README edit cannot make this test vacuous)
    for expected in ("paravt synth --out runs/synth", "paravt eval compare runs/eval_detector runs/eval_no_tool",
                     "paravt tiny-model", "paravt bench dispatch", "--dry-run"):  # fmt: skip
        assert any(expected in c for c in run), expected


@pytest.mark.skipif(shutil.which("paravt") is None, reason="the paravt console script is not installed")
def test_readme_commands_run_as_written(tmp_path):
    env = {**os.environ, "PARAVT_CACHE": str(tmp_path / "cache")}
    for command in runnable(readme_commands()):
        done = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr, f"{command}\n{done.stderr[-3000:]}"
    # the dry run read no data and wrote nothing
    assert not (tmp_path / "runs" / "paragrpo").exists()
    assert (tmp_path / "runs" / "eval_detector" / "view.html").is_file()
