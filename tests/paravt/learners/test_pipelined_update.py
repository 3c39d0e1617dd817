"""paravt.learners.pipelined_update: the update's chunks on two threads give the one-thread step bit for bit (the
step's statistics and the weights after it), one forward pass at a time; it runs only where a core is free."""

import json
import threading
import time

import pytest

torch = pytest.importorskip("torch")

from paravt.cli import main  # noqa: E402
from paravt.learners import pipelined_update as pu  # noqa: E402
from paravt.learners import trainer as trainer_module  # noqa: E402

FAST = ["sft.steps=6", "sft.episodes=4", "rollout.group_size=3", "rollout.prompts_per_step=2", "rollout.max_new_tokens=48",
        "data.synth_n=4", "perception.steps=2", "perception.videos=2", "data.heldout_n=1", "optim.micro_batch=2"]  # fmt: skip
CLOCK = {"wall_s", "tokens_per_s", "rollout_s", "reference_s", "update_s", "train_tokens_per_s", "peak_memory_mb"}


def test_a_pipelined_step_is_the_one_thread_step(tmp_path, monkeypatch):
    from safetensors.torch import load_file

    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    calls = []
    real = pu.pipelined_gradients
    monkeypatch.setattr(trainer_module, "pipelined_gradients", lambda *a, **k: (calls.append(a[1]), real(*a, **k))[1])
    rows, weights = {}, {}
    for on in (True, False):
        monkeypatch.setattr(trainer_module, "pipelines", lambda device, on=on: on)
        run = tmp_path / f"pipelined_{on}"
        assert main(["train", "--recipe", "tiny_cpu", "--steps", "3", "--out", str(run), "--no-progress", *FAST]) == 0
        rows[on] = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        weights[on] = load_file(run / "checkpoint" / "model" / "model.safetensors")
    assert len(calls) == 3 and all(n >= 2 for n in calls)  # three pipelined steps of several chunks, none after
    for a, b in zip(rows[True], rows[False], strict=True):
        assert {k: v for k, v in a.items() if k not in CLOCK} == {k: v for k, v in b.items() if k not in CLOCK}
    assert weights[True].keys() == weights[False].keys()
    assert all(torch.equal(weights[True][k], weights[False][k]) for k in weights[True])


@pytest.mark.parametrize(("device", "threads", "cores", "expected"),
                         [("cpu", 1, 2, True), ("cpu", 2, 2, False), ("cpu", 1, 1, False), ("cpu", 2, 4, True), ("cuda", 1, 16, False)])  # fmt: skip
def test_it_pipelines_only_on_a_cpu_with_a_core_to_spare(monkeypatch, device, threads, cores, expected):
    monkeypatch.setattr(pu, "available_cpus", lambda: cores)
    monkeypatch.setattr(pu.torch, "get_num_threads", lambda: threads)
    assert pu.pipelines(torch.device(device)) is expected


def _toy():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    data = [torch.randn(64, 16) for _ in range(5)]
    return model, data


def test_gradients_are_added_in_chunk_order_as_backward_after_backward_adds_them():
    model, data = _toy()
    for x in data:
        model(x).pow(2).mean().backward()
    sequential = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    inside, most = [0], [0]
    forwards = pu.OneForwardAtATime()

    def chunk_loss(k):
        with forwards.of(model):
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            time.sleep(0.01)
            loss = model(data[k]).pow(2).mean()
            inside[0] -= 1
        return loss, (k, threading.current_thread().name)

    rest = pu.pipelined_gradients(chunk_loss, len(data), list(model.parameters()))
    assert [k for k, _ in rest] == list(range(5)) and all(name.startswith("paravt-update") for _, name in rest)
    assert most[0] == 1  # one forward pass of the model at a time
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), sequential, strict=True))


def test_an_error_in_a_chunk_reaches_the_update():
    model, data = _toy()

    def chunk_loss(k):
        if k == 2:
            raise RuntimeError("chunk 2 failed")
        return model(data[k]).sum(), k

    with pytest.raises(RuntimeError, match="chunk 2 failed"):
        pu.pipelined_gradients(chunk_loss, len(data), list(model.parameters()))


def test_one_forward_at_a_time_is_per_model():
    forwards = pu.OneForwardAtATime()
    a, b = object(), object()
    assert forwards.of(a) is forwards.of(a) and forwards.of(a) is not forwards.of(b)
    with forwards.of(a):
        assert not forwards.of(a).acquire(blocking=False)  # another pass of a waits
        assert forwards.of(b).acquire(blocking=False)  # a pass of b does not
        forwards.of(b).release()

