"""The env layer must import without torch or transformers (an agent author gets a light install)."""

import subprocess
import sys


def test_env_layer_imports_without_heavy_stacks():
    code = (
        "import sys, paravt_env, paravt_env.video, paravt_env.data, paravt_env.tools, paravt_env.data.synthetic\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'sglang', 'openrlhf', 'pandas', 'paravt') if m in sys.modules)\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"paravt_env imported {out.stdout.strip()}"
