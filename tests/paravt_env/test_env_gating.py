import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from paravt_env import FRAME_BUDGETS, GroupedEnv, gated_frame_budget


def test_budget_is_one_of_the_choices_and_stable_across_processes():
    k = gated_frame_budget("video-42", epoch=3, seed=7)
    assert k in FRAME_BUDGETS
    code = "from paravt_env.gating import gated_frame_budget; print(gated_frame_budget('video-42', epoch=3, seed=7))"
    for hashseed in ("1", "12345"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": hashseed})  # fmt: skip
        assert int(out.stdout) == k


def test_budget_varies_across_epochs_and_seeds_and_is_roughly_uniform():
    assert len({gated_frame_budget("s", epoch=e) for e in range(20)}) >= 3
    assert len({gated_frame_budget("s", seed=s) for s in range(20)}) >= 3
    counts = Counter(gated_frame_budget(f"id-{i}") for i in range(2000))
    assert set(counts) == set(FRAME_BUDGETS)
    assert all(0.12 <= c / 2000 <= 0.28 for c in counts.values())


def test_group_shares_k_and_overview_within_a_sample_and_epoch(synth_small):
    _, samples = synth_small
    group = GroupedEnv(samples, group_size=4, nframes_gating=True, crop_max_frames=4)
    try:
        ks = set()
        for epoch in range(6):
            obs, infos = group.reset(index=1, epoch=epoch)
            assert len({i["frame_budget"] for i in infos}) == 1
            k = infos[0]["frame_budget"]
            ks.add(k)
            assert k == gated_frame_budget(samples[1].id, epoch, 0)
            for o in obs[1:]:
                assert np.array_equal(o["frames"], obs[0]["frames"]) and o["text"] == obs[0]["text"]
        assert len(ks) >= 2
    finally:
        group.close()


def test_group_step_one_action_per_copy(synth_small):
    _, samples = synth_small
    group = GroupedEnv(samples, group_size=3, frame_budget=4)
    try:
        group.reset(index=0)
        call = '<tool_call>{"name": "crop_video", "arguments": {"start_time": 1, "end_time": 5}}</tool_call>'
        obs, rewards, terms, truncs, infos = group.step(["<answer>A</answer>", call, "nothing"])
        assert terms == [True, False, True] and obs[1]["frames"].shape[0] > 0
        assert infos[1]["tool_calls"]["executed"] == 1
        obs, rewards, terms, truncs, infos = group.step([None, "<answer>B</answer>", None])
        assert obs[0] is None and obs[2] is None and terms[1] and group.all_done
        with pytest.raises(ValueError, match="3 actions"):
            group.step(["a", "b"])
    finally:
        group.close()
