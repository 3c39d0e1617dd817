"""paravt.learners.reference_ahead: the reference's passes beside the update give the step the sequential order
gives, bit for bit; it runs only where a core is free for it; closing it stops what has not begun."""

import json
import threading
import time

import pytest

torch = pytest.importorskip("torch")

from paravt.cli import main  # noqa: E402
from paravt.learners import reference_ahead as ra  # noqa: E402
from paravt.learners import trainer as trainer_module  # noqa: E402
from paravt.learners.step_clock import StepClock  # noqa: E402

FAST = ["sft.steps=6", "sft.episodes=4", "rollout.group_size=3", "rollout.prompts_per_step=2", "rollout.max_new_tokens=48",
        "data.synth_n=4", "perception.steps=2", "perception.videos=2", "data.heldout_n=1"]  # fmt: skip
CLOCK = {"wall_s", "tokens_per_s", "rollout_s", "reference_s", "reference_wait_s", "update_s", "train_tokens_per_s",
         "peak_memory_mb"}  # fmt: skip


def test_a_step_with_the_reference_beside_is_the_sequential_step(tmp_path, monkeypatch):
    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    seen = []
    real = ra.ReferenceAhead

    class Spy(real):
        def __init__(self, *a, **k):
            seen.append(threading.current_thread().name)
            super().__init__(*a, **k)

    monkeypatch.setattr(trainer_module, "ReferenceAhead", Spy)
    rows, weights = {}, {}
    for beside in (True, False):
        monkeypatch.setattr(trainer_module, "beside", lambda device, on=beside: on)
        run = tmp_path / f"beside_{beside}"
        assert main(["train", "--recipe", "tiny_cpu", "--steps", "2", "--out", str(run), "--no-progress", *FAST]) == 0
        rows[beside] = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        from safetensors.torch import load_file

        weights[beside] = load_file(run / "checkpoint" / "model" / "model.safetensors")
    assert len(seen) == 2  # two steps beside, none in the sequential run
    for a, b in zip(rows[True], rows[False], strict=True):
        assert {k: v for k, v in a.items() if k not in CLOCK} == {k: v for k, v in b.items() if k not in CLOCK}
        assert a["reference_s"] > 0 and b["reference_wait_s"] == b["reference_s"]  # sequential: all of it waited
    assert weights[True].keys() == weights[False].keys()
    assert all(torch.equal(weights[True][k], weights[False][k]) for k in weights[True])


@pytest.mark.parametrize(("device", "threads", "cores", "expected"),
                         [("cpu", 1, 2, True), ("cpu", 2, 2, False), ("cpu", 1, 1, False), ("cpu", 2, 4, True), ("cuda", 1, 16, False)])  # fmt: skip
def test_it_runs_beside_only_on_a_cpu_with_a_core_to_spare(monkeypatch, device, threads, cores, expected):
    monkeypatch.setattr(ra, "available_cpus", lambda: cores)
    monkeypatch.setattr(ra.torch, "get_num_threads", lambda: threads)
    assert ra.beside(torch.device(device)) is expected


def test_chunks_come_back_in_order_on_another_thread_without_grad():
    where = []

    def compute(chunk):
        where.append((threading.current_thread().name, torch.is_grad_enabled()))
        return [torch.tensor(float(x)) * 2 for x in chunk]

    with ra.ReferenceAhead(compute, [[1, 2], [3]]) as ahead:
        assert [float(t) for t in ahead.get(0)] == [2.0, 4.0] and [float(t) for t in ahead.get(1)] == [6.0]
    assert all(name.startswith("paravt-reference") and not grad for name, grad in where)


def test_closing_stops_what_has_not_begun_and_an_error_reaches_the_update():
    started = []

    def slow(chunk):
        started.append(chunk)
        time.sleep(0.05)
        return []

    ahead = ra.ReferenceAhead(slow, [[k] for k in range(50)])
    ahead.get(0)
    ahead.close()
    assert len(started) < 50
    n = len(started)
    time.sleep(0.1)
    assert len(started) == n  # nothing runs after close

    def broken(chunk):
        raise RuntimeError(f"reference failed on {chunk}")

    with ra.ReferenceAhead(broken, [["x"]]) as ahead, pytest.raises(RuntimeError, match="reference failed on"):
        ahead.get(0)


def test_the_step_clock_charges_only_the_wait_when_the_reference_runs_beside():
    clock = StepClock(torch.device("cpu"))
    with clock.reference():  # the reference's own passes, on its thread
        time.sleep(0.05)
    with clock.waiting():  # what the update waited for them
        time.sleep(0.01)
    row = clock.split(rollout_s=0.0, train_tokens=10)
    assert row["reference_s"] >= 0.05 and 0.01 <= row["reference_wait_s"] < 0.05
    assert row["update_s"] == pytest.approx(row["wall_s"] - row["reference_wait_s"], abs=1e-6)
    sequential = StepClock(torch.device("cpu"))
    with sequential.reference():
        time.sleep(0.02)
    row = sequential.split(rollout_s=0.0, train_tokens=10)
    assert row["reference_wait_s"] == row["reference_s"]
