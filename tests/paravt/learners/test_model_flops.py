"""The analytic FLOP count (MFU's numerator) equals what torch's FLOP counter measures on a real forward pass."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paravt.learners.model_flops import FlopModel, peak_flops  # noqa: E402
from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt_env.messages import Message  # noqa: E402


@pytest.mark.parametrize("n_images", [0, 3])
def test_forward_flops_equal_torchs_flop_counter(n_images, tiny_qwen3):
    from torch.utils.flop_counter import FlopCounterMode

    policy = HFPolicy.from_pretrained(tiny_qwen3)
    policy.model.set_attn_implementation("eager")  # attention as matmuls, which the counter sees (not CPU SDPA)
    rng = np.random.default_rng(n_images)
    frames = [rng.integers(0, 255, (112, 112, 3), dtype=np.uint8) for _ in range(n_images)]
    text = "".join(f"<{i}.0 seconds><image>\n" for i in range(n_images)) + "What shape is it? " * 20
    encoded = policy.encode([Message("user", text, frames)])
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        policy.model(**policy.model_inputs(encoded))
    assert FlopModel.of(policy.model).sequence_flops(encoded) == counter.get_total_flops() > 0


def test_no_peak_is_claimed_for_a_cpu():
    assert peak_flops(torch.device("cpu")) is None
