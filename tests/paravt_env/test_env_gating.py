"""nFrames Gating (K ~ U{4, 8, 16, 32, 64} per prompt and epoch, from a stable hash) and GroupedEnv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from paravt_env import FRAME_BUDGETS, EnvConfig, GroupedEnv, VideoToolEnv, gated_frame_budget
from paravt_env.protocol import count_placeholders


def crop(start: float, end: float) -> str:
    arguments = {"start_time": start, "end_time": end}
    return "<tool_call>" + json.dumps({"name": "crop_video", "arguments": arguments}) + "</tool_call>"


def test_frame_budgets_are_the_papers():
    assert FRAME_BUDGETS == (4, 8, 16, 32, 64)
    assert EnvConfig().gating_choices == FRAME_BUDGETS


def test_budget_is_one_of_the_choices():
    for i in range(200):
        assert gated_frame_budget(f"video-{i}", epoch=i % 7, seed=i % 3) in FRAME_BUDGETS
    assert gated_frame_budget("v", 0, 0, choices=(12,)) == 12
    assert {gated_frame_budget(f"v{i}", choices=(2, 3)) for i in range(50)} == {2, 3}
    with pytest.raises(ValueError):
        gated_frame_budget("v", choices=())


def test_budget_is_stable_across_processes(env_samples):
    keys = [(s.id, epoch, seed) for s in env_samples for epoch in range(3) for seed in (0, 7)] + [
        ("video-42", 3, 7)
    ]
    here = [gated_frame_budget(*key) for key in keys]
    code = (
        "import json, sys; from paravt_env.gating import gated_frame_budget; "
        "print(json.dumps([gated_frame_budget(*k) for k in json.loads(sys.argv[1])]))"
    )
    for hashseed in ("1", "98765", "random"):  # Python's own str hash differs under each; gating must not
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        out = subprocess.run([sys.executable, "-c", code, json.dumps(keys)], capture_output=True, text=True,
                             check=True, env=env, timeout=120)  # fmt: skip
        assert json.loads(out.stdout) == here


def test_env_uses_the_gated_budget(env_samples):
    env = VideoToolEnv(env_samples, EnvConfig(nframes_gating=True, seed=3, crop_max_frames=4))
    for i, s in enumerate(env_samples):
        for epoch in range(3):
            obs, info = env.reset(options={"index": i, "epoch": epoch})
            k = gated_frame_budget(s.id, epoch, 3)
            assert info["frame_budget"] == k == obs["frames"].shape[0] == count_placeholders(obs["text"])
            assert env.observation_space.contains(obs)
    # reset(seed=...) seeds the env's own choices, never K; an explicit frame_budget overrides gating.
    _, a = env.reset(seed=1, options={"index": 0, "epoch": 5})
    _, b = env.reset(seed=2, options={"index": 0, "epoch": 5})
    assert a["frame_budget"] == b["frame_budget"] == gated_frame_budget(env_samples[0].id, 5, 3)
    _, info = env.reset(options={"index": 0, "epoch": 5, "frame_budget": 6})
    assert info["frame_budget"] == 6


def test_budget_varies_across_epochs_and_seeds():
    for sample_id in ("s", "synth-7-00000", "lvbench/12345"):
        assert len({gated_frame_budget(sample_id, epoch=e) for e in range(20)}) >= 3
        assert len({gated_frame_budget(sample_id, seed=s) for s in range(20)}) >= 3


def test_budget_is_roughly_uniform_over_ids():
    counts = Counter(gated_frame_budget(f"sample-{i}", epoch=1) for i in range(2000))
    assert set(counts) == set(FRAME_BUDGETS)
    for k in FRAME_BUDGETS:
        assert 0.12 <= counts[k] / 2000 <= 0.28, counts


# --- GroupedEnv -----------------------------------------------------------------------------------------
@pytest.fixture
def group(env_samples):
    group = GroupedEnv(env_samples, group_size=4, nframes_gating=True, crop_max_frames=4, max_turns=3)
    yield group
    group.close()


def test_group_copies_share_k_and_overview_within_a_sample_and_epoch(group, env_samples):
    assert group.group_size == 4 and len(group.samples) == len(env_samples)
    for index in (1, 2):
        ks = set()
        for epoch in range(20):
            obs, infos = group.reset(index=index, epoch=epoch)
            k = gated_frame_budget(env_samples[index].id, epoch, 0)
            assert [i["frame_budget"] for i in infos] == [k] * 4
            assert {i["sample_id"] for i in infos} == {env_samples[index].id}
            ks.add(k)
            for o in obs:
                assert o["frames"].shape[0] == k == count_placeholders(o["text"])
                assert np.array_equal(o["frames"], obs[0]["frames"])
                assert np.array_equal(o["timestamps"], obs[0]["timestamps"])
                assert o["text"] == obs[0]["text"]
            assert all(o["frames"] is not obs[0]["frames"] for o in obs[1:])  # each copy owns its arrays
        assert len(ks) >= 3


def test_group_without_index_follows_the_first_copys_pick(group):
    for seed in range(4):
        _, infos = group.reset(seed=seed, epoch=2)
        assert len({i["sample_id"] for i in infos}) == 1 and len({i["frame_budget"] for i in infos}) == 1


def test_group_copies_differ_across_groups_with_another_env_seed(env_samples):
    ks = {}
    for seed in range(6):
        group = GroupedEnv(env_samples, group_size=2, nframes_gating=True, seed=seed)
        try:
            _, infos = group.reset(index=0, epoch=0)
            ks[seed] = infos[0]["frame_budget"]
            assert infos[1]["frame_budget"] == ks[seed] == gated_frame_budget(env_samples[0].id, 0, seed)
        finally:
            group.close()
    assert len(set(ks.values())) >= 2


def test_group_step_takes_one_action_per_copy(env_samples, mcq_sample):
    group = GroupedEnv(env_samples, group_size=4, frame_budget=4, crop_max_frames=4, max_turns=3)
    try:
        obs, infos = group.reset(sample=mcq_sample)
        assert all(o["frames"].shape[0] == 4 for o in obs)
        actions = [
            f"<answer>{mcq_sample.answer}</answer>",
            crop(1, 5),
            "nothing to say",
            crop(10, 14) + crop(20, 24),
        ]
        obs, rewards, terms, truncs, infos = group.step(actions)
        assert terms == [True, False, True, False] and truncs == [False] * 4
        assert (
            rewards[0] == infos[0]["reward_breakdown"]["total"]
            and infos[0]["reward_breakdown"]["accuracy"] == 1
        )
        assert rewards[1] == rewards[3] == 0.0
        assert infos[1]["tool_calls"]["executed"] == 1 and infos[3]["tool_calls"]["executed"] == 2
        assert np.all((obs[1]["timestamps"] >= 1) & (obs[1]["timestamps"] <= 5)) and len(obs[1]["frames"]) > 0
        assert group.done == [True, False, True, False] and not group.all_done

        # Finished copies take None (any action is ignored) and return None observations.
        obs, rewards, terms, truncs, infos = group.step([None, crop(5, 9), "ignored", "<answer>B</answer>"])
        assert obs[0] is None and obs[2] is None and rewards[0] == rewards[2] == 0.0 and infos[0] == {}
        assert not terms[1] and terms[3] and obs[1] is not None
        obs, rewards, terms, truncs, infos = group.step([None, crop(9, 13), None, None])
        assert truncs[1] and obs[1] is not None and group.all_done
        assert obs[0] is None and obs[2] is None and obs[3] is None

        with pytest.raises(ValueError, match="4 actions"):
            group.step(["a", "b", "c"])
        with pytest.raises(ValueError, match="4 actions"):
            group.step(["a"] * 5)
        group.reset(index=0)
        assert group.done == [False] * 4
    finally:
        group.close()


def test_group_rejects_a_bad_size(env_samples):
    with pytest.raises(ValueError, match="group_size"):
        GroupedEnv(env_samples, group_size=0)
    group = GroupedEnv(env_samples, group_size=1, config=EnvConfig(frame_budget=4))
    try:
        obs, infos = group.reset(index=3)
        assert len(obs) == 1 and infos[0]["sample_id"] == env_samples[3].id
    finally:
        group.close()
