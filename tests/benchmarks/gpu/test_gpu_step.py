"""benchmarks.gpu.gpu_step runs the real trainer end to end and reports its figures; here on the CPU, tiny model."""

import json

import pytest

torch = pytest.importorskip("torch")

from benchmarks.gpu.gpu_step import FIGURES, main  # noqa: E402

TINY = ["--quick", "model.device=cpu"]  # what the docs' CPU line runs


def test_the_gpu_recipe_reports_every_figure_for_each_engine_from_one_cold_start(tmp_path, monkeypatch, capsys):
    """Two engines, two steps each, from one cold start: every figure per step, each engine's summary over its
    steps after its first, and the engine the policy really used step by step."""
    from paravt.learners.trainer import Trainer

    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    seen, real = [], Trainer.rl_step

    def recording(self):
        seen.append(self.policy.engine)
        return real(self)

    monkeypatch.setattr(Trainer, "rl_step", recording)
    out = tmp_path / "run"
    argv = ["--out", str(out), "--steps", "2", "--engine", "cached,generate", "--peak-tflops", "1", "--no-progress", *TINY]
    assert main(argv) == 0
    result = json.loads((out / "gpu_step.json").read_text())
    assert seen == ["cached", "cached", "generate", "generate"]
    assert [(r["engine"], r["step"]) for r in result["steps"]] == [("cached", 1), ("cached", 2), ("generate", 3), ("generate", 4)]
    assert result["engines"] == ["cached", "generate"] and result["summary_over"] == [2]
    assert result["by_engine"]["generate"]["summary_over"] == [4]
    for row in result["steps"]:
        assert set(FIGURES) <= set(row)
        assert row["rollout_s"] > 0 and row["update_s"] > 0 and row["reference_s"] > 0  # gpu_smoke: KL in the reward
        assert row["train_tokens"] > 0 and row["generated_tokens"] > 0 and row["model_tflops"] > 0
        # MFU = model FLOPs / (update seconds x peak), the peak given as 1 TFLOP/s
        assert row["mfu"] == pytest.approx(row["model_tflops"] / row["update_s"])
    assert result["summary"]["update_s"] == result["steps"][1]["update_s"]
    assert result["by_engine"]["generate"]["summary"]["rollout_s"] == result["steps"][3]["rollout_s"]
    assert result["model"]["size"] == "tiny" and result["parameters"] < 10**6 and result["cold_start_s"] > 0
    printed = capsys.readouterr().out
    assert "step 2 (cached): rollout" in printed and "step 4 (generate): rollout" in printed and "update MFU" in printed
    assert "generate engine, mean of steps [4]" in printed and "cold start: " in printed


def test_an_unknown_engine_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(tmp_path / "x"), "--engine", "cached,vllm", *TINY])
    assert exc.value.code == 2 and "engines are distinct names of cached, generate" in capsys.readouterr().err


def test_a_cuda_recipe_without_a_gpu_is_a_usage_error(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(tmp_path / "x")])
    assert exc.value.code == 2
    assert "torch sees no GPU here; pass model.device=cpu" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_out_of_memory_is_reported_with_its_step(tmp_path, monkeypatch, capsys):
    from paravt.learners.trainer import Trainer

    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    real = Trainer.rl_step

    def second_step_does_not_fit(self):
        if self.step == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 70.00 GiB")
        return real(self)

    monkeypatch.setattr(Trainer, "rl_step", second_step_does_not_fit)
    out = tmp_path / "run"
    assert main(["--out", str(out), "--steps", "3", "--no-progress", *TINY]) == 1
    result = json.loads((out / "gpu_step.json").read_text())
    assert [r["step"] for r in result["steps"]] == [1]
    assert result["out_of_memory"]["step"] == 2 and "Tried to allocate 70.00 GiB" in result["out_of_memory"]["error"]
    assert "out of memory in step 2" in capsys.readouterr().out


def test_a_cold_start_that_does_not_fit_is_step_0(tmp_path, monkeypatch):
    from paravt.learners.trainer import Trainer

    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))

    def does_not_fit(self):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 35.00 GiB")

    monkeypatch.setattr(Trainer, "cold_start", does_not_fit)
    out = tmp_path / "run"
    assert main(["--out", str(out), "--steps", "2", "--no-progress", *TINY]) == 1
    result = json.loads((out / "gpu_step.json").read_text())
    assert result["steps"] == [] and result["out_of_memory"]["step"] == 0


def test_a_published_size_on_a_cpu_is_refused_with_the_way_out(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(tmp_path / "x"), "model.device=cpu"])
    assert exc.value.code == 2 and "--quick" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_quick_is_the_recipe_at_tiny_size_and_the_users_overrides_win():
    import argparse

    from benchmarks.gpu.gpu_step import step_config

    args = argparse.Namespace(recipe="gpu_smoke", quick=True, overrides=["model.device=cpu", "rollout.group_size=4"])
    cfg, overrides = step_config(argparse.ArgumentParser(), args)
    assert cfg.model.size == "tiny" and cfg.data.synth_n == 2 and cfg.rollout.group_size == 4 and cfg.model.device == "cpu"
    assert overrides[-2:] == args.overrides
    assert cfg.model.gradient_checkpointing  # the GPU's path: checkpointing broke the 2B update on a GPU, not the CPU's


def test_stack_dumps_say_where_a_run_is_while_it_runs(capfd):
    import time

    from benchmarks.gpu.gpu_step import stack_dumps

    def somewhere_slow():
        time.sleep(0.7)

    with stack_dumps(0.2):
        somewhere_slow()
    time.sleep(0.4)  # after the block: no more dumps
    err = capfd.readouterr().err
    assert "most recent call first" in err and "somewhere_slow" in err
    assert err.count("somewhere_slow") >= 2  # repeated, not once
    with stack_dumps(None):
        somewhere_slow()
    assert capfd.readouterr().err == ""


def test_the_decode_watch_says_how_far_a_rollout_has_come(capsys):
    """A rollout cut off by a lease's limit must still say its pace: steps, tokens and the rate, while it runs."""
    import time
    from types import SimpleNamespace

    from benchmarks.gpu.gpu_step import decode_watch

    stats = {"decode_steps": 0, "decoded_tokens": 0}
    policy = SimpleNamespace(cached=SimpleNamespace(stats=stats))
    with decode_watch(policy, 0.1):
        for _ in range(8):
            stats["decode_steps"] += 10
            stats["decoded_tokens"] += 80
            time.sleep(0.05)
        time.sleep(0.25)  # idle: nothing new is said
    lines = [x for x in capsys.readouterr().out.splitlines() if "decoding:" in x]
    assert lines and "80 steps, 640 tokens so far" in lines[-1] and "ms a step" in lines[-1]
    with decode_watch(policy, None):
        stats["decode_steps"] += 1
    assert capsys.readouterr().out == ""
