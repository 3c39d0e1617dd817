"""``paravt.policies.weights``: a checkpoint's safetensors headers checked before anything loads them, hostile ones
refused with the file and what is wrong, never a traceback nor an allocation of what a header claims."""

import json
import shutil
import struct

import pytest

from paravt.cli import main
from paravt.policies.weights import MAX_DEPTH, file_problem, header_problem, weights_problem


def _write(path, header, buffer=b""):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + buffer)
    return path


GOOD = {"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
        "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]}, "__metadata__": {"format": "pt"}}  # fmt: skip


def test_a_sound_file_passes_and_a_real_checkpoint_too(tmp_path, tiny_qwen3):
    assert file_problem(_write(tmp_path / "m.safetensors", GOOD, bytes(22))) is None
    assert weights_problem(tiny_qwen3) is None


@pytest.mark.parametrize(("header", "buffer", "message"), [
    ([1, 2, 3], 0, "its header is a JSON list, not an object"),
    ("text", 0, "its header is a JSON str"),
    ({"a": [0, 16]}, 16, "tensor 'a' is described by a JSON list"),
    ({"a": {**GOOD["a"], "dtype": "F128"}}, 16, "tensor 'a' has dtype 'F128'"),
    ({"a": {**GOOD["a"], "shape": [2, -2]}}, 16, "has shape [2, -2]"),
    ({"a": {**GOOD["a"], "data_offsets": [16, 0]}}, 16, "has data_offsets [16, 0]"),
    ({"a": {**GOOD["a"], "shape": [4, 4]}}, 16, "spans 16 bytes where shape [4, 4] of F32 needs 64"),
    ({"a": GOOD["a"], "b": {**GOOD["b"], "data_offsets": [8, 14]}}, 22, "starts at byte 8 of the buffer where the previous one ends at 16"),
    ({"a": GOOD["a"]}, 8, "is cut short: "),
    ({"__metadata__": {"x": 1}}, 0, "__metadata__ is not an object of strings"),
])  # fmt: skip
def test_hostile_headers_are_named(tmp_path, header, buffer, message):
    assert message in file_problem(_write(tmp_path / "m.safetensors", header, bytes(buffer)))


def test_deep_nesting_huge_claims_and_bytes_that_are_not_json(tmp_path):
    deep = b"[" * 100_000 + b"]" * 100_000  # json would recurse a hundred thousand levels
    assert f"nested more than {MAX_DEPTH} levels deep" in file_problem(_write(tmp_path / "d.safetensors", deep))
    f = tmp_path / "huge.safetensors"  # a header claiming 2**40 bytes: refused before any read of that size
    f.write_bytes(struct.pack("<Q", 2**40) + b"{}")
    assert "cut short: its header alone claims" in file_problem(f)
    assert "not JSON" in file_problem(_write(tmp_path / "j.safetensors", b"{'a': 1}"))
    assert "not UTF-8" in file_problem(_write(tmp_path / "u.safetensors", b"\xff\xfe"))
    (tmp_path / "t.safetensors").write_bytes(b"abc")
    assert "too short to be a safetensors file" in file_problem(tmp_path / "t.safetensors")
    assert header_problem({}, 0) is None  # an empty checkpoint file is well-formed
    assert "cut short: its tensors need 16 bytes of buffer, it holds 8" in header_problem({"a": GOOD["a"]}, 8)


@pytest.mark.parametrize("header", [[1, 2], b"[" * 50_000 + b"]" * 50_000])
def test_eval_and_serve_refuse_a_hostile_checkpoint_in_one_line(tmp_path, tiny_qwen3, synth_small, capsys, header):
    model = tmp_path / "model"
    shutil.copytree(tiny_qwen3, model)
    _write(model / "model.safetensors", header)
    data, _ = synth_small
    assert main(["eval", "--policy", f"hf:{model}", "--data", str(data), "--limit", "1", "--out", str(tmp_path / "ev"),
                 "--no-progress"]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "model.safetensors" in err and "Traceback" not in err
    assert main(["serve", "--model", str(model), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "model.safetensors" in err and "Traceback" not in err
