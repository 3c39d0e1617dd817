"""``paravt tiny-model``: a tiny random-weight Qwen-VL checkpoint built locally (no hub access).

It is a real checkpoint of the real architecture (Qwen3-VL or Qwen2.5-VL: same classes, same processor
maths, same patch and merge sizes), only narrow and shallow: ``AutoModelForImageTextToText.from_pretrained``
and ``AutoProcessor.from_pretrained`` load it like a released one, so tests and the CPU default exercise the
exact code paths of an 8B run in seconds. The tokenizer is a byte-level BPE trained here on a small corpus;
it knows Qwen's chat and vision special tokens and the protocol tags as single tokens.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ARCHS = ("qwen3_vl", "qwen2_5_vl")

CHAT_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                "<|image_pad|>", "<|video_pad|>"]  # fmt: skip
PROTOCOL_TAGS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_code>", "</tool_code>",
                 "<answer>", "</answer>", "<tool_response>", "</tool_response>"]  # fmt: skip

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'video' -%}{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
"""Qwen's ChatML layout; an image part becomes ``<|vision_start|><|image_pad|><|vision_end|>``."""

_CORPUS = """You are a video analyst answering a question about a long video. Think step by step, then call
crop_video with start_time and end_time in seconds, several calls in one turn, and give the final answer.
The video lasts 312.5 seconds. Here are 16 frames sampled uniformly from it, each tagged with its time.
Question: A magenta shape briefly appears in the video. What shape is it? A. circle B. square C. star D. cross
Which of these coloured shapes appears first? How many coloured shapes appear? When does the red circle appear?
The red circle, the yellow triangle, the green square, the cyan star, the blue cross and the magenta circle.
colour shape window frames crop video seconds answer think tool call response summary sub-agent evidence
I saw a blue square at 41.5 seconds and a red star near 120 seconds; the answer is B. Answer with one word.
{"name": "crop_video", "arguments": {"start_time": 10.0, "end_time": 25.5}} [12.0, 18.5] 0 1 2 3 4 5 6 7 8 9
The frames show nothing coloured; I need a closer look at the windows between 30 and 60 seconds.
Describe briefly and factually what the frames show that could help answer the main question.
"""


def _require_torch():
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - the train extra is installed with the tests
        raise ImportError('paravt tiny-model needs the train extra: pip install "paravt-gym[train]"') from exc
    return torch, transformers


def build_tokenizer(vocab_size: int = 1024):
    """A byte-level BPE ``PreTrainedTokenizerFast`` with Qwen's special tokens and the protocol tags."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=CHAT_SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([_CORPUS] * 4, trainer=trainer)
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in PROTOCOL_TAGS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        additional_special_tokens=CHAT_SPECIAL[1:],
        clean_up_tokenization_spaces=False,
        model_max_length=32768,
        padding_side="left",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _config(arch: str, tokenizer):
    from transformers import Qwen2_5_VLConfig, Qwen3VLConfig

    ids = {name: tokenizer.convert_tokens_to_ids(tok) for name, tok in (
        ("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>"),
    )}  # fmt: skip
    eos, pad = tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")
    text = dict(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=32768,
        rms_norm_eps=1e-6, eos_token_id=eos, pad_token_id=pad, bos_token_id=None,
    )  # fmt: skip
    # Multimodal RoPE splits head_dim / 2 = 8 frequencies into (time, height, width) sections.
    if arch == "qwen3_vl":
        text["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2],
                                   "mrope_interleaved": True}  # fmt: skip
        vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                      patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=576,
                      deepstack_visual_indexes=[0])  # fmt: skip
        return Qwen3VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True, **ids)
    text["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]}
    text["rope_scaling"] = {"type": "mrope", "mrope_section": [4, 2, 2]}
    vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=14,
                  spatial_merge_size=2, temporal_patch_size=2, window_size=112, fullatt_block_indexes=[1])  # fmt: skip
    return Qwen2_5_VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True, **ids)


def _save_processor_files(arch: str, tokenizer, out: Path) -> None:
    """The files a released checkpoint ships for its processor: tokenizer, image and video processor
    configs, chat template. Saved piece by piece because constructing the ``Qwen*VLProcessor`` object
    itself needs torchvision (for its video processor), which the CPU torch wheel cannot load."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    patch = 16 if arch == "qwen3_vl" else 14
    budget = {"shortest_edge": 784, "longest_edge": 50176}
    image_processor = Qwen2VLImageProcessorPil(patch_size=patch, merge_size=2, temporal_patch_size=2, size=budget)
    image_processor.save_pretrained(out)
    if arch == "qwen3_vl":
        from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

        Qwen3VLVideoProcessor(patch_size=patch, merge_size=2, temporal_patch_size=2).save_pretrained(out)
    else:  # Qwen2VLVideoProcessor's module imports torchvision: write its (small) config directly
        video = {
            "video_processor_type": "Qwen2VLVideoProcessor", "patch_size": patch, "merge_size": 2,
            "temporal_patch_size": 2, "size": {"shortest_edge": 3136, "longest_edge": 12845056},
            "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
            "do_resize": True, "do_rescale": True, "do_normalize": True, "do_convert_rgb": True,
            "rescale_factor": 1 / 255, "resample": 3,
        }  # fmt: skip
        (out / "video_preprocessor_config.json").write_text(json.dumps(video, indent=2) + "\n")
    tokenizer.save_pretrained(out)
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    processor_class = "Qwen3VLProcessor" if arch == "qwen3_vl" else "Qwen2_5_VLProcessor"
    for name in ("preprocessor_config.json", "video_preprocessor_config.json", "tokenizer_config.json"):
        path = out / name
        data = json.loads(path.read_text())
        data["processor_class"] = processor_class
        path.write_text(json.dumps(data, indent=2) + "\n")


def build_tiny_model(out_dir: str | Path, *, arch: str = "qwen3_vl", seed: int = 0, overwrite: bool = False) -> Path:
    """Write a loadable tiny checkpoint of ``arch`` ("qwen3_vl" or "qwen2_5_vl") into ``out_dir``."""
    if arch not in ARCHS:
        raise ValueError(f"unknown tiny-model arch {arch!r}; known: {list(ARCHS)}")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{out} is not empty; pass overwrite=True (--overwrite) to replace it")
        shutil.rmtree(out)
    torch, transformers = _require_torch()
    tokenizer = build_tokenizer()
    config = _config(arch, tokenizer)
    torch.manual_seed(seed)
    model = transformers.AutoModelForImageTextToText.from_config(config)
    model.generation_config.eos_token_id = config.text_config.eos_token_id
    model.generation_config.pad_token_id = config.text_config.pad_token_id
    model.generation_config.bos_token_id = None
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    _save_processor_files(arch, tokenizer, out)
    params = sum(p.numel() for p in model.parameters())
    (out / "tiny_model.json").write_text(json.dumps({"arch": arch, "seed": seed, "parameters": params}, indent=2) + "\n")
    return out
