import json
import math

import pytest

from paravt_env.protocol import (
    CROP_VIDEO_TOOL,
    PROMPT_MODES,
    TOOL_NAME,
    parse_time,
    system_prompt,
    uses_tools,
)


def test_agentic_prompt_states_schema_parallelism_and_format():
    p = system_prompt("agentic")
    assert json.dumps(CROP_VIDEO_TOOL) in p
    assert "multiple <tool_call> blocks in one turn" in p
    for tag in ("<think>", "</think>", "<tool_call>", "<answer>", "</answer>"):
        assert tag in p


def test_every_mode_has_a_prompt_and_only_agentic_modes_offer_the_tool():
    assert set(PROMPT_MODES) == {"agentic", "agentic_general", "agentic_minimal", "agentic_compact", "reasoning", "direct"}
    for mode in PROMPT_MODES:
        assert (TOOL_NAME in system_prompt(mode)) == uses_tools(mode)
    assert "<think>" in system_prompt("reasoning") and "<think>" not in system_prompt("direct")


def test_unknown_mode_names_itself():
    with pytest.raises(ValueError, match="'chatty'"):
        system_prompt("chatty")


def test_schema_requires_both_times():
    params = CROP_VIDEO_TOOL["function"]["parameters"]
    assert params["required"] == ["start_time", "end_time"]
    assert set(params["properties"]) == {"start_time", "end_time"}


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (12, 12.0),
        (12.5, 12.5),
        ("12.5", 12.5),
        (" 7 s", 7.0),
        ("3 seconds", 3.0),
        (".5", 0.5),
        ("-4", -4.0),
        ("01:05", 65.0),
        ("1:02:03.5", 3723.5),
        ("00:00:00", 0.0),
    ],
)
def test_parse_time_reads_seconds_and_clock_times(value, seconds):
    assert parse_time(value) == seconds


@pytest.mark.parametrize("value", [None, True, "soon", "1:75", "1:60:00", "", [1], {"t": 1}, "1" * 100])
def test_parse_time_rejects_non_times(value):
    assert parse_time(value) is None


def test_parse_time_passes_non_finite_numbers_to_the_validator():
    assert math.isnan(parse_time(float("nan")))
    assert parse_time(10**400) == math.inf
