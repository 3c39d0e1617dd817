"""``paravt.learners.para_grpo``: the algorithm table is the one place that tells algorithms apart, and what it
sets reaches the env the local trainer and the OpenRLHF executor build."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from paravt.learners.adapters.recipe_env import env_options  # noqa: E402
from paravt.learners.config import TrainConfig, load_recipe  # noqa: E402
from paravt.learners.para_grpo import ALGORITHMS, ParaGRPOConfig, algorithm  # noqa: E402
from paravt.learners.run_setup import env_config  # noqa: E402
from paravt_env import EnvConfig, RewardConfig  # noqa: E402
from paravt_env.protocol import THINK_PREFIX  # noqa: E402

REPO = Path(__file__).resolve().parents[3]


def test_the_table_sets_what_each_algorithm_means():
    assert sorted(ALGORITHMS) == ["grpo", "para_grpo"]
    para = algorithm("para_grpo", ParaGRPOConfig())
    assert para.nframes_gating and para.think_prefix and not para.token_anchoring and para.reward == RewardConfig.paravt()
    vanilla = algorithm("grpo", ParaGRPOConfig(anchoring="token"))  # the para section does not reach vanilla GRPO
    assert not (vanilla.nframes_gating or vanilla.think_prefix or vanilla.token_anchoring)
    assert vanilla.reward == RewardConfig.vanilla()
    ablated = algorithm("para_grpo", ParaGRPOConfig(nframes_gating=False, think_prefix=False, anchoring="token"))
    assert not ablated.nframes_gating and not ablated.think_prefix and ablated.token_anchoring
    assert ablated.reward.anchor_weight == 0.0  # token anchoring applies λ in the loss, not the scalar reward
    with pytest.raises(ValueError, match=r"one of \['grpo', 'para_grpo'\], got 'ppo'"):
        TrainConfig(algorithm="ppo")


@pytest.mark.parametrize(("name", "gating", "prefix"), [("para_grpo", True, THINK_PREFIX), ("grpo", False, "")])
def test_the_local_env_and_the_executor_env_are_built_by_one_builder(name, gating, prefix):
    cfg = load_recipe("paragrpo_qwen3vl_8b", [f"algorithm={name}", "seed=7", "env.dispatch=sequential"])
    local = env_config(cfg)
    assert (local.nframes_gating, local.response_prefix, local.seed, local.dispatch) == (gating, prefix, 7, "sequential")
    assert local.reward == cfg.settings().reward
    executor = EnvConfig.from_kwargs(**{**env_options(cfg, "openrlhf"), "subagent": lambda r: ""})
    for field in ("nframes_gating", "gating_choices", "response_prefix", "seed", "reward", "dispatch", "protocol", "tool_result"):
        assert getattr(executor, field) == getattr(local, field), field


def _sources(*roots: str):
    for root in roots:
        for path in sorted((REPO / root).rglob("*.py")):
            yield path.relative_to(REPO).as_posix(), path.read_text()


def test_no_module_outside_the_table_compares_algorithm_names():
    pattern = re.compile(r"""algorithm\s*(==|!=|\bin\b)|(==|!=)\s*["'](para_)?grpo["']""")
    hits = [f"{name}:{text[: m.start()].count(chr(10)) + 1}" for name, text in _sources("paravt", "paravt_env", "benchmarks")
            for m in pattern.finditer(text) if name != "paravt/learners/para_grpo.py"]  # fmt: skip
    assert hits == []


def test_no_module_outside_the_episode_registry_compares_protocol_names():
    # (a sub-agent request's ``style`` is its prompt's style, not a protocol: SubAgentRequest.release_style)
    pattern = re.compile(r"""protocol["')\]]*\s*(==|!=|\bin\b)|(?<!style )(==|!=)\s*["'](paravt|release|release_rl)["']""")
    hits = [f"{name}:{text[: m.start()].count(chr(10)) + 1}" for name, text in _sources("paravt", "paravt_env", "benchmarks")
            for m in pattern.finditer(text) if not name.startswith("paravt_env/episodes/")]  # fmt: skip
    assert hits == []


def test_para_grpo_passes_the_broken_call_penalty_to_the_env_reward():
    assert ParaGRPOConfig(broken_call_penalty=0.1).reward_config().broken_call_penalty == 0.1
    assert ParaGRPOConfig().reward_config().broken_call_penalty == 0.0
