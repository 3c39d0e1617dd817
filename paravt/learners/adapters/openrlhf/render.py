"""The env's messages as text, rendered as the local trainer renders them (``HFPolicy.render`` /
``encode_continuation``): through the checkpoint's chat template, one content part per text run and per frame.

A prompt rendered by hand in ChatML equals the template's only for a template that adds nothing (the tiny test
model's); a released checkpoint's template is what the local trainer's policy reads, so it is what OpenRLHF's must
read too. ``tests/paravt/learners/adapters/openrlhf/test_observation.py`` holds the two token for token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from paravt.policies.vision_inputs import inline_images
from paravt_env.messages import Message


def _tokenizer(processor: Any) -> Any:
    """The text tokenizer inside what OpenRLHF calls ``hf_tokenizer`` (an ``AutoProcessor`` for a VLM)."""
    return getattr(processor, "tokenizer", processor)


def render(processor: Any, messages: Sequence[Message], add_generation_prompt: bool) -> str:
    """The chat template's text of ``messages`` (image parts as the template writes them, unexpanded)."""
    tokenizer = _tokenizer(processor)
    chat = [{"role": m.role, "content": m.parts()} for m in messages]
    template = tokenizer.chat_template or getattr(processor, "chat_template", None)
    return tokenizer.apply_chat_template(chat, add_generation_prompt=add_generation_prompt, tokenize=False,
                                         chat_template=template)  # fmt: skip


def continuation(processor: Any, history: Sequence[Message], new: Sequence[Message]) -> str:
    """The text that follows ``history`` (ending with the assistant's last turn) when ``new`` messages are added
    and the assistant is prompted again; ChatML where the template rewrites earlier turns."""
    before = render(processor, history, add_generation_prompt=False)
    after = render(processor, [*history, *new], add_generation_prompt=True)
    if not after.startswith(before):
        after = before + "".join(f"<|im_start|>{m.role}\n" + inline_images(m.text) + "<|im_end|>\n" for m in new)
        after += "<|im_start|>assistant\n"
    return after[len(before) :]
