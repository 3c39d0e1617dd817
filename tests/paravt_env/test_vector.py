"""``gymnasium.make_vec`` over the registered env: sync as is, async with ``shared_memory=False`` (as
docs/env.md says), both playing the same episodes as a single env."""

import gymnasium
import numpy as np
import pytest

import paravt_env  # noqa: F401  (registers ParaVT/VideoTool-v0)

ANSWER = "<think>From the overview.</think><answer>A</answer>"


@pytest.mark.parametrize("mode, kwargs", [("sync", {}), ("async", {"shared_memory": False})])
def test_make_vec_plays_what_a_single_env_plays(env_dataset, mode, kwargs):
    data, _ = env_dataset
    single = gymnasium.make("ParaVT/VideoTool-v0", samples=str(data), frame_budget=4)
    expected = [single.reset(seed=s)[0] for s in (3, 4)]
    single.close()
    envs = gymnasium.make_vec("ParaVT/VideoTool-v0", num_envs=2, vectorization_mode=mode, vector_kwargs=kwargs,
                              samples=str(data), frame_budget=4)  # fmt: skip
    try:
        obs, _ = envs.reset(seed=3)  # env i is seeded 3 + i
        for i in range(2):
            assert obs["text"][i] == expected[i]["text"]
            np.testing.assert_array_equal(obs["frames"][i], expected[i]["frames"])
        _, rewards, terminated, _, _ = envs.step([ANSWER, ANSWER])
        assert terminated.all() and rewards.shape == (2,)
    finally:
        envs.close()


def test_async_with_shared_memory_stops_with_gymnasiums_hint(env_dataset):
    data, _ = env_dataset
    with pytest.raises(ValueError, match="shared_memory=False"):
        gymnasium.make_vec("ParaVT/VideoTool-v0", num_envs=2, vectorization_mode="async", samples=str(data))
