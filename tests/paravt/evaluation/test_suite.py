"""``paravt eval suite``: the seven Table 1 columns from fixture files laid out as the released driver's
``$HF_HOME``, against a scripted model over HTTP; resumable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from scripted_openai import ScriptedModel

from paravt.cli import main as cli
from paravt_env.data.index_video import make_index_video

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "data"


def parquet(rows_json: Path, target: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(json.loads(rows_json.read_text())), target)


def data_root(tmp_path: Path) -> Path:
    root = tmp_path / "hf_home"
    video = make_index_video(tmp_path / "index.mp4", 80, fps=10, size=(96, 128))

    def put(rel: str, *names: str) -> None:
        for name in names:
            (root / rel / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(video, root / rel / name)

    parquet(FIXTURES / "videomme" / "videomme_test_rows.json", root / "videomme/videomme/test-00000-of-00001.parquet")
    put("videomme/data", "aaaaaaaaaa1.mp4", "bbbbbbbbbb2.mp4", "ccccccccc03.mp4")
    (root / "videomme/subtitle").mkdir(parents=True)
    (root / "videomme/subtitle/aaaaaaaaaa1.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nthree candles\n")
    parquet(FIXTURES / "longvideobench" / "lvb_validation_rows.json",
            root / "datasets/longvideobench/validation-00000-of-00001.parquet")  # fmt: skip
    put("datasets/longvideobench/videos", "86CxyhFV9MI.mp4", "Xb1kd9QwLqE.mp4")
    shutil.copy(FIXTURES / "lvbench" / "lvbench_lmms_rows.json", root / "lvbench.json")
    (root / "lvbench").mkdir()
    shutil.move(root / "lvbench.json", root / "lvbench" / "lvbench_lmms_rows.json")
    put("lvbench", "videos/k9Qm2LxV0aA.mp4")
    (root / "MLVU").mkdir()
    shutil.copy(FIXTURES / "mlvu" / "mlvu_dev_lmms_rows.json", root / "MLVU")
    put("MLVU/video", "needle_32.mp4")
    (root / "MMVU").mkdir()
    shutil.copy(FIXTURES / "mmvu" / "validation.json", root / "MMVU")
    put("MMVU/videos", "Art/0.mp4", "Chemistry/0.mp4")
    (root / "charades_sta").mkdir()
    shutil.copy(FIXTURES / "charades_sta" / "charades_lmms_rows.json", root / "charades_sta")
    put("charades_sta/Charades_v1_480", "3MSZA.mp4", "AO8RW.mp4")
    return root


def test_suite_seven_columns_release_scoring_and_resume(tmp_path):
    root = data_root(tmp_path)
    out = tmp_path / "suite"
    reply = "The answer is C. It happens in 3.1 - 4.7 seconds."
    args = ["eval", "suite", "--data-root", str(root), "--protocol", "release", "--out", str(out), "--no-progress"]
    with ScriptedModel([reply]) as model:
        assert cli([*args, "--policy", f"openai:{model.url}#m"]) == 0
        first = len(model.requests)
        assert cli([*args, "--policy", f"openai:{model.url}#m"]) == 0  # resumed: nothing runs again
        assert len(model.requests) == first == 4 + 4 + 2 + 1 + 1 + 2 + 2
    table = json.loads((out / "suite.json").read_text())
    values = {k: round(v["value"], 2) for k, v in table["ours"].items()}
    # Video-MME answers C, A, B, D; LongVideoBench C, E; LVBench "(C)" (never equals a letter); MLVU "?" (a
    # letter answer matches no candidate text); MMVU open-ended text and "A"; Charades IoU 0 and 1.6 / 6.9.
    assert values == {"videomme": 25.0, "videomme_wsub": 25.0, "longvideobench": 50.0, "lvbench": 0.0,
                      "mlvu": 0.0, "mmvu": 0.0, "charades": round(100 * (1.6 / 6.9) / 2, 2)}  # fmt: skip
    subs = [r for r in model.requests if "three candles" in json.dumps(r)]
    assert len(subs) == 2  # the w/ sub column's two questions on the one video with an .srt
    md = (out / "suite.md").read_text()
    assert "| ParaVT-8B (paper) | - | 69.4 |" in md and "Charades-STA mIoU" in md
    config = json.loads((out / "charades" / "eval_config.json").read_text())
    assert config["prompt_mode"] == "agentic_minimal" and config["protocol"] == "release"


def test_suite_without_any_benchmark_is_one_clear_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    rc = cli(["eval", "suite", "--data-root", str(tmp_path / "empty"), "--policy", "no_tool", "--out", str(tmp_path / "o")])
    assert rc == 1 and "no benchmark found under" in capsys.readouterr().err
