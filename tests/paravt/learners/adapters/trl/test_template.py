"""The adapter's chat template renders TRL's conversation (tools passed, one ``tool`` message per call, parsed
tool calls) as the checkpoint's own template renders the local trainer's (no tools, the env's feedback message,
the think prefix after the generation prompt), character for character."""

from pathlib import Path

import pytest

from paravt.learners.adapters.trl.template import ROLE_KEY, local_chat_template
from paravt_env.protocol import system_prompt

COLDSTART = Path(__file__).resolve().parents[5] / "results/repro/repro_cpu/coldstart/coldstart/model"
TOOLS = [{"type": "function", "function": {"name": "crop_video", "description": "Crop.", "parameters": {
    "type": "object", "properties": {"start_time": {"type": "number"}, "end_time": {"type": "number"}}}}}]  # fmt: skip
CALL = {"name": "crop_video", "arguments": {"start_time": 1.5, "end_time": 9}}
TURN = '<think>\nTwo.</think><tool_call>\n{"name": "crop_video", "arguments": {"start_time": 1.5, "end_time": 9}}\n</tool_call>'
SCHEMA_LINE = "You are provided with function signatures within <tools></tools> XML tags"
"""What Qwen3-VL's template writes into the system message when given tools (the env's prompt has its own)."""
FEEDBACK = "<tool_response>\nCrop 1 <1.0 seconds>", "<image>", "\n</tool_response>\n<tool_response>\nrejected\n</tool_response>\n1 turn left"


def local_conversation() -> list[dict]:
    """The local trainer's messages of a two-turn episode (``HFPolicy.render``: ``Message.parts``)."""
    return [
        {"role": "system", "content": [{"type": "text", "text": system_prompt("agentic")}]},
        {"role": "user", "content": [{"type": "text", "text": "Frames: <0.0 seconds>"}, {"type": "image"},
                                     {"type": "text", "text": " Question?"}]},  # fmt: skip
        {"role": "assistant", "content": TURN},
        {"role": "user", "content": [{"type": "text", "text": FEEDBACK[0]}, {"type": "image"},
                                     {"type": "text", "text": FEEDBACK[2]}]},  # fmt: skip
    ]


def trl_conversation() -> list[dict]:
    """TRL's messages of the same episode: the row's system prompt (TRL makes its content blocks), the user's
    content after an empty text, the parsed turn (reasoning apart, the call as ``tool_calls``), one tool message
    per call (``tool_results``: the feedback cut before each response, the first block marked with its role)."""
    local = local_conversation()
    return [
        local[0],
        {"role": "user", "content": [{"type": "text", "text": ""}, *local[1]["content"]]},
        {"role": "assistant", "content": "", "reasoning_content": "Two.", "tool_calls": [{"type": "function", "function": CALL}]},
        {"role": "tool", "name": "crop_video", "content": [{"type": "text", "text": FEEDBACK[0], ROLE_KEY: "user"},
                                                            {"type": "image"}, {"type": "text", "text": "\n</tool_response>\n"}]},  # fmt: skip
        {"role": "tool", "name": "crop_video", "content": [{"type": "text", "text": FEEDBACK[2][len("\n</tool_response>\n"):]}]},
    ]


def own_templates() -> dict[str, str]:
    """Checkpoints' own templates: the tiny model's (every locally trained checkpoint) and, in TRL's environment,
    Qwen3-VL's (TRL's copy of the released one, with its tool rendering and ``<tool_response>`` user turns)."""
    from transformers import AutoTokenizer

    out = {"tiny": AutoTokenizer.from_pretrained(COLDSTART).chat_template}
    try:
        from trl.chat_template_utils import qwen3_vl_chat_template
    except ImportError:
        return out
    return {**out, "qwen3_vl": qwen3_vl_chat_template}


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(COLDSTART)


@pytest.mark.parametrize("name", ["tiny", "qwen3_vl"])
def test_trls_conversation_renders_as_the_local_trainers(name, tokenizer):
    templates = own_templates()
    if name not in templates:
        from engine_env import engine_import  # tests/engine_env.py: required in TRL's environment

        engine_import("trl", "trl.chat_template_utils")
    own = templates[name]
    wrapped = local_chat_template(own, "<think>\n")
    for generation_prompt in (True, False):
        local = tokenizer.apply_chat_template(local_conversation(), chat_template=own, tokenize=False,
                                              add_generation_prompt=generation_prompt)  # fmt: skip
        local += "<think>\n" if generation_prompt else ""
        trl = tokenizer.apply_chat_template(trl_conversation(), chat_template=wrapped, tools=TOOLS, tokenize=False,
                                            add_generation_prompt=generation_prompt)  # fmt: skip
        # the parsed turn is written back as Hermes text (never tokenised for training: TRL keeps generated ids)
        assert trl == local.replace(TURN, '<tool_call>\n{"name": "crop_video", "arguments": {"start_time": 1.5, "end_time": 9}}\n</tool_call>')
    assert SCHEMA_LINE not in trl and trl.count('"start_time"') == system_prompt("agentic").count('"start_time"') + 1
    # without the wrapper TRL's conversation renders otherwise (what the policy read before: another prompt)
    if name == "qwen3_vl":
        unwrapped = tokenizer.apply_chat_template(trl_conversation(), chat_template=own, tools=TOOLS, tokenize=False)
        assert SCHEMA_LINE in unwrapped


def test_a_tool_error_and_several_messages_keep_their_roles(tokenizer):
    own = own_templates()["tiny"]
    wrapped = local_chat_template(own)
    trl = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": CALL}]},
           {"role": "tool", "name": "crop_video", "content": "{'error': 'the episode has ended'}"},
           {"role": "tool", "name": "crop_video", "content": [{"type": "text", "text": "a", ROLE_KEY: "user"}]},
           {"role": "tool", "name": "crop_video", "content": [{"type": "text", "text": "b", ROLE_KEY: "user"}]}]  # fmt: skip
    rendered = tokenizer.apply_chat_template(trl, chat_template=wrapped, tokenize=False, add_generation_prompt=True)
    # a tool's error (TRL's text, no role) is a user message of its own; each marked block starts the env's next
    assert rendered.endswith("<|im_start|>user\n{'error': 'the episode has ended'}<|im_end|>\n<|im_start|>user\na"
                             "<|im_end|>\n<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n")  # fmt: skip


def test_wrapping_is_refused_twice_and_without_a_template():
    wrapped = local_chat_template(own_templates()["tiny"], "<think>\n")
    with pytest.raises(ValueError, match="already"):
        local_chat_template(wrapped, "<think>\n")
    with pytest.raises(ValueError, match="no chat template"):
        local_chat_template("", "<think>\n")
