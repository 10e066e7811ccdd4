"""Print the environment that holds numpy, PyTorch, OpenBLAS and numba to a lower instruction set, so
one machine can run what another kind of CPU runs (docs/numerics.md says which knob does what).

    python scripts/isa_env.py              # the profile below this CPU: avx2 on an AVX-512 CPU, else baseline
    python scripts/isa_env.py avx2         # every library held to AVX2 (+FMA): what a Haswell..Zen 3 CPU runs
    python scripts/isa_env.py baseline     # numpy's baseline (SSE4.2), torch's DEFAULT, generic x86-64 code
    env $(python scripts/isa_env.py) python -m pytest tests/framework/functional

It prints `NAME=value` words, one per line, for `env` (or `export` in a shell). Measured on
an AVX-512 machine (docs/numerics.md): each of these changes the last bits of that library's results,
except ATEN_CPU_CAPABILITY alone, which leaves torch's float32 GELU (oneDNN's) at AVX-512.
"""
from __future__ import annotations

import sys

# torch: ATen's own vectorised kernels, and oneDNN's (convolutions, matmuls, float32 GELU);
# OpenBLAS: the GEMM kernel numpy's matmul runs; numba: the code LLVM generates for srgrad's kernels
# (a CPU name alone keeps the host's features, so the feature string is emptied to the name's own).
PROFILES = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "OPENBLAS_CORETYPE": "Haswell",
             "NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": ""},
    "baseline": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41",
                 "OPENBLAS_CORETYPE": "Nehalem", "NUMBA_CPU_NAME": "x86-64", "NUMBA_CPU_FEATURES": ""},
}


def numpy_disabled(profile: str) -> str:
    """numpy's dispatched targets above the profile (comma-separated; their names differ between numpy versions:
    X86_V4 / AVX512_SKX / ...), for NPY_DISABLE_CPU_FEATURES."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy < 2
        from numpy.core import _multiarray_umath as umath
    dispatch = list(umath.__cpu_dispatch__)
    if profile == "baseline":
        return ",".join(dispatch)
    return ",".join(n for n in dispatch if "AVX512" in n or n == "X86_V4")


def host_has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


def environment(profile: str | None = None) -> dict:
    profile = profile or ("avx2" if host_has_avx512() else "baseline")
    if profile not in PROFILES:
        raise SystemExit(f"isa_env: profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    return {**PROFILES[profile], "NPY_DISABLE_CPU_FEATURES": numpy_disabled(profile)}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) > 1 or (argv and argv[0] in ("-h", "--help")):
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    for name, value in environment(argv[0] if argv else None).items():
        print(f"{name}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
