"""paravt.learners.cpu_numerics: every entry point that runs a model computes with AVX2 kernels, MKL's AVX2 code
path and no oneDNN, so two x86-64 machines compute the same floats (the main job took another path
from RL step 1 on another machine)."""

import json
import logging
import os
import platform
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

x86 = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="the pins are for x86-64")

# What a fresh process computes after an entry point set its threads: the record, and digests of a softmax (torch's
# vectorised reduction) and of a matrix product (MKL).
PROBE = """
import hashlib, json, sys
from paravt.learners.threads import set_torch_threads
set_torch_threads(1)
import torch
from paravt.learners.cpu_numerics import numerics_record
g = torch.Generator().manual_seed(0)
x = torch.randn(100000, generator=g)
a, w = torch.randn(64, 1000, generator=g), torch.randn(1000, 48, generator=g)
digest = lambda t: hashlib.sha256(t.numpy().tobytes()).hexdigest()
print(json.dumps({**numerics_record(), "softmax": digest(torch.softmax(x, 0)), "matmul": digest(a @ w)}))
"""


def _probe(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "PARAVT_NATIVE_NUMERICS")}
    run = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


@x86
def test_an_entry_point_pins_the_vector_code_and_turns_onednn_off():
    pinned = _probe()
    assert (pinned["cpu_capability"], pinned["mkl_cbwr"], pinned["onednn"], pinned["threads"]) == ("AVX2", "AVX2", False, 1)
    native = _probe(PARAVT_NATIVE_NUMERICS="1")
    assert native["mkl_cbwr"] is None and native["onednn"] is True
    if native["cpu_capability"] == "AVX2":
        pytest.skip("this CPU's own kernels are AVX2: the pin changes no float here")
    # on a wider machine the pin is what changes the floats (the cause of runs that differ between machines)
    assert pinned["softmax"] != native["softmax"] and pinned["matmul"] != native["matmul"]
    # and what the pin computes is what a process given the same variables by hand computes
    by_hand = _probe(PARAVT_NATIVE_NUMERICS="1", ATEN_CPU_CAPABILITY="avx2", MKL_CBWR="AVX2")
    assert (by_hand["softmax"], by_hand["matmul"]) == (pinned["softmax"], pinned["matmul"])


def test_a_resumed_run_on_other_numerics_is_warned_about(tmp_path, caplog):
    from paravt.learners.cpu_numerics import NUMERICS_FILE, record_numerics

    first = record_numerics(tmp_path, resume=False)
    assert json.loads((tmp_path / NUMERICS_FILE).read_text()) == first
    with caplog.at_level(logging.WARNING):
        record_numerics(tmp_path, resume=True)
    assert not caplog.records  # the same machine and settings: nothing to say
    other = {**first, "cpu_capability": first["cpu_capability"] + "-elsewhere", "threads": first["threads"] + 5}
    (tmp_path / NUMERICS_FILE).write_text(json.dumps(other))
    with caplog.at_level(logging.WARNING):
        record_numerics(tmp_path, resume=True)
    (message,) = [r.getMessage() for r in caplog.records]
    assert f"cpu_capability '{other['cpu_capability']}' -> " in message and f"threads {other['threads']} -> " in message
    assert "will not repeat" in message


@pytest.mark.parametrize(("text", "why"), [("{not json", "not JSON"), ("[1, 2]", "holds a JSON list"),
                                           ('"avx2"', "holds a JSON str"), ("null", "holds a JSON NoneType")])  # fmt: skip
def test_a_damaged_record_stops_a_resume_by_name_and_is_kept(tmp_path, text, why):
    from paravt.learners.cpu_numerics import NUMERICS_FILE, record_numerics
    from paravt_env.storage import DamagedFile

    path = tmp_path / NUMERICS_FILE
    path.write_text(text)
    with pytest.raises(DamagedFile, match=rf"numerics.json: damaged, {why}.*move it aside"):
        record_numerics(tmp_path, resume=True)
    assert path.read_text() == text  # the only witness of the run's first numerics is not overwritten
    path.unlink()
    assert record_numerics(tmp_path, resume=True)["threads"] >= 1 and path.is_file()
