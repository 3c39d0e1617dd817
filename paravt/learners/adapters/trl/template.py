"""The local trainer's rendering under TRL: the checkpoint's own chat template, fed the local trainer's messages.

The local trainer (``paravt.policies.hf.HFPolicy.encode``) renders the env's messages with the checkpoint's
chat template and no ``tools`` argument (the env's system prompt carries the ``crop_video`` schema itself), the
env's feedback of a turn as the env's own user message(s), and the forced ``<think>\\n`` after the generation
prompt. TRL renders its own conversation: ``apply_chat_template(..., tools=[crop_video])`` (Qwen3-VL's template
then writes a second tool schema into the system message), one ``tool`` message per call, and the template's
own generation prompt. A checkpoint trained under the one rendering and sampled under the other sees another
prompt (the repro's cold start, 4-5 crops an episode under the local trainer, never called the tool under TRL).

``local_chat_template`` wraps the checkpoint's template in a preamble that turns TRL's conversation back into the
local trainer's before the template runs: ``tools`` dropped; each run of ``tool`` messages merged back into the
env's feedback message(s) (the tool results carry the env's messages in order, the first block of each marked
with its role, ``ROLE_KEY``: ``paravt.learners.adapters.trl.environment.tool_results``); an assistant turn's
parsed ``tool_calls`` written back as Hermes ``<tool_call>`` text (TRL's checks render them; the token ids of a
turn are the generated ones, never re-rendered); and the response prefix after the generation prompt. TRL
builds a completion by concatenating token ids (its prompt, the generated ids, each tool suffix rendered
alone), so the same rendering gives the same ids as the local trainer's rollout, token for token.
"""

from __future__ import annotations

ROLE_KEY = "paravt_role"
"""Key of the first content block of each env feedback message inside TRL's tool results: the message's role."""

_PREAMBLE = """{#- paravt: TRL's conversation back into the local trainer's (paravt.learners.adapters.trl.template) -#}
{%- set _pv = namespace(out=[], pending=[], role='user', text='') -%}
{%- for _m in messages -%}
{%- if _m['role'] == 'tool' -%}
{%- set _blocks = [{'type': 'text', 'text': _m['content']}] if _m['content'] is string else _m['content'] -%}
{%- for _b in _blocks -%}
{%- if _b is mapping and '@@ROLE@@' in _b and _pv.pending -%}
{%- set _pv.out = _pv.out + [{'role': _pv.role, 'content': _pv.pending}] -%}
{%- set _pv.pending = [] -%}
{%- endif -%}
{%- if _b is mapping and '@@ROLE@@' in _b -%}{%- set _pv.role = _b['@@ROLE@@'] -%}{%- endif -%}
{%- set _pv.pending = _pv.pending + [_b] -%}
{%- endfor -%}
{%- else -%}
{%- if _pv.pending -%}
{%- set _pv.out = _pv.out + [{'role': _pv.role, 'content': _pv.pending}] -%}
{%- set _pv.pending = [] -%}
{%- set _pv.role = 'user' -%}
{%- endif -%}
{%- if _m['role'] == 'assistant' and _m.get('tool_calls') -%}
{%- set _pv.text = '' -%}
{%- if _m.get('content') is string -%}{%- set _pv.text = _m['content'] -%}
{%- elif _m.get('content') -%}{%- for _b in _m['content'] -%}{%- if 'text' in _b -%}{%- set _pv.text = _pv.text + _b['text'] -%}{%- endif -%}{%- endfor -%}
{%- endif -%}
{%- for _c in _m['tool_calls'] -%}
{%- set _f = _c['function'] if 'function' in _c else _c -%}
{%- set _pv.text = _pv.text + '<tool_call>\\n' + {'name': _f['name'], 'arguments': _f['arguments']} | tojson + '\\n</tool_call>' -%}
{%- endfor -%}
{%- set _pv.out = _pv.out + [{'role': 'assistant', 'content': _pv.text}] -%}
{%- else -%}
{%- set _pv.out = _pv.out + [_m] -%}
{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if _pv.pending -%}{%- set _pv.out = _pv.out + [{'role': _pv.role, 'content': _pv.pending}] -%}{%- endif -%}
{%- set messages = _pv.out -%}
{%- set tools = none %}"""

MARK = "{#- paravt: TRL's conversation back into the local trainer's"
"""How a template already wrapped is recognised (wrapping twice would append the prefix twice)."""


def local_chat_template(template: str, response_prefix: str = "") -> str:
    """``template`` (the checkpoint's own, as the local trainer renders with it) under the preamble that feeds it
    the local trainer's messages, with ``response_prefix`` written after its generation prompt."""
    if not template:
        raise ValueError("the checkpoint has no chat template: the local trainer renders with the checkpoint's own, "
                         "and the TRL adapter renders with the same one")  # fmt: skip
    if template.startswith(MARK):
        raise ValueError("this chat template is already the TRL adapter's wrapper (local_chat_template): pass the "
                         "checkpoint's own")  # fmt: skip
    suffix = ""
    if response_prefix:
        import json

        # Jinja drops one trailing newline of a template: appended after it, the newline would no longer be
        # trailing and would render. No whitespace control either, which would strip the template's own output.
        template = template[:-1] if template.endswith("\n") else template
        suffix = "{% if add_generation_prompt %}{{ " + json.dumps(response_prefix) + " }}{% endif %}"
    return _PREAMBLE.replace("@@ROLE@@", ROLE_KEY) + template + suffix
