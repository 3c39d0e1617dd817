"""``paravt.evaluation.fingerprints``: agreeing fingerprints mean the same inputs; ``paravt eval diff`` names the
samples whose inputs changed, and a malformed summary is one line naming its file."""

from __future__ import annotations

import json
import shutil

import pytest

from paravt.baselines import make_baseline
from paravt.cli import main
from paravt.evaluation.fingerprints import diff_runs, input_identity, video_identity
from paravt.evaluation.harness import evaluate
from paravt_env import EnvConfig, load_samples


@pytest.fixture
def data(synth_small, tmp_path):
    """A copy of the small synthetic set (its videos included) that a test may change."""
    src, _ = synth_small
    dst = tmp_path / "data"
    shutil.copytree(src, dst)
    return dst


def _eval(data, out):
    evaluate(load_samples(data), lambda: make_baseline("detector"), out, EnvConfig(frame_budget=8), progress=False,
             run_config={"policy": "detector", "data": str(data)})  # fmt: skip


def test_a_replaced_video_makes_the_fingerprints_disagree_and_is_named(data, tmp_path):
    samples = load_samples(data)
    _eval(data, tmp_path / "a")
    assert "The fingerprints agree" in diff_runs(tmp_path / "a", tmp_path / "a")
    victim, donor = samples[0], samples[1]
    shutil.copyfile(donor.video_path, victim.video_path)  # same path, other pixels
    _eval(data, tmp_path / "b")
    report = diff_runs(tmp_path / "a", tmp_path / "b")
    assert "The fingerprints agree" not in report and "inputs_sha" in report
    assert f"{victim.id} (video)" in report and donor.id not in report.split("## Samples whose inputs differ")[1]


def test_a_changed_sample_row_is_an_other_input(data, tmp_path):
    _eval(data, tmp_path / "a")
    path = data / "samples.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["question"] = rows[0]["question"] + " (reworded)"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _eval(data, tmp_path / "b")
    assert f"{rows[0]['id']} (sample)" in diff_runs(tmp_path / "a", tmp_path / "b")


def test_video_identity_sees_content_not_only_the_path(data):
    samples = load_samples(data)
    a = video_identity(samples[0].video_path)
    assert a == video_identity(samples[0].video_path) and a != video_identity(samples[1].video_path)
    assert video_identity(data / "missing.mp4") is None
    assert set(input_identity(samples[0])) == {"sample_sha", "video_sha"}


@pytest.mark.parametrize("summary", ['{"n": 3, "fingerp', "[1, 2]", '{"fingerprint": [1]}', '{"fingerprint": "x"}', "\udcff"])
def test_a_malformed_summary_is_one_line_naming_the_file(data, tmp_path, capsys, summary):
    _eval(data, tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / "summary.json").write_text(summary, errors="surrogateescape")
    assert main(["eval", "diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(tmp_path / "b" / "summary.json") in err, err
