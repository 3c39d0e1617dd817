"""``recipe_env`` builds the local trainer's env for TRL, and refuses what TRL cannot train."""

import pytest

from paravt.learners.adapters.trl.recipe import recipe_env
from paravt.learners.config import load_recipe
from paravt.learners.run_setup import env_config


def test_the_recipes_env_or_a_clear_refusal(synth_small):
    _, samples = synth_small
    cfg = load_recipe("paragrpo_qwen3vl_8b", ["env.tool_result=frames", "env.max_pixels=12544"])
    env = recipe_env(cfg, samples)()
    want = env_config(cfg)
    assert env.config.nframes_gating and env.config.response_prefix == want.response_prefix == "<think>\n"
    assert env.config.reward == want.reward and env.config.gating_choices == want.gating_choices
    env.close()
    with pytest.raises(ValueError, match="sub-agent mode has no TRL form"):
        recipe_env(load_recipe("paragrpo_qwen3vl_8b"), samples)
    with pytest.raises(ValueError, match="local-only"):
        recipe_env(load_recipe("paragrpo_qwen3vl_8b", ["env.tool_result=frames", "para.anchoring=token"]), samples)
