"""The env's messages as the text a checkpoint reads: through its own chat template, one content part per text run
and per frame (image parts as the template writes them, their pads not yet expanded). One place for every engine
that renders for a policy: ``HFPolicy`` (the local trainer, evaluation) and the OpenRLHF executor render with these,
so a prompt is the same text wherever it is built (held token for token by the engines' observation tests)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from paravt.policies.vision_inputs import inline_images
from paravt_env.messages import Message

THINK_RE = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
"""A reasoning block, closed or cut off: what a sub-agent's summary is stripped of."""


def strip_reasoning(text: str) -> str:
    """A sub-agent's reply without its reasoning (the whole reply where nothing else is left)."""
    return THINK_RE.sub("", text).strip() or text.strip()


def text_tokenizer(processor: Any) -> Any:
    """The text tokenizer of a tokenizer or of a processor that holds one (an ``AutoProcessor`` for a VLM)."""
    return getattr(processor, "tokenizer", processor)


def render_chat(processor: Any, messages: Sequence[Message], add_generation_prompt: bool) -> str:
    """The chat template's text of ``messages`` (the tokenizer's template, else the processor's)."""
    tokenizer = text_tokenizer(processor)
    chat = [{"role": m.role, "content": m.parts()} for m in messages]
    template = tokenizer.chat_template or getattr(processor, "chat_template", None)
    return tokenizer.apply_chat_template(chat, add_generation_prompt=add_generation_prompt, tokenize=False,
                                         chat_template=template)  # fmt: skip


def continuation_text(processor: Any, history: Sequence[Message], new: Sequence[Message]) -> str:
    """The text that follows ``history`` (ending with the assistant's last turn) when ``new`` messages are added and
    the assistant is prompted again; ChatML where the template rewrites earlier turns."""
    before = render_chat(processor, history, add_generation_prompt=False)
    after = render_chat(processor, [*history, *new], add_generation_prompt=True)
    if not after.startswith(before):
        after = before + "".join(f"<|im_start|>{m.role}\n" + inline_images(m.text) + "<|im_end|>\n" for m in new)
        after += "<|im_start|>assistant\n"
    return after[len(before) :]
