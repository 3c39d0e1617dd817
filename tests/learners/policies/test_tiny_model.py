import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from learners.policies.tiny_model import PROTOCOL_TAGS, build_tiny_model  # noqa: E402
from learners.policies.vision_inputs import load_tokenizer_and_image_processor  # noqa: E402
from scripts.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def tiny_qwen25(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny25") / "model", arch="qwen2_5_vl", seed=0)


@pytest.mark.parametrize("which", ["tiny_qwen3", "tiny_qwen25"])
def test_loads_like_a_released_checkpoint(which, request):
    path = request.getfixturevalue(which)
    model = transformers.AutoModelForImageTextToText.from_pretrained(path)
    expected = "Qwen3VLForConditionalGeneration" if which == "tiny_qwen3" else "Qwen2_5_VLForConditionalGeneration"
    assert type(model).__name__ == expected
    assert sum(p.numel() for p in model.parameters()) < 1_000_000
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    for name in ("preprocessor_config.json", "video_preprocessor_config.json", "chat_template.jinja", "tiny_model.json"):
        assert (path / name).is_file()
    # every id the config names is the tokenizer's
    cfg = model.config
    assert cfg.image_token_id == tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert cfg.vision_start_token_id == tokenizer.convert_tokens_to_ids("<|vision_start|>")
    assert model.generation_config.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>")


def test_tokenizer_round_trip_and_single_token_tags(tiny_qwen3):
    tok, image_processor = load_tokenizer_and_image_processor(tiny_qwen3)
    text = '<think>The red circle at 41.5 s.</think>\n<tool_call>{"name": "crop_video"}</tool_call><answer>B</answer>'
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    for tag in [*PROTOCOL_TAGS, "<|im_start|>", "<|im_end|>", "<|image_pad|>"]:
        assert len(tok.encode(tag, add_special_tokens=False)) == 1, tag
    assert image_processor.patch_size == 16 and image_processor.merge_size == 2


def test_chat_template_renders_images_and_roles(tiny_qwen3):
    tok, _ = load_tokenizer_and_image_processor(tiny_qwen3)
    chat = [{"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "<1.0 seconds>"}, {"type": "image"}, {"type": "text", "text": "Q?"}]}]  # fmt: skip
    text = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert text == (
        "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\n<1.0 seconds><|vision_start|><|image_pad|>"
        "<|vision_end|>Q?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_build_is_deterministic_and_guarded(tiny_qwen3, tmp_path):
    again = build_tiny_model(tmp_path / "again", arch="qwen3_vl", seed=0)
    assert (again / "model.safetensors").read_bytes() == (tiny_qwen3 / "model.safetensors").read_bytes()
    other = build_tiny_model(tmp_path / "other", arch="qwen3_vl", seed=1)
    assert (other / "model.safetensors").read_bytes() != (tiny_qwen3 / "model.safetensors").read_bytes()
    with pytest.raises(FileExistsError, match="again"):
        build_tiny_model(tmp_path / "again")
    with pytest.raises(ValueError, match="'llama'"):
        build_tiny_model(tmp_path / "x", arch="llama")


def test_cli(tmp_path, capsys):
    assert main(["tiny-model", "--out", str(tmp_path / "m"), "--arch", "qwen2_5_vl"]) == 0
    assert "qwen2_5_vl" in capsys.readouterr().out
    assert json.loads((tmp_path / "m" / "tiny_model.json").read_text())["arch"] == "qwen2_5_vl"
    assert main(["tiny-model", "--out", str(tmp_path / "m")]) == 1


def test_forward_pass_with_images(tiny_qwen25):
    from learners.policies.base import Message
    from learners.policies.hf import HFPolicy

    policy = HFPolicy.from_pretrained(tiny_qwen25, max_new_tokens=6, temperature=0.0)
    frames = [np.full((112, 140, 3), 40 * i, dtype=np.uint8) for i in range(3)]
    [gen] = policy.generate([[Message("user", "<0.5 seconds><image><1.5 seconds><image><2.5 seconds><image> What?", frames)]])
    assert 1 <= len(gen.token_ids) <= 6 and len(gen.logprobs) == len(gen.token_ids)
