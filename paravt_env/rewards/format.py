"""Format reward with Exploration Anchoring, in the released ParaVT form (``paravt/rl/rewards/format.py``).

The score rewards a disciplined ``<think>`` → (``<tool_call>``...) → ``<answer>`` turn and is what keeps the
structural tags alive under temperature sampling (the paper's *Format Fragility*). Two knobs:

- ``answer_suffix``: the answer tags carry more weight than ``<think>`` (0.2 / 0.3 / 0.2 instead of
  0.3 / 0.2 / 0.1);
- ``anchor_weight`` (λ): the "sequence" granularity of Exploration Anchoring — a bonus for closing
  ``</think>`` and completing think→answer, a penalty for an unclosed ``<think>``.

The predicates below (what counts as a think, a tool call, an answer) are the release's, deliberately not
the protocol parser's more forgiving ones: parity with the paper's reward comes first.
"""

from __future__ import annotations

import json
import re

THINK_MIN_CHARS = 10
"""A ``<think>`` block counts only with at least this many non-space-stripped characters."""

_TOOL_CALL_BODY_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_TOOL_CODE_BODY_RE = re.compile(r"<tool_code>(.*?)(?:</tool_code>|$)", re.DOTALL)
_ANSWER_BODY_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_THINK_CLOSED_RE = re.compile(r"<think>(.*?)</think>", re.DOTALL)
# An unclosed think runs until the first tool tag, answer tag, end-of-turn token, or the end.
_THINK_OPEN_RE = re.compile(r"<think>(.*?)(?:<tool_|<answer>|<\|im_end\|>|$)", re.DOTALL)
_PAIRED_TAGS = (
    ("<think>", "</think>"),
    ("<tool_call>", "</tool_call>"),
    ("<tool_code>", "</tool_code>"),
    ("<answer>", "</answer>"),
)


def has_substantive_think(completion: str, min_chars: int = THINK_MIN_CHARS) -> bool:
    """A ``<think>`` block (closed, else open-ended) with at least ``min_chars`` characters of content."""
    m = _THINK_CLOSED_RE.search(completion) or _THINK_OPEN_RE.search(completion)
    return m is not None and len(m.group(1).strip()) >= min_chars


def _is_json_call(body: str) -> bool:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # the release lets RecursionError escape; a reward must not
        return False
    return isinstance(data, dict) and "name" in data


def _is_call_body(body: str) -> bool:
    """A ``<tool_call>`` body with real content: a JSON call with a name, not empty, not ``<|im_end|>``."""
    body = body.strip()
    return bool(body) and not body.startswith("<|im_end|>") and _is_json_call(body)


def has_parseable_tool_call(completion: str) -> bool:
    """A tool call with real content: a ``<tool_call>`` JSON object with a ``name``, or a ``<tool_code>``
    line that looks like a call (has ``(`` and is not a comment). Empty bodies, and bodies that start with
    ``<|im_end|>``, never count (the empty-tag exploit)."""
    if any(_is_call_body(body) for body in _TOOL_CALL_BODY_RE.findall(completion)):
        return True
    for body in _TOOL_CODE_BODY_RE.findall(completion):
        body = body.strip()
        if not body or body.startswith("<|im_end|>"):
            continue
        for line in body.splitlines():
            line = line.strip()
            if line and "(" in line and not line.startswith("#"):
                return True
    return False


def has_nonempty_answer(completion: str) -> bool:
    """Some ``<answer>...</answer>`` pair brackets non-blank content (empty tags earn nothing)."""
    return any(body.strip() for body in _ANSWER_BODY_RE.findall(completion))


def think_before_tool(completion: str) -> bool:
    """The first ``<think>`` comes before the first ``<tool_call>`` / ``<tool_code>``."""
    think = completion.find("<think>")
    if think == -1:
        return False
    tools = [p for p in (completion.find("<tool_call>"), completion.find("<tool_code>")) if p != -1]
    return bool(tools) and think < min(tools)


def tags_balanced(completion: str) -> bool:
    """Every think / tool_call / tool_code / answer tag has as many openings as closings."""
    return all(completion.count(o) == completion.count(c) for o, c in _PAIRED_TAGS)


def broken_tool_calls(completion: str) -> int:
    """``<tool_call>`` blocks whose body is not a JSON call with a name (empty ones included)."""
    return sum(1 for body in _TOOL_CALL_BODY_RE.findall(completion) if not _is_call_body(body))


def format_reward(completion: str, *, answer_suffix: bool, anchor_weight: float, balance_after_cap: bool = False,
                  broken_call_penalty: float = 0.0, tool_credit: bool = True) -> float:  # fmt: skip
    """The released format score, at most 1.0. It can be negative (down to -0.3 λ): the anchoring penalty
    for an unclosed ``<think>`` applies even when nothing else was earned, exactly as in the release.
    ``balance_after_cap`` (a variant, ``RewardConfig.balance_after_cap``): the +0.1 for balanced tags comes after
    capping the rest at 0.9, so it is never lost to the cap. ``broken_call_penalty`` (a variant,
    ``RewardConfig.broken_call_penalty``): that much less, after the cap, per broken ``<tool_call>``.
    ``tool_credit`` False (a variant, ``RewardConfig.tool_credit``): no +0.3 for thinking before a call."""
    penalty = broken_call_penalty * broken_tool_calls(completion) if broken_call_penalty else 0.0
    has_think = has_substantive_think(completion)
    has_tool = has_parseable_tool_call(completion)
    has_answer = has_nonempty_answer(completion)
    opens_answer = "<answer>" in completion
    closes_answer = "</answer>" in completion
    closes_think = "</think>" in completion

    score = 0.0
    think_w, open_w, close_w = (0.2, 0.3, 0.2) if answer_suffix else (0.3, 0.2, 0.1)
    if has_think:
        score += think_w
    if has_answer:
        if opens_answer:
            score += open_w
        if closes_answer:
            score += close_w

    if anchor_weight > 0:
        bonus = 0.0
        if closes_think and has_think:
            bonus += 0.4
            if has_answer and closes_answer:
                bonus += 0.3
        if "<think>" in completion and not closes_think:
            bonus -= 0.3
        score += anchor_weight * bonus

    if tool_credit and has_think and has_tool and think_before_tool(completion):
        score += 0.3
    balanced = score > 0 and tags_balanced(completion)
    if balance_after_cap:
        return min(score, 0.9) + (0.1 if balanced else 0.0) - penalty
    return min(score + (0.1 if balanced else 0.0), 1.0) - penalty
