"""The command line as a newcomer meets it: real subcommands with their own help, ``python -m paravt``, the
recipes in ``train --help``, every mistake stopped early with one line that says what to do."""

import subprocess
import sys
from pathlib import Path

import pytest

from paravt.cli import main

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("action, words", [("suite", "--data-root"), ("compare", "DIR [DIR ...]"), ("diff", "DIR_A DIR_B")])
def test_eval_subcommands_have_their_own_help(action, words, capsys):
    with pytest.raises(SystemExit) as done:
        main(["eval", action, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: paravt eval {action}") and words in out


def test_python_dash_m_paravt_is_the_cli():
    done = subprocess.run([sys.executable, "-m", "paravt", "synth", "--help"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0 and "usage: paravt synth" in done.stdout


def test_train_help_lists_the_recipes(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    recipes = sorted(p.stem for p in (REPO / "paravt" / "learners" / "recipes").glob("*.yaml"))
    assert recipes and all(r in out for r in recipes)


def test_synth_refuses_zero_videos(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:  # argparse refuses it, naming the flag
        main(["synth", "--out", str(tmp_path / "s"), "--n", "0"])
    assert exit_.value.code == 2
    assert "argument --n: must be >= 1, got 0" in capsys.readouterr().err and not (tmp_path / "s").exists()


@pytest.mark.parametrize("setting, module", [("log.tensorboard=true", "torch.utils.tensorboard"), ("log.wandb_project=p", "wandb")])
def test_a_missing_logging_sink_stops_train_before_any_work(tmp_path, monkeypatch, capsys, setting, module):
    pytest.importorskip("torch")
    monkeypatch.setitem(sys.modules, module, None)  # "not installed"
    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    assert main(["train", "--out", str(tmp_path / "run"), setting]) == 1
    assert "pip install" in capsys.readouterr().err
    assert not (tmp_path / "run").exists() and not (tmp_path / "cache").exists()  # no data, no model built


def test_light_install_names_the_extra_to_install(tmp_path):
    code = ("import sys; sys.modules['torch'] = None; from paravt.cli import main; "
            f"sys.exit(main(['train', '--out', {str(tmp_path / 'run')!r}]))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "torch" in done.stderr and "pip install torch==2.13.0" in done.stderr and ".[train]" in done.stderr


def test_missing_matplotlib_is_said_not_silent(tmp_path, monkeypatch, caplog):
    from paravt.evaluation.report import summarize, write_report

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    row = {"id": "a", "score": 1.0, "correct": True, "tool_calls": 0, "turns": 1, "question_type": "mcq", "wall_s": 0.1}
    with caplog.at_level("WARNING"):
        write_report(summarize([row]), tmp_path)
    assert (tmp_path / "summary.json").is_file() and not (tmp_path / "report.png").exists()
    assert "report.png not drawn: matplotlib is not installed" in caplog.text


def test_openrlhf_dry_run_reads_no_data_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--backend", "openrlhf", "--recipe", "paragrpo_qwen3vl_8b", "--out", "runs/x",
                 "data.path=/no/such/data.parquet", "--dry-run"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "openrlhf.cli.train_ppo_ray" in out and "runs/x/openrlhf_prompts.jsonl" in out
    assert list(tmp_path.iterdir()) == []
    assert "PARAVT_ENV_OPTIONS" not in out  # the env options travel in the exported labels
