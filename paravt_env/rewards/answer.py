"""Which part of a completion is the answer, and how answers are normalised before comparison.

These are the released ParaVT definitions (``paravt/rl/rewards/utils.py``), kept rule for rule because the
reward must match the paper's: change nothing here without re-running the parity comparison.
"""

from __future__ import annotations

import re

_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
# Blocks that are not answer text even when they follow </think>.
_NON_ANSWER_BLOCKS = (
    re.compile(r"<tool_call>.*?</tool_call>", re.DOTALL),
    re.compile(r"<tool_code>.*?</tool_code>", re.DOTALL),
    re.compile(r"<tool_response>.*?</tool_response>", re.DOTALL),
)
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_PUNCT_RE = re.compile(r"[^\w\s]")


def extract_answer(completion: str) -> str:
    """The answer a completion gives, with the release's fallbacks; ``""`` if there is none.

    1. the body of the first ``<answer>...</answer>``, stripped;
    2. else, if there is a ``</think>``, the text after the first one with tool-call / tool-code /
       tool-response blocks and ``<|im_end|>`` / ``<|im_start|>`` removed, stripped (if not empty);
    3. else the last non-empty line that does not start with ``<|im_`` or ``<tool_`` (bare-letter MCQ
       answers without tags still count).
    """
    m = _ANSWER_RE.search(completion)
    if m:
        return m.group(1).strip()
    head, sep, tail = completion.partition("</think>")
    if sep:
        for block in _NON_ANSWER_BLOCKS:
            tail = block.sub("", tail)
        tail = tail.replace("<|im_end|>", "").replace("<|im_start|>", "").strip()
        if tail:
            return tail
    last = ""
    for line in completion.splitlines():  # str.splitlines: the release splits on every Unicode line break
        line = line.strip()
        if line and not line.startswith("<|im_") and not line.startswith("<tool_"):
            last = line
    return last


def normalize_text(text: str) -> str:
    """Lowercase, strip, drop the words a/an/the and every non-word non-space character, collapse spaces."""
    text = text.strip().lower()
    text = _ARTICLES_RE.sub(" ", text)
    text = _PUNCT_RE.sub("", text)
    return " ".join(text.split())
