"""``benchmarks/tvshim``: the torchvision stand-in lets transformers' Qwen-VL ``AutoProcessor`` load (what the engines'
own processor paths call), and the processor it gives sees what the local trainer's sees: the same image grids and
pads, and the same pixels where no resize is needed (one uint8 step where PIL and torch resample differently).
Run in a subprocess with the stand-in on its path, so this test process keeps transformers' no-torchvision view."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SHIM = Path(__file__).resolve().parents[2] / "benchmarks" / "tvshim"

CHECK = r"""
import json, sys
import numpy as np, torch
from PIL import Image
import torchvision
from torchvision.transforms.v2 import functional as tvF
from transformers import AutoProcessor
from paravt.policies.vision_inputs import tokenizer_and_pil_image_processor

path = sys.argv[1]
auto = AutoProcessor.from_pretrained(path)
_, pil = tokenizer_and_pil_image_processor(path)
budget = {"size": {"shortest_edge": 784, "longest_edge": 12544}}  # a pixel budget, passed as HFPolicy passes it
rng = np.random.default_rng(0)
rows = []
for shape in [(96, 96, 3), (64, 128, 3), (100, 150, 3), (360, 640, 3)]:
    images = [Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)) for _ in range(3)]
    a = auto.image_processor(images=images, return_tensors="pt", **budget)
    b = pil(images=images, return_tensors="pt", **budget)
    rows.append({"shape": shape, "grids": [a["image_grid_thw"].tolist(), b["image_grid_thw"].tolist()],
                 "diff": float((a["pixel_values"] - torch.as_tensor(b["pixel_values"])).abs().max())})
x = torch.arange(2 * 3 * 5 * 7, dtype=torch.uint8).reshape(2, 3, 5, 7)
ops = {
    "same_size_is_identity": tvF.resize(x, [5, 7], tvF.InterpolationMode.BICUBIC) is x,
    "bicubic_uint8": torch.equal(tvF.resize(x, [10, 14], tvF.InterpolationMode.BICUBIC),
                                 torch.nn.functional.interpolate(x, size=[10, 14], mode="bicubic", antialias=True, align_corners=False)),
    "normalize": torch.allclose(tvF.normalize(x.float(), [1.0, 2.0, 3.0], [2.0, 2.0, 2.0])[:, 1], (x[:, 1].float() - 2) / 2),
    "crop_pads_outside": tvF.crop(x, 3, 5, 4, 4).shape == (2, 3, 4, 4) and int(tvF.crop(x, 3, 5, 4, 4)[..., 2:, :].sum()) == 0,
    "processor": type(auto).__name__, "image_processor_backend": getattr(auto.image_processor, "backend", "?"),
    "torchvision": torchvision.__version__,
}
print(json.dumps({"rows": rows, "ops": ops}))
"""


def test_autoprocessor_loads_and_matches_the_local_processor(tiny_qwen3):
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SHIM), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", CHECK, str(tiny_qwen3)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    ops = result["ops"]
    assert ops["processor"] == "Qwen3VLProcessor" and ops["image_processor_backend"] == "torchvision"
    assert ops["torchvision"] == "0.28.0"
    assert all(ops[k] for k in ("same_size_is_identity", "bicubic_uint8", "normalize", "crop_pads_outside")), ops
    for row in result["rows"]:
        auto_grids, pil_grids = row["grids"]
        assert auto_grids == pil_grids, row  # the same pads per frame
        exact = row["shape"][0] % 32 == 0 and row["shape"][1] % 32 == 0 and row["shape"][0] * row["shape"][1] <= 12544
        # normalised pixels: 1 / 255 / 0.5 per uint8 step (Qwen3-VL's mean = std = 0.5)
        assert row["diff"] < (1e-6 if exact else 2 / 255 / 0.5 + 1e-6), row
