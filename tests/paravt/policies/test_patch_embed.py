"""Qwen-VL's patch convolution computed as a matrix product gives the convolution's outputs and gradients, for
both model families, and an HFPolicy computes it that way."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from paravt.policies.patch_embed import linear_patch_embed  # noqa: E402
from paravt.policies.tiny_model import ARCHS, _config, build_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


def _patch_embed(model):
    [module] = [m for m in model.modules() if type(m).__name__.endswith("PatchEmbed")]
    return module


@pytest.mark.parametrize("arch", ARCHS)
def test_same_outputs_and_gradients_as_the_convolution(arch, tokenizer):
    from transformers import AutoModelForImageTextToText

    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_config(_config(arch, tokenizer))
    embed = _patch_embed(model)
    conv = embed.proj
    flat = conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1] * conv.kernel_size[2]
    pixels = torch.randn(37, flat)

    reference = embed(pixels)
    reference.pow(2).sum().backward()
    grad_reference = conv.weight.grad.clone()
    conv.weight.grad = None

    assert linear_patch_embed(model) == 1
    assert "forward" in vars(embed)  # rebound on the instance, not on the class every other model shares
    out = embed(pixels)
    out.pow(2).sum().backward()
    assert out.shape == reference.shape == (37, conv.out_channels)
    torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(conv.weight.grad, grad_reference, rtol=1e-4, atol=1e-4)
    # A half-precision pixel batch is cast to the weights' dtype, as the convolution's forward does.
    torch.testing.assert_close(embed(pixels.half()), embed(pixels.half().float()))


def test_leaves_other_convolutions_alone():
    class StridedPatchEmbed(torch.nn.Module):  # kernel != stride: overlapping windows, not a matrix product
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Conv3d(3, 4, kernel_size=(2, 4, 4), stride=(1, 2, 2))

    model = torch.nn.Sequential(StridedPatchEmbed(), torch.nn.Conv3d(3, 4, 2, stride=2))
    assert linear_patch_embed(model) == 0
    assert "forward" not in vars(model[0])


def test_a_policy_computes_the_patches_as_a_product(tiny_qwen3):
    from paravt.policies.hf import HFPolicy

    policy = HFPolicy.from_pretrained(tiny_qwen3)
    assert "forward" in vars(_patch_embed(policy.model))
