"""Each episode's cost in its record and the means in ``summary.json`` (cost beside accuracy)."""

import json

import pytest

from paravt.baselines import make_baseline
from paravt.evaluation.harness import evaluate
from paravt.evaluation.store import read_results
from paravt_env import EnvConfig
from paravt_env.records import COST_KEYS, episode_cost


@pytest.mark.parametrize("dispatch", ["parallel", "sequential"])
def test_a_scripted_evaluation_records_what_each_episode_cost(synth_small, tmp_path, dispatch):
    _, samples = synth_small
    config = EnvConfig(frame_budget=4, crop_max_frames=3, dispatch=dispatch, crop_budget=4)
    summary = evaluate(samples[:4], lambda: make_baseline("detector"), tmp_path / "ev", config, progress=False)
    rows = read_results(tmp_path / "ev" / "results.jsonl")
    for row in rows:
        record, cost = row["episode"], row["episode"]["cost"]
        executed = [c for t in record["turns"] for c in t["crops"] if c["status"] == "executed"]
        assert cost["turns"] == row["turns"] == len(record["turns"])
        assert cost["crops"] == row["tool_calls"] == len(executed) <= 4
        assert cost["frames_decoded"] == len(record["overview"]) + sum(c["frames"] for c in executed)
        assert cost["generated_tokens"] is None and cost["prompt_tokens"] is None and cost["model_calls"] == 0
        assert cost["wall_s_serial"] >= cost["wall_s"] > 0
    assert any(r["episode"]["cost"]["crops"] > 0 for r in rows)
    saved = json.loads((tmp_path / "ev" / "summary.json").read_text())["cost"]
    assert saved == summary["cost"] and saved["n"] == len(rows) == 4
    for key in ("turns", "crops", "frames_decoded", "wall_s"):
        assert saved[key] == pytest.approx(sum(r["episode"]["cost"][key] for r in rows) / len(rows))
    assert saved["generated_tokens"] is None and set(COST_KEYS) <= set(saved)


def test_a_model_turns_tokens_and_contexts_are_summed():
    record = {"overview": [1.0, 2.0], "wall_s": 3.0, "turns": [
        {"tokens": 10, "prompt_tokens": 100, "crops": [{"status": "executed", "frames": 4}, {"status": "rejected", "frames": 0}],
         "timing": {"decode_s": 0.5, "subagent_s": 0.2, "tool_wall_s": 0.3}},
        {"tokens": 5, "prompt_tokens": 160, "crops": [], "timing": {}}]}  # fmt: skip
    cost = episode_cost(record, subagent=True)
    # a record without the visual-token count (made before it existed) says null, not 0
    assert cost == {"turns": 2, "crops": 1, "frames_decoded": 6, "visual_tokens": None, "generated_tokens": 15,
                    "prompt_tokens": 260, "model_calls": 3, "critical_path": 4, "wall_s": 3.0,
                    "wall_s_serial": 3.4}  # fmt: skip
    # 16 tokens an overview frame; the sub-agent reads the crop's 4 frames at the same size; the critical path is
    # model -> crop -> sub-agent, then the answering model call
    cost = episode_cost({**record, "overview_visual_tokens": 32}, subagent=True)
    assert cost["visual_tokens"] == 32 + 4 * 16 and cost["critical_path"] == 4
    # frames mode: the main agent reads the crop frames its next observation carried; no sub-agent step
    turns = [{**record["turns"][0], "visual_tokens": 48}, record["turns"][1]]
    cost = episode_cost({**record, "turns": turns, "overview_visual_tokens": 32}, subagent=False)
    assert cost["visual_tokens"] == 80 and cost["critical_path"] == 3


def test_the_critical_path_counts_a_turn_of_parallel_crops_once():
    from paravt_env.records import critical_path

    parallel = [{"crops": [{"status": "executed"}] * 4}, {"crops": []}]
    sequential = [{"crops": [{"status": "executed"}]} for _ in range(4)] + [{"crops": []}]
    assert critical_path(parallel) == 3 and critical_path(sequential) == 9
    assert critical_path([{"crops": [{"status": "rejected"}]}]) == 1  # a refused call runs nothing


def test_records_say_which_events_the_agent_was_shown_and_count_its_visual_tokens(synth_two_colours, tmp_path):
    _, samples = synth_two_colours
    config = EnvConfig(frame_budget=8, crop_fps=0.5, crop_max_frames=8, crop_budget=8)
    evaluate(samples, lambda: make_baseline("detector"), tmp_path / "ev", config, progress=False)
    rows = read_results(tmp_path / "ev" / "results.jsonl")
    found_by_crops = 0
    for row in rows:
        record = row["episode"]
        crop_times = [t for turn in record["turns"] for c in turn["crops"] if c["status"] == "executed" for t in c["timestamps"]]
        for e in record["events"]:
            assert e["asked"] is True  # both needles are asked about
            assert e["in_overview"] == any(e["start"] <= t < e["end"] for t in record["overview"])
            assert e["in_crops"] == any(e["start"] <= t < e["end"] for t in crop_times)
            found_by_crops += e["in_crops"] and not e["in_overview"]
        # 112 px frames are 4 x 4 tokens of 28 px, every frame decoded is read by the main agent (frames mode)
        assert record["overview_visual_tokens"] == 16 * len(record["overview"])
        assert record["cost"]["visual_tokens"] == 16 * record["cost"]["frames_decoded"]
        assert record["cost"]["critical_path"] == len(record["turns"]) + sum(
            any(c["status"] == "executed" for c in t["crops"]) for t in record["turns"])
    assert found_by_crops > 0
