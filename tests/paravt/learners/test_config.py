"""Recipe values are checked against the config's field types when parsed, before any work starts."""

import json

import pytest

from paravt.learners.config import load_recipe


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("grpo.kl_coef=abc", "grpo.kl_coef must be float, got 'abc'"),
        ("para.think_prefix=maybe", "para.think_prefix must be bool"),
        ("steps=2.5", "steps must be int"),
        ("data.event_scale=[0.5]", "data.event_scale must hold 2 values"),
        ("data.question_kinds=oe_colour", "data.question_kinds must be a list"),
        ("model.path=3", "model.path must be str"),
        ("steps=-3", "steps must be at least 0, got -3"),
        ("rollout.group_size=0", "rollout.group_size must be at least 1"),
        ("model.size=3b", "model.size must be one of tiny, 2b, 8b, got '3b'"),
        ("model.tiny_arch=qwen2_5_vl model.size=2b", "model.size '2b' is a Qwen3-VL size"),
    ],
)
def test_bad_override_names_key_type_and_value(override, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        load_recipe("tiny_cpu", override.split())


def test_values_are_normalised():
    cfg = load_recipe("tiny_cpu", ["optim.lr=1", "data.event_scale=[1, 1]", "model.path=null"])
    assert cfg.optim.lr == 1 and cfg.data.event_scale == (1.0, 1.0) and cfg.model.path is None
    assert isinstance(cfg.sft.frame_budgets, tuple)
    import yaml

    assert load_recipe("tiny_cpu", [f"optim.lr={yaml.safe_dump('1e-3').strip()}"]).optim.lr == 1e-3
    for name in ("tiny_cpu", "paragrpo_qwen3vl_8b", "vanilla_grpo_qwen3vl_8b"):
        load_recipe(name)  # the shipped recipes pass their own types


def test_gating_choices_reach_the_env_and_the_openrlhf_executor_and_bad_ones_are_refused():
    from paravt.learners.adapters.openrlhf.launcher import max_images
    from paravt.learners.adapters.recipe_env import env_options
    from paravt.learners.run_setup import env_config

    cfg = load_recipe("tiny_cpu", ["para.gating_choices=[4, 16]"])
    assert env_config(cfg).gating_choices == (4, 16) and env_options(cfg, "openrlhf")["gating_choices"] == [4, 16]
    assert max_images(cfg) >= 16
    assert load_recipe("paragrpo_qwen3vl_8b").para.gating_choices == (4, 8, 16, 32, 64)  # the paper's
    with pytest.raises(ValueError, match="para.gating_choices"):
        load_recipe("tiny_cpu", ["para.gating_choices=[0, 8]"])


def test_the_env_section_is_an_env_config_checked_by_env_config_itself():
    import json

    from paravt_env import EnvConfig
    from paravt_env.tools import PendingSubAgent

    cfg = load_recipe("tiny_cpu", ["env.dispatch=sequential", "env.subtitles=true", "env.overview_tolerance=0.5"])
    assert isinstance(cfg.env, EnvConfig) and cfg.env.dispatch == "sequential" and cfg.env.overview_tolerance == 0.5
    with pytest.raises(ValueError, match=r"recipe section env: EnvConfig.dispatch must be one of"):
        load_recipe("tiny_cpu", ["env.dispatch=sideways"])
    with pytest.raises(ValueError, match=r"unknown recipe key\(s\) \['env.frame_budgett'\]"):
        load_recipe("tiny_cpu", ["env.frame_budgett=8"])
    # a sub-agent mode names a sub-agent still to come (the trainer attaches the policy); config.json leaves it out
    sub = load_recipe("paragrpo_qwen3vl_8b")
    assert sub.env.tool_result == "subagent" and isinstance(sub.env.subagent, PendingSubAgent)
    assert "subagent" not in json.loads(json.dumps(sub.as_dict()))["env"]


@pytest.mark.parametrize(("key", "where"), [("nframes_gating", "para.nframes_gating"), ("seed", "seed (top level)"),
                                            ("response_prefix", "para.think_prefix"), ("gating_choices", "para.gating_choices")])  # fmt: skip
def test_what_the_algorithm_sets_cannot_be_set_in_the_env_section(key, where):
    value = {"nframes_gating": "true", "seed": "3", "response_prefix": "x", "gating_choices": "[4]"}[key]
    with pytest.raises(ValueError, match=rf"env.{key} is set by the algorithm.*{where.replace('(', r'[(]').replace(')', r'[)]')}"):
        load_recipe("tiny_cpu", [f"env.{key}={value}"])


def test_a_recipe_with_a_yaml_error_names_the_file_line_and_column(tmp_path, capsys):
    from paravt.cli import main
    from paravt.learners.config import load_recipe

    broken = tmp_path / "broken.yaml"
    broken.write_text("steps: 3\nrollout:\n  group_size: [2, 4\n")
    with pytest.raises(ValueError, match=r"broken.yaml, line \d+, column \d+: not valid YAML"):
        load_recipe(str(broken))
    tabbed = tmp_path / "tabbed.yaml"
    tabbed.write_text("rollout:\n\tgroup_size: 2\n")
    with pytest.raises(ValueError, match=r"tabbed.yaml, line 2, column 1: not valid YAML"):
        load_recipe(str(tabbed))
    listed = tmp_path / "listed.yaml"
    listed.write_text("- steps\n- 3\n")
    with pytest.raises(ValueError, match="listed.yaml: a recipe is a mapping"):
        load_recipe(str(listed))
    for argv in (["train", "--recipe", str(tabbed), "--out", str(tmp_path / "run")],
                 ["export", "verl", "--recipe", str(tabbed), "--data", str(tmp_path), "--out", str(tmp_path / "v")]):
        assert main(argv) != 0
        err = capsys.readouterr().err
        assert "tabbed.yaml, line 2, column 1" in err and "Traceback" not in err


@pytest.mark.parametrize(("override", "words"), [
    ("model.dtype=fp8", "model.dtype must be one of ['fp32', 'bf16'], got 'fp8'"),
    ("model.device=gpu", "model.device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got 'gpu'"),
    ("model.tiny_arch=llava", "model.tiny_arch must be one of ['qwen3_vl', 'qwen2_5_vl']"),
    ("sft.coverage=wide", "sft.coverage must be one of ['widen', 'continue']"),
    ("sft.lr_schedule=linear", "sft.lr_schedule must be one of"),
    ("steps.x=1", "steps is a value, not a section"),
    ("rollout.group_size=[1", "its value is not valid YAML"),
])
def test_an_enumerated_value_is_checked_when_the_recipe_loads(override, words):
    from paravt.learners.config import load_recipe

    with pytest.raises(ValueError) as caught:
        load_recipe("tiny_cpu", [override])
    assert words in str(caught.value)
    assert load_recipe("tiny_cpu", ["model.device=cuda:1", "model.dtype=bf16"]).model.device == "cuda:1"


@pytest.mark.parametrize("algorithm", ["grpo", "para_grpo"])
def test_tool_credit_reaches_the_env_reward_of_every_algorithm(algorithm):
    """grpo.tool_credit=false (the tool-neutral reward) changes only that field of the algorithm's own reward."""
    import dataclasses

    from paravt.learners.run_setup import env_config

    released = load_recipe("tiny_cpu", [f"algorithm={algorithm}"])
    neutral = load_recipe("tiny_cpu", [f"algorithm={algorithm}", "grpo.tool_credit=false"])
    assert env_config(released).reward.tool_credit is True
    assert env_config(neutral).reward == dataclasses.replace(env_config(released).reward, tool_credit=False)
    with pytest.raises(ValueError, match="grpo.tool_credit"):
        load_recipe("tiny_cpu", ["grpo.tool_credit=maybe"])


def test_the_quick_recipe_is_the_main_job_at_small_size():
    """tiny_quick runs every stage of tiny_cpu with the same model, task, algorithm and sampling: only sizes differ."""
    from paravt.learners.plan import job_stages
    from paravt.learners.trainer import flatten_dotted

    main_job, quick = (flatten_dotted(json.loads(json.dumps(load_recipe(n).as_dict()))) for n in ("tiny_cpu", "tiny_quick"))
    sizes = {"steps", "save_every", "data.synth_n", "data.heldout_n", "data.validation_n", "select.every", "select.after",
             "perception.steps", "perception.videos", "sft.steps", "sft.episodes"}  # fmt: skip
    assert {k for k in main_job.keys() | quick.keys() if main_job.get(k) != quick.get(k)} == sizes
    assert all(quick[k] < main_job[k] for k in sizes if k not in ("select.every", "select.after"))
    stages = [s.key for s in job_stages(load_recipe("tiny_quick"), "/nonexistent/run", steps=None, resume=False)]
    assert stages == ["videos", "perception examples", "perception", "teacher episodes", "sft", "train", "eval"]
