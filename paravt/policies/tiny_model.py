"""``paravt tiny-model``: a tiny random-weight Qwen-VL checkpoint built locally (no hub access).

It is a real checkpoint of the real architecture (Qwen3-VL or Qwen2.5-VL: same classes, same processor
maths, same patch and merge sizes), only narrow and shallow: ``AutoModelForImageTextToText.from_pretrained``
and ``AutoProcessor.from_pretrained`` load it like a released one, so tests and the CPU default exercise the
exact code paths of an 8B run in seconds.

The tokenizer is a ``Qwen2Tokenizer`` (the class the Qwen-VL processors name) whose byte-level BPE is
trained here, with Qwen's own normaliser and pre-tokeniser, on a small built-in corpus. It knows Qwen's chat
and vision special tokens and has the protocol tags (``<think>``, ``<tool_call>``, ``<answer>``, ...) as
single, non-special added tokens, as the released Qwen tokenizers have ``<think>`` and ``<tool_call>``.

``AutoProcessor`` of both families also builds a *video* processor, which needs torchvision; where
torchvision cannot be imported (the CPU torch wheel) ``AutoProcessor`` fails for released checkpoints too.
The files written here are the ones a released checkpoint ships, so it loads wherever those load.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ARCHS = ("qwen3_vl", "qwen2_5_vl")
SIZES = ("tiny", "2b", "8b")
"""``tiny``: 2 layers, 64 wide, a vocabulary of the tokenizer's size. ``2b`` / ``8b``: Qwen3-VL-2B / -8B-Instruct's
published widths, depths, heads and vocabulary (``PUBLISHED``), random weights, this tokenizer: for measuring
what a step costs at real size (GPU), not for learning anything."""
BUILDER_VERSION = 2
"""Bump when the files a (arch, seed) pair produces change; cached builds are keyed by it."""

CHAT_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                "<|image_pad|>", "<|video_pad|>"]  # fmt: skip
PROTOCOL_TAGS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_code>", "</tool_code>",
                 "<answer>", "</answer>", "<tool_response>", "</tool_response>"]  # fmt: skip

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] in ('image', 'image_url') -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'video' -%}{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
"""Qwen's ChatML layout: any role, string or part-list content; an image part becomes
``<|vision_start|><|image_pad|><|vision_end|>``. Rendering a longer conversation only appends text."""

_PROSE = """You are a video analyst answering a question about a long video. Think step by step, then call
crop_video with start_time and end_time in seconds, several calls in one turn, and give the final answer.
The video lasts 312.5 seconds. Here are 16 frames sampled uniformly from it, each tagged with its time.
Question: A magenta shape briefly appears in the video. What shape is it? A. circle B. square C. star D. cross
Which of these coloured shapes appears first? How many coloured shapes appear?
When does the red circle appear?
The red circle, the yellow triangle, the green square, the cyan star, the blue cross and the magenta circle.
colour shape window frames crop video seconds answer think tool call response summary sub-agent evidence
I saw a blue square at 41.5 seconds and a red star near 120 seconds; the answer is B. Answer with one word.
The frames show nothing coloured; I need a closer look at the windows between 30 and 60 seconds.
Describe briefly and factually what the frames show that could help answer the main question.
Output the thinking process in <think> </think> and the final answer in <answer> </answer> tags.
You may call the tool several times in parallel: each call is one JSON object inside <tool_call> tags.
The tool returns the cropped frames inside <tool_response> tags. If no more evidence is needed, answer.
Give the start and end time of the event, in seconds, as a list of two numbers, e.g. [12.0, 18.5].
Options: (A) red (B) yellow (C) green (D) cyan (E) blue (F) magenta. Please select the correct option.
The needle is a small coloured shape drawn over a grey background for a few seconds of a long video.
Nothing else moves. The overview may miss it; crop the windows where it may be and look again closely.
A person walks into the kitchen, opens the fridge, takes out a bottle of milk and pours it into a glass.
Later a dog runs across the garden, jumps over a fence and chases a ball thrown by a child in a red shirt.
The camera pans slowly from left to right over a busy street with cars, buses, bicycles and pedestrians.
At the beginning of the clip the speaker introduces the topic; in the middle she draws a diagram on the
board; at the end she summarises the main points and answers questions from the audience.
How many times does the man pick up the phone? Where is the cat sitting when the door opens? Why does
the woman leave the room? What happens right after the car stops? Who is holding the umbrella?
First, second, third, fourth, fifth; before, after, during, between, until, while; left, right, top,
bottom, centre, corner, inside, outside, above, below, near, far, large, small, bright, dark, fast, slow.
The evidence is not sufficient yet, so I will inspect two windows in parallel and compare what they show.
The sub-agent reports that the shape is visible from 84.0 to 89.5 seconds in the lower right corner.
Timestamps are written in angle brackets before each frame. The answer must be a single letter or a number.
Invalid tool call: end_time must be greater than start_time and both must lie inside the video duration.
Reasoning carefully about time, order and counting helps: note each event, its start, its end, its colour.
Summary: one shape, drawn in cyan, a star, shown for three seconds near the end of the video; answer C.
Morning, afternoon, evening, night; today, yesterday, tomorrow; minute, hour, moment, instant, duration.
People, animals, vehicles, buildings, trees, rivers, mountains, rooms, tables, chairs, doors, windows.
Actions: walking, running, sitting, standing, talking, cooking, reading, writing, playing, driving, cutting.
Because the overview frames are sparse, short events can fall between them; cropping recovers them.
"""

_COLOURS = ("red", "yellow", "green", "cyan", "blue", "magenta")
_SHAPES = ("circle", "square", "triangle", "star", "cross")


def _corpus() -> str:
    """A few KB of English in the env's vocabulary: prose, tool calls as JSON, answers, timestamps."""
    lines = [_PROSE]
    for i, colour in enumerate(_COLOURS):
        for j, shape in enumerate(_SHAPES):
            start = 7.5 * (5 * i + j) + 3
            lines.append(
                f"<think>The {colour} {shape} appears at {start:.1f} seconds "
                f"and lasts {j + 2} seconds.</think>\n"
                f'<tool_call>{{"name": "crop_video", "arguments": {{"start_time": {start:.1f}, '
                f'"end_time": {start + 12:.1f}}}}}</tool_call>\n'
                f"<{start:.1f} seconds> A {colour} {shape}. <answer>{'ABCDEF'[i]}</answer>\n"
            )
    lines.append(" ".join(str(n) for n in range(128)))
    return "\n".join(lines)


def _require_torch():
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - the train extra is installed with the tests
        raise ImportError('paravt tiny-model needs the train extra: pip install "paravt-gym[train]"') from exc
    return torch, transformers


def build_tokenizer(vocab_size: int = 2048):
    """A ``Qwen2Tokenizer``: byte-level BPE trained on the built-in corpus (Qwen's NFC normaliser and
    pre-tokeniser regex, so it loads identically through ``AutoTokenizer``), the chat and vision special
    tokens (ids 0..6) and the protocol tags as single non-special tokens. Deterministic."""
    from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=CHAT_SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator([_corpus()], trainer=trainer)
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    tokenizer = Qwen2Tokenizer(
        vocab=model["vocab"],
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=CHAT_SPECIAL[1:],
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
        model_max_length=32768,
        padding_side="left",
    )
    tokenizer.add_tokens([AddedToken(t, normalized=False, special=False) for t in PROTOCOL_TAGS])
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _vision_token_ids(tokenizer) -> dict[str, int]:  # noqa: ANN001
    """The config's image / video / vision-span token ids: those of the tokenizer as a user will load it."""
    return {name: tokenizer.convert_tokens_to_ids(tok) for name, tok in (
        ("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>"),
    )}  # fmt: skip


def _config(arch: str, tokenizer):
    from transformers import Qwen2_5_VLConfig, Qwen3VLConfig

    ids = _vision_token_ids(tokenizer)
    # len(tokenizer) counts the added tokens. Released checkpoints pad the embedding beyond it; a random model
    # would sample such undecodable ids, so the tiny one does not.
    text = dict(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32768, rms_norm_eps=1e-6,
        pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    # Multimodal RoPE splits head_dim / 2 = 8 frequencies into (time, height, width) sections, in the released
    # proportions (Qwen2.5-VL [16, 24, 24] of 64; Qwen3-VL [24, 20, 20] of 64, interleaved).
    if arch == "qwen3_vl":
        text["head_dim"] = 16  # a Qwen3VLTextConfig field (Qwen2.5-VL derives it: hidden / heads = 16)
        text["rope_parameters"] = {"rope_type": "default", "rope_theta": 5_000_000.0,
                                   "mrope_section": [2, 3, 3], "mrope_interleaved": True}  # fmt: skip
        # Deepstack: the output of vision block 0 is added to the hidden states after text layer 0.
        vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                      patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=576,
                      deepstack_visual_indexes=[0])  # fmt: skip
        return Qwen3VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True, **ids)
    text["rope_parameters"] = {"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": [2, 3, 3]}
    text.update(bos_token_id=None, eos_token_id=tokenizer.eos_token_id)
    # window_size 112 px = 4x4 merged patches; block 0 is windowed, block 1 full attention.
    vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                  patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                  fullatt_block_indexes=[1], tokens_per_second=2)  # fmt: skip
    return Qwen2_5_VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True, **ids)


# Qwen3-VL-2B / -8B-Instruct's config.json (text_config, vision_config), the fields that shape the computation.
# Shared: vocabulary 151,936, RoPE theta 5e6 with interleaved M-RoPE sections [24, 20, 20] of head_dim 128, patch 16,
# merge 2, temporal patch 2, 2,304 vision position embeddings.
PUBLISHED = {
    "2b": {"text": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                        num_key_value_heads=8),
           "vision": dict(depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16, out_hidden_size=2048,
                          deepstack_visual_indexes=[5, 11, 17]),
           "tie_word_embeddings": True},
    "8b": {"text": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                        num_key_value_heads=8),
           "vision": dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, out_hidden_size=4096,
                          deepstack_visual_indexes=[8, 16, 24]),
           "tie_word_embeddings": False},
}  # fmt: skip
PUBLISHED_VOCAB = 151_936


def published_config(size: str, tokenizer):
    """A ``Qwen3VLConfig`` of a published size (``PUBLISHED``) whose special-token ids are this tokenizer's. The
    vocabulary keeps the published 151,936 ids (the LM head and embedding cost what they cost at real size); the
    ids past the tokenizer decode to nothing and the policy never samples them (``HFPolicy.suppress_ids``)."""
    from transformers import Qwen3VLConfig

    if size not in PUBLISHED:
        raise ValueError(f"unknown published size {size!r}; known: {', '.join(PUBLISHED)}")
    spec = PUBLISHED[size]
    ids = _vision_token_ids(tokenizer)
    text = dict(spec["text"], vocab_size=PUBLISHED_VOCAB, head_dim=128, max_position_embeddings=262144,
                rms_norm_eps=1e-6, hidden_act="silu", pad_token_id=tokenizer.pad_token_id,
                rope_parameters={"rope_type": "default", "rope_theta": 5_000_000.0, "mrope_section": [24, 20, 20],
                                 "mrope_interleaved": True})  # fmt: skip
    vision = dict(spec["vision"], patch_size=16, spatial_merge_size=2, temporal_patch_size=2,
                  num_position_embeddings=2304, hidden_act="gelu_pytorch_tanh")  # fmt: skip
    return Qwen3VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=spec["tie_word_embeddings"], **ids)


# Image normalisation of the released checkpoints (Qwen2.5-VL: CLIP's; Qwen3-VL: 0.5).
_CLIP_MEAN, _CLIP_STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
# Pixel budget: small so that test frames stay small (a 56x56 frame becomes 4x4 patches = 4 merged tokens);
# at most 224x224 = 64 (Qwen2.5-VL) or 49 (Qwen3-VL) merged tokens per image. The smart-resize maths (sides
# rounded to multiples of patch * merge = 28 / 32 px) is the released one.
_IMAGE_BUDGET = {"shortest_edge": 784, "longest_edge": 50176}


def _save_processor_files(arch: str, out: Path) -> None:
    """The files a released checkpoint ships for its processor besides the tokenizer's: image and video
    processor configs, chat template, and ``processor_class`` in each config. Written piece by piece
    because the ``Qwen*VLProcessor`` object and the video processors need torchvision, which the CPU torch
    wheel cannot load."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    qwen3 = arch == "qwen3_vl"
    patch = 16 if qwen3 else 14
    mean, std = ([0.5] * 3, [0.5] * 3) if qwen3 else (_CLIP_MEAN, _CLIP_STD)
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=patch,
        merge_size=2,
        temporal_patch_size=2,
        size=_IMAGE_BUDGET,
        image_mean=mean,
        image_std=std,
    )
    image_processor.save_pretrained(out)
    data = json.loads((out / "preprocessor_config.json").read_text())
    # The name released checkpoints carry; AutoImageProcessor picks the torchvision or the PIL backend.
    data["image_processor_type"] = "Qwen2VLImageProcessor"
    (out / "preprocessor_config.json").write_text(json.dumps(data, indent=2) + "\n")
    # The video processor classes import torchvision: write their (small) configs directly.
    video = {
        "video_processor_type": "Qwen3VLVideoProcessor" if qwen3 else "Qwen2VLVideoProcessor",
        "patch_size": patch, "merge_size": 2, "temporal_patch_size": 2,
        "size": {"shortest_edge": 4096, "longest_edge": 786432} if qwen3
        else {"shortest_edge": 3136, "longest_edge": 12845056},
        "image_mean": mean, "image_std": std, "do_resize": True, "do_rescale": True, "do_normalize": True,
        "do_convert_rgb": True, "rescale_factor": 1 / 255, "resample": 3,
    }  # fmt: skip
    if qwen3:
        video.update(do_sample_frames=True, fps=2, min_frames=4, max_frames=768, return_metadata=False)
    (out / "video_preprocessor_config.json").write_text(json.dumps(video, indent=2) + "\n")
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    processor_class = "Qwen3VLProcessor" if qwen3 else "Qwen2_5_VLProcessor"
    for name in ("preprocessor_config.json", "video_preprocessor_config.json", "tokenizer_config.json"):
        path = out / name
        data = json.loads(path.read_text())
        data["processor_class"] = processor_class
        path.write_text(json.dumps(data, indent=2) + "\n")


def build_tiny_model(
    out_dir: str | Path, *, arch: str = "qwen3_vl", seed: int = 0, overwrite: bool = False, size: str = "tiny",
    device: str = "cpu",
) -> Path:
    """Write a loadable random-weight checkpoint of ``arch`` ("qwen3_vl" or "qwen2_5_vl") into ``out_dir``
    (created if absent) and return its path. Same ``seed``, same bytes (on one device). ``size`` "2b" / "8b"
    (Qwen3-VL only) builds the published widths instead of the tiny ones, in bf16, its weights initialised on
    ``device`` ("cuda": seconds instead of minutes; 4.3 / 17.5 GB written).

    Raises ``ValueError`` for an unknown ``arch`` or ``size`` and ``FileExistsError`` when ``out_dir`` is a file,
    or a non-empty directory and ``overwrite`` is false (with ``overwrite`` its contents are replaced)."""
    if arch not in ARCHS:
        raise ValueError(f"unknown tiny-model arch {arch!r}; known: {', '.join(ARCHS)}")
    if size not in SIZES:
        raise ValueError(f"unknown model size {size!r}; known: {', '.join(SIZES)}")
    if size != "tiny" and arch != "qwen3_vl":
        raise ValueError(f"size {size!r} is a published Qwen3-VL size: use arch qwen3_vl, not {arch!r}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"{out} is not empty; pass overwrite=True (--overwrite) to replace it")
    torch, transformers = _require_torch()  # before deleting anything
    if out.is_dir() and any(out.iterdir()):
        shutil.rmtree(out)

    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer().save_pretrained(out)
    # The ids the config names are those of the tokenizer as a user will load it.
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    torch.manual_seed(seed)
    if size == "tiny":
        model = transformers.AutoModelForImageTextToText.from_config(_config(arch, tokenizer))
    else:
        with torch.device(device):
            model = transformers.AutoModelForImageTextToText.from_config(published_config(size, tokenizer),
                                                                         dtype=torch.bfloat16)  # fmt: skip
    # eos is <|im_end|> alone. Released Instruct models list [<|im_end|>, <|endoftext|>]; code here treats the
    # lowest eos id as the end of a turn, which with both would be <|endoftext|>.
    model.generation_config = transformers.GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    model.save_pretrained(out)
    _save_processor_files(arch, out)
    params = sum(p.numel() for p in model.parameters())
    marker = {"arch": arch, "size": size, "seed": seed, "parameters": params, "model_class": type(model).__name__}
    (out / "tiny_model.json").write_text(json.dumps(marker, indent=2) + "\n")
    return out
