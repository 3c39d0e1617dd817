import json

import pytest

from paravt_env.protocol import STRUCTURAL_TAGS, format_tool_call, parse_response


def call_json(start, end, name="crop_video", **extra):
    return (
        "<tool_call>"
        + json.dumps({"name": name, "arguments": {"start_time": start, "end_time": end, **extra}})
        + "</tool_call>"
    )


def test_think_parallel_calls_answer():
    text = "<think>Two candidate windows.</think>\n" + call_json(10, 20) + "\n" + call_json(30.5, 41)
    p = parse_response(text)
    assert p.think == "Two candidate windows."
    assert [(c.start_time, c.end_time) for c in p.tool_calls] == [(10.0, 20.0), (30.5, 41.0)]
    assert all(c.form == "json" and c.error is None for c in p.tool_calls)
    assert p.answer is None and p.problems == ()


def test_answer_is_first_block_stripped():
    p = parse_response("<think>done looking</think><answer>  B </answer><answer>C</answer>")
    assert p.answer == "B"
    assert p.tool_calls == ()


def test_tool_code_keyword_positional_and_print_forms():
    text = (
        "<tool_code>crop_video(start_time=1, end_time=2.5)\n"
        "crop_video(3, 4)\n"
        "print(crop_video('/data/v.mp4', 5, 6))\n"
        "# crop_video(7, 8) is a comment\n"
        "</tool_code>"
    )
    p = parse_response(text)
    assert [(c.start_time, c.end_time, c.form) for c in p.tool_calls] == [
        (1.0, 2.5, "code"),
        (3.0, 4.0, "code"),
        (5.0, 6.0, "code"),
    ]
    assert p.tool_calls[2].arguments["video_path"] == "/data/v.mp4"


def test_tool_code_with_stray_quote_is_repaired():
    p = parse_response("<tool_code>crop_video(start_time=10, end_time=20.0')</tool_code>")
    assert [(c.start_time, c.end_time) for c in p.tool_calls] == [(10.0, 20.0)]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"start": 5, "end": 9}, (5.0, 9.0)),
        ({"start_time": "01:05", "end_time": "1:20"}, (65.0, 80.0)),
        ({"start_time": "0:01:05.5", "end_time": "00:02:00"}, (65.5, 120.0)),
        ({"start_time": "12.5s", "end_time": "20 seconds"}, (12.5, 20.0)),
        ({"begin": 1, "stop": 2}, (1.0, 2.0)),
    ],
)
def test_argument_aliases_and_clock_times(arguments, expected):
    p = parse_response(
        "<tool_call>" + json.dumps({"name": "crop_video", "arguments": arguments}) + "</tool_call>"
    )
    (call,) = p.tool_calls
    assert (call.start_time, call.end_time) == expected and call.error is None


def test_openai_wrapper_string_arguments_parameters_list_and_fence():
    wrapped = {
        "type": "function",
        "function": {"name": "crop_video", "arguments": json.dumps({"start_time": 1, "end_time": 2})},
    }
    listed = [
        {"name": "crop_video", "parameters": {"start_time": 3, "end_time": 4}},
        {"name": "crop_video", "arguments": {"start": 5, "end": 6}},
    ]
    text = (
        "<tool_call>" + json.dumps(wrapped) + "</tool_call>"
        "<tool_call>" + json.dumps(listed) + "</tool_call>"
        '<tool_call>```json\n{"name": "crop_video", "arguments": {"start_time": 7, "end_time": 8}}\n```</tool_call>'
        "<tool_call>crop_video(start_time=9, end_time=10)</tool_call>"
    )
    p = parse_response(text)
    assert [(c.start_time, c.end_time) for c in p.tool_calls] == [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)]
    assert p.problems == ()


def test_problems_name_what_is_wrong():
    text = (
        "<think>Let me look"  # unclosed think
        + '<tool_call>{"name": "crop_video", "arguments": {"start_time": 1}}</tool_call>'  # missing end
        + '<tool_call>{"name": "zoom_in", "arguments": {}}</tool_call>'  # unknown tool
        + "<tool_call>{not json</tool_call>"  # invalid JSON
        + '<tool_call>{"name": "crop_video", "arguments": {"start_time": "soon", "end_time": 3}}</tool_call>'
        + "</answer>"  # stray closing tag
    )
    p = parse_response(text)
    joined = "\n".join(p.problems)
    assert "unclosed <think>" in joined
    assert "missing argument end_time" in joined
    assert "unknown tool 'zoom_in'" in joined
    assert "invalid JSON" in joined
    assert "'soon' is not a time" in joined
    assert "stray </answer>" in joined
    assert p.think == "Let me look"
    # every call is kept (so the env can give feedback per call), with its error where it cannot run
    assert len(p.tool_calls) == 4
    assert [c.error is None for c in p.tool_calls] == [False, True, False, False]
    assert p.valid_tool_calls == ()


def test_unclosed_tool_call_runs_to_next_call_or_end():
    text = '<tool_call>{"name": "crop_video", "arguments": {"start_time": 1, "end_time": 2}}\n' + call_json(
        3, 4
    )
    text += '<tool_call>{"name": "crop_video", "arguments": {"start_time": 5, "end_time": 6}}'
    p = parse_response(text)
    assert [(c.start_time, c.end_time) for c in p.tool_calls] == [(1, 2), (3, 4), (5, 6)]
    assert any("unclosed <tool_call> (2x)" in q for q in p.problems)


def test_unclosed_answer_stops_at_end_of_turn_token():
    p = parse_response("<think>enough evidence</think><answer>C<|im_end|>")
    assert p.answer == "C"
    assert any("unclosed <answer>" in q for q in p.problems)


def test_spans_locate_every_structural_tag():
    text = "<think>a</think>" + call_json(1, 2) + "<tool_code>crop_video(1,2)</tool_code><answer>B</answer>"
    p = parse_response(text)
    assert [s.tag for s in p.spans] == [
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<answer>",
        "</answer>",
    ]
    for s in p.spans:
        assert text[s.start : s.end] == s.tag and s.tag in STRUCTURAL_TAGS


def test_tool_calls_inside_think_are_found():
    p = parse_response("<think>I will call " + call_json(1, 2) + " now</think>")
    assert len(p.valid_tool_calls) == 1


def test_empty_and_im_end_bodies_are_not_calls():
    p = parse_response("<tool_call></tool_call><tool_code><|im_end|></tool_code>")
    assert p.valid_tool_calls == ()
    assert any("empty" in q for q in p.problems)


def test_format_tool_call_round_trips():
    p = parse_response(format_tool_call(12.345, 20))
    (c,) = p.valid_tool_calls
    assert (c.start_time, c.end_time) == (12.35, 20.0)


def test_call_count_is_capped():
    p = parse_response(call_json(1, 2) * 100)
    assert len(p.tool_calls) == 64
    assert any("only the first 64" in q for q in p.problems)


@pytest.mark.parametrize(
    "junk",
    [
        b"\x00\xff\xfe<think>\x80",
        "<tool_code>" + "(" * 5000 + "</tool_code>",
        "<tool_code>" + "-" * 19000 + "1</tool_code>",
        "<tool_call>" + "[" * 100000 + "</tool_call>",
        "<tool_call>"
        + '{"name": "crop_video", "arguments": {"start_time": '
        + "9" * 5000
        + ', "end_time": 1}}</tool_call>',
        "<tool_code>crop_video(" + "9" * 5000 + ", 1)</tool_code>",
        "<think><think><answer><tool_call></think></answer></tool_call>" * 1000,
        "<tool_code>crop_video(start_time=__import__('os').system('echo pwned'), end_time=2)</tool_code>",
        None,
        12345,
    ],
)
def test_never_raises_on_junk(junk):
    p = parse_response(junk)
    assert isinstance(p.problems, tuple)


def test_python_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    p = parse_response(
        f"<tool_code>crop_video(start_time=open({str(marker)!r}, 'w'), end_time=2)</tool_code>"
    )
    assert not marker.exists()
    (c,) = p.tool_calls
    assert c.start_time is None and "not a time" in c.error


def test_megabyte_turn_parses():
    text = "<think>" + "x" * 2_000_000 + "</think>" + call_json(1, 2) * 10 + "<answer>A</answer>"
    p = parse_response(text)
    assert len(p.valid_tool_calls) == 10 and p.answer == "A"
