"""scripts/isa_env.py: the profiles hold each library where docs/numerics.md says, in a child process."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import isa_env  # noqa: E402

_PROBE = """
import json, numba, numpy
try:
    from numpy._core import _multiarray_umath as m
except ImportError:
    from numpy.core import _multiarray_umath as m
print(json.dumps({"numba": numba.config.CPU_NAME, "features": numba.config.CPU_FEATURES,
                  "numpy_on": [k for k in m.__cpu_dispatch__ if m.__cpu_features__.get(k)]}))
"""


@pytest.mark.parametrize("profile", ["avx2", "baseline"])
def test_profile_reaches_numpy_and_numba(profile):
    env = isa_env.environment(profile)
    out = subprocess.run([sys.executable, "-c", _PROBE], env={**os.environ, **env}, check=True,
                         capture_output=True, text=True).stdout
    seen = json.loads(out)
    assert seen["numba"] == {"avx2": "haswell", "baseline": "x86-64"}[profile]
    assert seen["features"] == ""  # a CPU name alone would keep the host's AVX-512 features
    disabled = set(env["NPY_DISABLE_CPU_FEATURES"].split(","))
    assert not disabled & set(seen["numpy_on"])
    if profile == "baseline":
        assert seen["numpy_on"] == []  # only numpy's baseline build is left


def test_default_profile_is_the_one_below_the_host():
    assert isa_env.environment() == isa_env.environment("avx2" if isa_env.host_has_avx512() else "baseline")


def test_cli_prints_env_words_and_refuses_an_unknown_profile(capsys):
    assert isa_env.main(["avx2"]) == 0
    words = capsys.readouterr().out.split()
    assert "OPENBLAS_CORETYPE=Haswell" in words and "NUMBA_CPU_FEATURES=" in words
    assert all("=" in w for w in words)  # no value holds a space: `env $(...)` splits on them
    with pytest.raises(SystemExit, match="profile must be one of avx2, baseline"):
        isa_env.main(["avx3"])
