"""The OpenRLHF executor where OpenRLHF runs it: loaded by OpenRLHF's own loader in a process whose environment
holds nothing of the driver's (PATH and HOME only), fed a row of ``paravt export openrlhf --recipe
paragrpo_qwen3vl_8b``; its result goes through OpenRLHF's own experience conversion. The PARA-GRPO recipe's
gating, tool mode and think prefix must arrive through the label alone, and the experience must hold every image
pad with its image (``clean_process_episode.py`` runs the episode)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from engine_env import PARA_GRPO_CPU, SCRIPT, engine_import, local_episode  # tests/engine_env.py

engine_import("openrlhf", "openrlhf.utils.agent")
engine_import("openrlhf", "ray")
pytest.importorskip("torch")

from paravt.cli import main  # noqa: E402
from paravt_env import gated_frame_budget  # noqa: E402

EPISODE = Path(__file__).with_name("clean_process_episode.py")
OVERRIDES = PARA_GRPO_CPU  # PARA-GRPO as released (sub-agents, gating, "<think>\n", the released reward), CPU size
TURNS = SCRIPT


def run_clean(tmp_path, row, model, max_length, turns=TURNS):
    (tmp_path / "row.json").write_text(json.dumps(row))
    (tmp_path / "turns.json").write_text(json.dumps(turns))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"}  # nothing of the driver's
    proc = subprocess.run([sys.executable, str(EPISODE), str(tmp_path / "row.json"), str(model), str(max_length),
                           str(tmp_path / "turns.json"), str(tmp_path / "out.json")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((tmp_path / "out.json").read_text())


@pytest.fixture(scope="module")
def rows(synth_small, tmp_path_factory):
    data, samples = synth_small
    out = tmp_path_factory.mktemp("openrlhf") / "prompts.jsonl"
    assert main(["export", "openrlhf", "--recipe", "paragrpo_qwen3vl_8b", "--data", str(data), "--out", str(out), *OVERRIDES]) == 0
    return [json.loads(x) for x in out.read_text().splitlines()], samples


def test_para_grpo_settings_arrive_through_the_label_alone(tiny_qwen3, rows, tmp_path):
    rows, samples = rows
    out = run_clean(tmp_path, rows[0], tiny_qwen3, 16384)
    assert out["paravt_env_vars"] == []
    logs = out["extra_logs"]
    # nFrames Gating: K drawn from the recipe's choices by (sample, epoch, seed), as the local trainer draws it
    assert logs["K"] == gated_frame_budget(samples[0].id, 0, 42, (4, 8))
    # sub-agent mode: the crops come back as summaries, no frame of them reaches the main agent
    assert all("sub-agent summary:" in b for b in out["between"]) and out["images"] == logs["K"]
    # the think prefix: every assistant turn opens with it, as prompt tokens
    assert out["prompt_tail"].endswith("<|im_start|>assistant\n<think>\n")
    assert all(b.endswith("<|im_start|>assistant\n<think>\n") for b in out["between"])
    local = local_episode(samples, 0, subagent=lambda request: "a red circle")
    assert out["reward"] == pytest.approx(local["reward"]) and logs["kappa"] == 2.0 and logs["K"] == local["K"]
    assert logs["accuracy"] == local["breakdown"]["accuracy"] and logs["tool"] == local["breakdown"]["tool"]
    # OpenRLHF's experience: nothing cut, every pad with its image, the action mask on the generated tokens
    assert out["sequence_length"] == out["n_tokens"] and out["pads"] == out["features"]
    assert out["action_tokens"] == out["range_tokens"] and logs["dropped_tool_responses"] == 0


def test_a_tool_response_that_does_not_fit_is_not_committed(tiny_qwen3, rows, tmp_path):
    rows, samples = rows
    frames = {**json.loads(rows[1]["label"]), "env": {**json.loads(rows[1]["label"])["env"], "tool_result": "frames"}}
    row = {**rows[1], "label": json.dumps(frames)}
    full = run_clean(tmp_path, row, tiny_qwen3, 16384)
    assert full["images"] > full["extra_logs"]["K"] and full["extra_logs"]["dropped_tool_responses"] == 0
    # room for the prompt and the first turn, not for the crops' frames: before the fix OpenRLHF cut the
    # trajectory at max_length inside them (346 pads for 882 features)
    tight = run_clean(tmp_path, row, tiny_qwen3, full["n_tokens"] - 40)
    assert tight["extra_logs"]["dropped_tool_responses"] == 1 and tight["truncated"]
    assert tight["pads"] == tight["features"] and tight["images"] == tight["extra_logs"]["K"]
    assert tight["sequence_length"] == tight["n_tokens"] <= full["n_tokens"] - 40
    assert tight["extra_logs"]["accuracy"] == 0.0  # ended unanswered
