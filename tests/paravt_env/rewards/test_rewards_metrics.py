import pytest

from paravt_env.rewards import extract_answer, mcq_accuracy, normalize_text, temporal_iou, token_f1

CALL = '<tool_call>{"name": "crop_video", "arguments": {"start_time": 1, "end_time": 5}}</tool_call>'


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("<think>x</think><answer>  B </answer><answer>C</answer>", "B"),
        ("<answer>\nThe answer is (C)\n</answer>", "The answer is (C)"),
        # after </think>: tool blocks and chat tokens removed
        (f"<think>x</think>\n{CALL}\n<tool_response>frames</tool_response>\nB<|im_end|>", "B"),
        ("<think>a</think>mid</think>tail", "mid</think>tail"),
        # last non-empty line that is not a chat token or a tool tag
        ("I looked.\nB\n<|im_end|>\n<tool_call>", "B"),
        ("<think>x</think>\n" + CALL + "\n<|im_end|>", "<think>x</think>"),
        ("", ""),
        ("<|im_end|>\n   \n<tool_response>", ""),
        ("first\u2028second", "second"),  # str.splitlines splits on Unicode line separators too
    ],
)
def test_extract_answer(completion, expected):
    assert extract_answer(completion) == expected


def test_extract_answer_falls_back_to_last_line_when_think_tail_is_empty():
    # "</think>" present but only a tool block after it -> tail empty -> last line rule (which keeps tag lines
    # that do not start with "<tool_" or "<|im_")
    assert extract_answer("<think>x</think>" + CALL) == "<think>x</think>" + CALL


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Red-Circle, an apple!", "redcircle apple"),
        ("  A   cat  ", "cat"),
        ("theatre anthem", "theatre anthem"),  # articles only as whole words
        ("[12.5, 18.0]", "125 180"),
        ("Café_au-lait", "café_aulait"),
    ],
)
def test_normalize_text(text, expected):
    assert normalize_text(text) == expected


@pytest.mark.parametrize(
    ("pred", "gt", "expected"),
    [
        ("red red circle", "red circle", 0.8),  # set overlap, counts with repeats: P=2/3, R=1
        ("a red square", "red circle", 0.5),
        ("blue square", "red circle", 0.0),
        ("", "red", 0.0),
        ("the", "red", 0.0),  # normalises to nothing
        ("Red circle.", "red circle", 1.0),
        ("red circle at 41 seconds", "red circle", 2 * 0.4 * 1.0 / 1.4),
    ],
)
def test_token_f1(pred, gt, expected):
    assert token_f1(pred, gt) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("pred", "gt", "expected"),
    [
        ("B", "B", 1.0),
        ("b", "B", 1.0),
        ("B", "b", 1.0),
        ("(B)", "B", 1.0),
        ("The answer is C.", "C", 1.0),
        ("the answer is (A)", "A", 1.0),
        ("Option D", "D", 1.0),
        ("option d", "D", 0.0),  # the patterns want a capital letter
        ("A. red circle", "A", 1.0),
        ("D) the blue one", "D", 1.0),
        ("I think B or C", "C", 0.0),  # only the first standalone letter counts
        ("I think B or C", "B", 1.0),
        ("AB", "A", 0.0),
        ("A", "E", 0.0),  # ground truth must be A-D
        ("A", "AB", 0.0),
        ("", "A", 0.0),
    ],
)
def test_mcq_accuracy(pred, gt, expected):
    assert mcq_accuracy(pred, gt) == expected


@pytest.mark.parametrize(
    ("pred", "gt", "expected"),
    [
        ("[10, 20]", "[15, 25]", 5 / 15),
        ("10.0, 20.0", "[10, 20]", 1.0),
        ("The event spans [12.5, 18.0] seconds", "[10, 20]", 5.5 / 10),
        ("[0, 5]", "[10, 20]", 0.0),
        ("[20, 10]", "[10, 20]", 0.0),  # end <= start
        ("[10, 20]", "[5, 5]", 0.0),
        ("from 10 to 20", "[10, 20]", 0.0),  # no pair
        ("[., 3]", "[1, 2]", 0.0),  # the release raises here; a reward must not
        ("[1.2.3, 4]", "[1, 2]", 0.0),
    ],
)
def test_temporal_iou(pred, gt, expected):
    assert temporal_iou(pred, gt) == pytest.approx(expected, abs=1e-12)
