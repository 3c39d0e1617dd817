import pytest

torch = pytest.importorskip("torch")

from paravt.policies.logprobs import SampledLogprobs, target_logprobs  # noqa: E402


def _plain(logits, targets, temperature, suppress):
    """The computation the chunked one replaces: one fp32 log-softmax over every position."""
    scaled = logits.float() / temperature
    banned = torch.zeros(logits.shape[-1], dtype=torch.bool)
    banned[suppress] = True
    lp = torch.log_softmax(scaled.masked_fill(banned, float("-inf")), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return torch.where(banned[targets], torch.zeros_like(lp), lp)


@pytest.mark.parametrize("chunk_elements", [1 << 26, 700, 97])  # one chunk; several; fewer elements than a row
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunked_logprobs_and_gradients_equal_the_plain_computation_bit_for_bit(chunk_elements, dtype):
    """Same values and same gradients as one fp32 log-softmax over every position (the path before): a
    training run gives the same numbers either way."""
    torch.manual_seed(0)
    logits = torch.randn(3, 11, 50).to(dtype).requires_grad_(True)
    targets = torch.randint(0, 50, (3, 11))
    targets[0, 2] = 7  # a suppressed id as a target: scored 0
    weights = torch.randn(3, 11)

    expected = _plain(logits, targets, 0.7, [7, 9])
    (expected * weights).sum().backward()
    grad_expected, logits.grad = logits.grad.clone(), None

    got = target_logprobs(logits, targets, temperature=0.7, suppress_ids=[7, 9], chunk_elements=chunk_elements)
    assert got.shape == targets.shape and got.dtype == torch.float32
    assert got[0, 2] == 0
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    (got * weights).sum().backward()
    torch.testing.assert_close(logits.grad, grad_expected, rtol=0, atol=0)


def test_bf16_logits_are_scored_in_fp32():
    torch.manual_seed(1)
    logits = torch.randn(2, 5, 30).bfloat16()
    targets = torch.randint(0, 30, (2, 5))
    got = target_logprobs(logits, targets, temperature=1.0, chunk_elements=60)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, torch.log_softmax(logits.float(), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1))


def test_the_recorder_keeps_the_sampled_tokens_logprob_under_the_warped_distribution():
    """What generate would do step by step: the recorder sees each step's scores and, a step later, the sampled
    token; its log-prob must be that of the temperature- and top-p-warped distribution."""
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper

    torch.manual_seed(2)
    rec = SampledLogprobs(0.7, 0.9)
    ids = torch.zeros(4, 1, dtype=torch.long)
    expected = []
    for _ in range(6):
        raw = torch.randn(4, 40)
        warped = rec(ids, raw.clone())
        reference = TopPLogitsWarper(0.9)(ids, TemperatureLogitsWarper(0.7)(ids, raw.clone()))
        torch.testing.assert_close(warped, reference)
        token = torch.multinomial(torch.softmax(warped, -1), 1)
        expected.append(torch.log_softmax(reference, -1).gather(-1, token).squeeze(-1))
        ids = torch.cat([ids, token], dim=1)
    got = rec.finish(ids[:, 1:])
    torch.testing.assert_close(got, torch.stack(expected, 1))
    assert torch.isfinite(got).all()  # a sampled token is never one top-p removed


def test_generation_tokens_and_logprobs_equal_those_of_the_full_scores(tiny_qwen3):
    """One batched sampling call gives the tokens and behaviour log-probs that the way they were computed before
    gives: generate's own warpers, every step's scores kept (``output_scores``) and log-softmaxed afterwards."""
    from paravt.policies.hf import HFPolicy

    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=24, temperature=0.8)
    policy.top_p = 0.95
    prompts = [policy.encode([_user("What shape?")]), policy.encode([_user("Which colour appears first?")])]
    torch.manual_seed(3)
    gens = [policy._generation(*row, "") for row in policy._hf_generate(prompts, 0.8, 24)]

    inputs = policy._padded_inputs(prompts, left=True)
    torch.manual_seed(3)
    out = policy.model.generate(**inputs, max_new_tokens=24, do_sample=True, temperature=0.8, top_p=0.95, top_k=None,
                                eos_token_id=policy.eos_ids, pad_token_id=policy.pad_id, suppress_tokens=policy.suppress_ids,
                                return_dict_in_generate=True, output_scores=True)  # fmt: skip
    new = out.sequences[:, inputs["input_ids"].shape[1] :]
    full = torch.stack([torch.log_softmax(s.float(), -1) for s in out.scores], 1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
    assert sum(len(g.token_ids) for g in gens) > 10
    for i, gen in enumerate(gens):
        n = len(gen.token_ids)
        assert gen.token_ids == new[i, :n].tolist()
        torch.testing.assert_close(torch.tensor(gen.logprobs), full[i, :n].cpu())


def _user(text):
    from paravt_env.messages import Message

    return Message("user", text)
