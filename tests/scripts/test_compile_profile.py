"""scripts/compile_profile.py: a pytest run under the plugin writes each compiled kernel's exclusive
compile time and signature count."""
import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

_TEST = """
import numba

@numba.njit
def inner(x):
    return x * 2

@numba.njit
def outer(x):
    return inner(x) + 1

def test_calls():
    assert outer(3) == 7 and outer(1.5) == 4.0  # two signatures of outer (and of inner)
"""


def test_a_run_records_each_kernel_and_its_signatures(tmp_path):
    (tmp_path / "test_tiny.py").write_text(_TEST)
    out = tmp_path / "compile.json"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), COMPILE_PROFILE=str(out),
               PYTHONPATH=str(SCRIPTS))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "compile_profile", "-p",
                          "no:cacheprovider", str(tmp_path / "test_tiny.py")], capture_output=True,
                         text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads(out.read_text())
    assert data["test_tiny.outer"][1] == 2 and data["test_tiny.inner"][1] == 2, data
    assert all(t >= 0 for t, _ in data.values())
    sys.path.insert(0, str(SCRIPTS))
    import compile_profile
    text = compile_profile.table(out)
    assert "compiling 4 signatures of 2 kernels" in text.splitlines()[0], text
