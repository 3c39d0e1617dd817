"""The tiny Qwen-VL checkpoints load and run like released ones: AutoModelForImageTextToText, AutoProcessor,
chat template, processor(text, images), forward pass and greedy generate, for both families."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import types
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from paravt.cli import main  # noqa: E402
from paravt.policies.tiny_model import ARCHS, PROTOCOL_TAGS, build_tiny_model  # noqa: E402

REPO = Path(__file__).resolve().parents[3]  # the repository root (tests/paravt/policies/ -> .)
MODEL_CLASS = {
    "qwen3_vl": "Qwen3VLForConditionalGeneration",
    "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
}
PROCESSOR_CLASS = {"qwen3_vl": "Qwen3VLProcessor", "qwen2_5_vl": "Qwen2_5_VLProcessor"}
PATCH = {"qwen3_vl": 16, "qwen2_5_vl": 14}


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """A model this small is all per-op overhead: with 2 OpenMP threads on a busy 2-core box, the threads'
    busy-waiting makes it ~40x slower. One thread keeps this module fast and its timing check meaningful."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def checkpoints(tiny_qwen3, tmp_path_factory) -> dict[str, Path]:
    """Each family built once (Qwen3-VL is the session-wide ``tiny_qwen3`` of tests/conftest.py)."""
    qwen25 = build_tiny_model(tmp_path_factory.mktemp("tiny25") / "m", arch="qwen2_5_vl")
    return {"qwen3_vl": tiny_qwen3, "qwen2_5_vl": qwen25}


@contextlib.contextmanager
def _video_processor_stubbed():
    """``AutoProcessor`` also builds the family's video processor, which imports torchvision; the CPU torch
    wheel cannot load torchvision, so there ``AutoProcessor`` fails for released checkpoints too. Without
    torchvision, a bare ``VideoProcessorMixin`` stands in for that one sub-processor; everything else (the
    processor class, tokenizer, image processor, chat template) is loaded from the checkpoint for real."""
    from transformers.utils import is_torchvision_available

    if is_torchvision_available():
        yield
        return
    from transformers import processing_utils
    from transformers.video_processing_utils import VideoProcessorMixin

    stub = types.ModuleType("_paravt_no_video_processor")
    stub.NoVideo = type(
        "NoVideo", (), {"from_pretrained": staticmethod(lambda *a, **k: VideoProcessorMixin())}
    )
    names = processing_utils.MODALITY_TO_AUTOPROCESSOR_MAPPING._MAPPING_NAMES
    with (
        mock.patch.dict(sys.modules, {stub.__name__: stub}),
        mock.patch.dict(names, {"video_processor": (stub.__name__, "NoVideo")}),
        mock.patch.object(
            processing_utils.transformers_module, "VideoProcessorMixin", VideoProcessorMixin, create=True
        ),
    ):
        yield


def load(path: Path):
    with _video_processor_stubbed():
        processor = transformers.AutoProcessor.from_pretrained(path)
    return transformers.AutoModelForImageTextToText.from_pretrained(path).eval(), processor


def _images(sides, seed=0):
    from PIL import Image

    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in sides]


CONVERSATION = [
    {"role": "system", "content": "You are a video analyst."},
    {"role": "user", "content": [{"type": "text", "text": "<0.0 seconds>"}, {"type": "image"},
                                 {"type": "text", "text": "<4.5 seconds>"}, {"type": "image"},
                                 {"type": "text", "text": "Which shape? A. circle B. star"}]},
    {"role": "assistant", "content": '<think>Look closer.</think>\n<tool_call>{"name": "crop_video", '
                                     '"arguments": {"start_time": 1.0, "end_time": 3.5}}</tool_call>'},
    {"role": "user", "content": "<tool_response>nothing coloured</tool_response>"},
]  # fmt: skip
RENDERED = (
    "<|im_start|>system\nYou are a video analyst.<|im_end|>\n"
    "<|im_start|>user\n<0.0 seconds><|vision_start|><|image_pad|><|vision_end|>"
    "<4.5 seconds><|vision_start|><|image_pad|><|vision_end|>Which shape? A. circle B. star<|im_end|>\n"
    '<|im_start|>assistant\n<think>Look closer.</think>\n<tool_call>{"name": "crop_video", '
    '"arguments": {"start_time": 1.0, "end_time": 3.5}}</tool_call><|im_end|>\n'
    "<|im_start|>user\n<tool_response>nothing coloured</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
)


@pytest.mark.parametrize("arch", ARCHS)
def test_loads_like_a_released_checkpoint(arch, checkpoints):
    path = checkpoints[arch]
    model, processor = load(path)
    assert type(model).__name__ == MODEL_CLASS[arch]
    assert type(processor).__name__ == PROCESSOR_CLASS[arch]
    assert type(processor.tokenizer).__name__ == "Qwen2Tokenizer"
    assert processor.image_processor.patch_size == PATCH[arch] and processor.image_processor.merge_size == 2
    assert (
        model.config.vision_config.patch_size == PATCH[arch]
        and model.config.vision_config.spatial_merge_size == 2
    )
    marker = json.loads((path / "tiny_model.json").read_text())
    params = sum(p.numel() for p in model.parameters())
    assert marker == {"arch": arch, "size": "tiny", "seed": 0, "parameters": params, "model_class": MODEL_CLASS[arch]}
    assert params < 1_000_000
    for name in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
                 "tokenizer_config.json", "preprocessor_config.json", "video_preprocessor_config.json",
                 "chat_template.jinja"):  # fmt: skip
        assert (path / name).is_file(), name
    tok, cfg = processor.tokenizer, model.config
    for field, token in (("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
                         ("vision_start_token_id", "<|vision_start|>"),
                         ("vision_end_token_id", "<|vision_end|>")):  # fmt: skip
        assert getattr(cfg, field) == tok.convert_tokens_to_ids(token), field
    assert cfg.text_config.vocab_size == len(tok)
    assert model.generation_config.eos_token_id == tok.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    assert (
        model.generation_config.pad_token_id == tok.pad_token_id == tok.convert_tokens_to_ids("<|endoftext|>")
    )


@pytest.mark.parametrize("arch", ARCHS)
def test_chat_template_processor_forward_and_generate(arch, checkpoints):
    model, processor = load(checkpoints[arch])
    text = processor.apply_chat_template(CONVERSATION, add_generation_prompt=True, tokenize=False)
    assert text == RENDERED
    assert processor.apply_chat_template(CONVERSATION[:1], tokenize=False) == CONVERSATION[0]["content"].join(
        ["<|im_start|>system\n", "<|im_end|>\n"]
    )
    inputs = processor(text=[text], images=_images([(56, 56), (100, 224)]), return_tensors="pt")
    grid = inputs["image_grid_thw"]
    factor = PATCH[arch] * 2  # smart resize: each side a multiple of patch * merge
    assert grid[0].tolist() == [1, 4, 4]  # 56x56 -> 56x56 (28 px) or 64x64 (32 px)
    assert grid[1].tolist() == [1, round(100 / factor) * 2, round(224 / factor) * 2]
    ids = inputs["input_ids"][0]
    assert int((ids == model.config.image_token_id).sum()) == int(grid.prod(-1).sum()) // 4
    assert inputs["pixel_values"].shape == (int(grid.prod(-1).sum()), 3 * 2 * PATCH[arch] ** 2)
    for tag in ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"):
        assert int((ids == processor.tokenizer.convert_tokens_to_ids(tag)).sum()) == 1, tag
    with torch.no_grad():
        logits = model(**inputs).logits
        assert logits.shape == (1, len(ids), len(processor.tokenizer)) and torch.isfinite(logits).all()
        first = model.generate(**inputs, max_new_tokens=8, do_sample=False)[0, len(ids) :]
        again = model.generate(**inputs, max_new_tokens=8, do_sample=False)[0, len(ids) :]
    assert 1 <= len(first) <= 8 and first.tolist() == again.tolist()
    assert int(first[0]) == int(logits[0, -1].argmax())  # generate's first step is the forward pass's argmax


def test_eight_images_forward_and_generate_is_fast(checkpoints):
    model, processor = load(checkpoints["qwen3_vl"])
    sides = [(56, 56), (84, 112), (112, 84), (140, 140), (168, 96), (196, 224), (224, 224), (64, 200)]
    content = [
        part
        for i in range(8)
        for part in ({"type": "text", "text": f"<{4.0 * i:.1f} seconds>"}, {"type": "image"})
    ]
    content.append(
        {
            "type": "text",
            "text": "Which shape appears? Think in <think></think>, answer in <answer></answer>.",
        }
    )
    text = processor.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    with torch.no_grad():
        model.generate(
            **processor(text=[text], images=_images(sides[:1] * 8), return_tensors="pt"), max_new_tokens=2
        )
        start = time.perf_counter()
        inputs = processor(text=[text], images=_images(sides), return_tensors="pt")
        out = model.generate(**inputs, max_new_tokens=32, min_new_tokens=32, do_sample=False)
        elapsed = time.perf_counter() - start
    assert inputs["image_grid_thw"].shape == (8, 3) and out.shape[1] == inputs["input_ids"].shape[1] + 32
    assert elapsed < 2.0, f"8 images + 32 new tokens took {elapsed:.2f}s"  # ~0.07 s on an idle core


def test_tokenizer_round_trip_and_single_token_tags(checkpoints):
    tok = transformers.AutoTokenizer.from_pretrained(checkpoints["qwen3_vl"])
    texts = [
        '<think>The red circle at 41.5 s.</think>\n<tool_call>{"name": "crop_video", "arguments": '
        '{"start_time": 10.0, "end_time": 25.5}}</tool_call>\n'
        "<tool_code>x = [1, 2]</tool_code><answer>B</answer>",
        "<tool_response>Frames 3-7: a MAGENTA star; nothing else.</tool_response>\n\n  spaces\ttabs  ",
        "Zebra quokka xylophone ~`@#$%^&*()_+-=|\\;:'\",.<>/? 0123456789",
        "<think></think><answer></answer><think>",
    ]
    for text in texts:
        assert tok.decode(tok.encode(text)) == text
    for tag in PROTOCOL_TAGS:
        ids = tok.encode(tag)
        assert len(ids) == 1 and tok.decode(ids) == tag, tag
        assert ids[0] not in tok.all_special_ids  # text, not control: kept by skip_special_tokens
    chat = tok.encode("<|im_start|>assistant\n<answer>C</answer><|im_end|>")
    assert tok.decode(chat, skip_special_tokens=True) == "assistant\n<answer>C</answer>"
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                "<|image_pad|>", "<|video_pad|>"]  # fmt: skip
    assert [tok.encode(s) for s in specials] == [[i] for i in range(7)]
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>" and tok.bos_token is None
    assert 1000 <= len(tok) <= 4096


def test_build_is_deterministic_and_guarded(checkpoints, tmp_path):
    for arch, path in checkpoints.items():
        again = build_tiny_model(tmp_path / arch, arch=arch, seed=0)
        for name in ("model.safetensors", "tokenizer.json", "config.json"):
            assert (again / name).read_bytes() == (path / name).read_bytes(), (arch, name)
    other = build_tiny_model(tmp_path / "other", arch="qwen2_5_vl", seed=1)
    assert (other / "model.safetensors").read_bytes() != (
        checkpoints["qwen2_5_vl"] / "model.safetensors"
    ).read_bytes()
    assert (other / "tokenizer.json").read_bytes() == (
        checkpoints["qwen2_5_vl"] / "tokenizer.json"
    ).read_bytes()

    target = tmp_path / "qwen3_vl"
    with pytest.raises(FileExistsError, match=str(target)):
        build_tiny_model(target, arch="qwen2_5_vl")
    assert json.loads((target / "tiny_model.json").read_text())["arch"] == "qwen3_vl"  # untouched
    (target / "stale.txt").write_text("x")
    build_tiny_model(target, arch="qwen2_5_vl", overwrite=True)
    assert json.loads((target / "tiny_model.json").read_text())["arch"] == "qwen2_5_vl"
    assert not (target / "stale.txt").exists()
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(FileExistsError, match="a_file"):
        build_tiny_model(tmp_path / "a_file", overwrite=True)
    with pytest.raises(ValueError, match=r"'llama'.*qwen3_vl, qwen2_5_vl"):
        build_tiny_model(tmp_path / "x", arch="llama")
    assert not (tmp_path / "x").exists()


def test_cli(tmp_path, capsys):
    out = tmp_path / "m"
    assert main(["tiny-model", "--out", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    params = json.loads((out / "tiny_model.json").read_text())["parameters"]
    assert (
        str(out) in line and "qwen3_vl" in line and f"{params:,} parameters" in line and line.endswith(" MB")
    )
    assert main(["tiny-model", "--out", str(out), "--arch", "qwen2_5_vl"]) == 1
    assert "not empty" in capsys.readouterr().err
    assert main(["tiny-model", "--out", str(out), "--arch", "qwen2_5_vl", "--seed", "3", "--overwrite"]) == 0
    assert json.loads((out / "tiny_model.json").read_text())["seed"] == 3
    with pytest.raises(SystemExit):
        main(["tiny-model", "--out", str(out), "--arch", "llama"])


def test_cli_and_builder_import_no_torch():
    code = (
        "import sys; from paravt.cli import build_parser; build_parser(only='tiny-model').parse_args("
        "['tiny-model', '--out', 'x']); import paravt.policies, paravt.policies.tiny_model; "
        "heavy = sorted({'torch', 'transformers', 'tokenizers'} & set(sys.modules)); assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


def test_hf_policy_runs_on_qwen25(checkpoints):
    from paravt.policies.hf import HFPolicy
    from paravt_env.messages import Message

    policy = HFPolicy.from_pretrained(checkpoints["qwen2_5_vl"], max_new_tokens=6, temperature=0.0)
    frames = [np.full((112, 140, 3), 40 * i, dtype=np.uint8) for i in range(3)]
    text = "<0.5 seconds><image><1.5 seconds><image><2.5 seconds><image> What?"
    [gen] = policy.generate([[Message("user", text, frames)]])
    assert 1 <= len(gen.token_ids) <= 6 and len(gen.logprobs) == len(gen.token_ids)


@pytest.mark.parametrize(("size", "parameters", "vision"), [("2b", 2_127_532_032, 406_957_056),
                                                            ("8b", 8_767_123_696, 576_388_336)])  # fmt: skip
def test_published_sizes_have_the_released_checkpoints_parameter_counts(size, parameters, vision):
    """Qwen3-VL-2B / -8B-Instruct hold 2.13 B / 8.77 B parameters: the configs written here (widths, depths, heads,
    vocabulary, tied or untied head) must give exactly those counts. Counted on the meta device: no weights."""
    from paravt.policies.tiny_model import build_tokenizer, published_config

    config = published_config(size, build_tokenizer())
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(config)
    assert type(model).__name__ == "Qwen3VLForConditionalGeneration"
    assert sum(p.numel() for p in model.parameters()) == parameters
    assert sum(p.numel() for p in model.model.visual.parameters()) == vision
    assert config.text_config.vocab_size == 151_936 and config.text_config.head_dim == 128


def test_published_sizes_are_qwen3_vl_only_and_named(tmp_path):
    with pytest.raises(ValueError, match=r"'3b'.*tiny, 2b, 8b"):
        build_tiny_model(tmp_path / "a", size="3b")
    with pytest.raises(ValueError, match="arch qwen3_vl, not 'qwen2_5_vl'"):
        build_tiny_model(tmp_path / "b", arch="qwen2_5_vl", size="2b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_ids_past_the_tokenizer_are_never_sampled(checkpoints, tmp_path):
    """A published size keeps the 151,936-id vocabulary over a ~1k-token tokenizer: a random model would sample
    undecodable ids almost always. The policy masks them out of sampling (and scoring) as released checkpoints'
    padding ids."""
    from paravt.policies.hf import HFPolicy

    model = transformers.AutoModelForImageTextToText.from_pretrained(checkpoints["qwen3_vl"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoints["qwen3_vl"])
    padded = len(tokenizer) + 4000
    model.resize_token_embeddings(padded, mean_resizing=False)
    with torch.no_grad():  # make the padding ids the likeliest by far
        model.get_output_embeddings().weight[len(tokenizer) :] *= 50
    target = tmp_path / "padded"
    model.save_pretrained(target)
    for f in checkpoints["qwen3_vl"].iterdir():
        if f.is_file() and not f.name.startswith(("model", "config.json", "generation_config")):
            (target / f.name).write_bytes(f.read_bytes())
    policy = HFPolicy.from_pretrained(target, max_new_tokens=40, temperature=1.0)
    assert set(range(len(tokenizer), padded)) <= set(policy.suppress_ids)
    torch.manual_seed(0)
    from paravt_env.messages import Message

    gens = policy.generate([[Message("user", "What shape?")]] * 3)
    assert all(t < len(tokenizer) for g in gens for t in g.token_ids)
    assert sum(len(g.token_ids) for g in gens) > 3
