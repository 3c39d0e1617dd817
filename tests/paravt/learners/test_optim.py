"""bf16 weights under AdamW at RL learning rates: plain AdamW loses most updates, master weights keep them."""

import pytest

torch = pytest.importorskip("torch")

from paravt.learners.optim import MasterWeightAdamW, adamw  # noqa: E402


def _train(opt_factory, steps=200, lr=1e-5):
    torch.manual_seed(0)
    weight = torch.nn.Parameter((torch.randn(64, 64) * 0.02).bfloat16())
    start = weight.detach().float().clone()
    direction = torch.randn(64, 64).bfloat16()
    opt = opt_factory([weight], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        (weight * direction).sum().backward()  # a constant gradient: AdamW moves each weight ~lr per step
        opt.step()
    return (weight.detach().float() - start).abs(), opt, weight


def test_plain_adamw_on_bf16_weights_loses_most_updates():
    moved, _, _ = _train(lambda p, lr: torch.optim.AdamW(p, lr=lr, weight_decay=0.0))
    # 200 steps of ~1e-5 each: rounded away wherever bf16's spacing exceeds twice that (|w| > ~2.5e-3); only
    # the smallest weights move
    assert (moved > 0).float().mean() < 0.25
    assert moved.mean() < 0.2 * 2e-3


def test_master_weights_keep_them():
    moved, opt, weight = _train(lambda p, lr: adamw(p, lr=lr, weight_decay=0.0))
    assert isinstance(opt, MasterWeightAdamW) and weight.dtype == torch.bfloat16
    # ~200 x 1e-5 = 2e-3 per weight, up to bf16 rounding of the result
    assert moved.mean() == pytest.approx(2e-3, rel=0.1)
    assert (opt.masters[0].detach() - weight.detach().float()).abs().max() < 1e-3  # the model holds the rounded masters


def test_fp32_weights_get_plain_adamw():
    assert type(adamw([torch.nn.Parameter(torch.zeros(2))], lr=1e-3, weight_decay=0.0)) is torch.optim.AdamW


def test_masters_survive_a_state_dict_round_trip():
    _, opt, weight = _train(lambda p, lr: adamw(p, lr=lr, weight_decay=0.01), steps=20)
    state = opt.state_dict()
    fresh = adamw([torch.nn.Parameter(weight.detach().clone())], lr=1e-5, weight_decay=0.01)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.masters[0], opt.masters[0])  # the fp32 values, not the rounded weights
    assert not torch.equal(fresh.masters[0], weight.detach().float())


def test_a_bf16_run_hands_the_cold_started_weights_to_rls_masters(tmp_path, monkeypatch):
    """The RL optimiser is made before the cold start trains the weights: its fp32 masters must be those the cold
    start left, else the first RL step would write the pre-cold-start weights back."""
    from paravt.learners.config import load_recipe
    from paravt.learners.trainer import Trainer

    monkeypatch.setenv("PARAVT_CACHE", str(tmp_path / "cache"))
    cfg = load_recipe("tiny_cpu", ["model.dtype=bf16", "sft.steps=3", "sft.episodes=2", "perception.steps=0",
                                   "data.synth_n=2", "data.heldout_n=0", "rollout.prompts_per_step=1", "rollout.group_size=2",
                                   "rollout.max_new_tokens=24"])  # fmt: skip
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    try:
        before = [p.detach().clone() for p in trainer.policy.model.parameters()]
        trainer.cold_start()
        params = list(trainer.policy.model.parameters())
        assert any(not torch.equal(a, b) for a, b in zip(before, params, strict=True))  # the cold start trained
        assert isinstance(trainer.optimizer, MasterWeightAdamW)
        assert all(torch.equal(m, p.detach().float()) for m, p in zip(trainer.optimizer.masters, params, strict=True))
        cold = [p.detach().clone() for p in params]
        trainer.rl_step()  # the first step starts from them: the weights stay by the cold start's, not by the base's
        to_cold = sum(float((p.detach().float() - c.float()).abs().sum()) for p, c in zip(params, cold, strict=True))
        to_base = sum(float((p.detach().float() - b.float()).abs().sum()) for p, b in zip(params, before, strict=True))
        assert to_cold < 0.1 * to_base
    finally:
        trainer.close()
