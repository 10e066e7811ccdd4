"""Reduced precision: which bfloat16 instructions this CPU has, and `autocast`, the setting the
matmul-like Functions read.

    with framework.autocast("bf16"):      # as torch.autocast("cpu", dtype=torch.bfloat16)
        y = model(x)                      # conv2d / conv_transpose2d: bfloat16 operands, float32 sums
    y.sum().backward()                    # backward in the precision each op ran its forward in

Inside `autocast("bf16")` the direct-route convolutions of float32 tensors (and linear on AMX, and on
AMX an inference forward of the fused attention: functional/_attention_amx.py) round
their two operands to bfloat16 (round to nearest even, as torch's `.to(torch.bfloat16)`) once per
call and accumulate in float32 on AMX tiles or with AVX512-BF16's `vdpbf16ps`; everything else (elementwise ops, losses, normalisations, the
optimizer, float64 tensors) stays as it was. Each Function notes the precision of its forward in its
context and runs its backward in it, so `backward()` needs no context. docs/numerics.md lists the
routes that have bfloat16 kernels and the error of each.

`support()` tells what the CPU and the kernels' compile target have, and `require_bf16()` refuses,
with the reason, where they lack it: no slow emulation is ever presented as bfloat16 arithmetic.
AMX (`amx_bf16`, `amx_tile`) is used where the CPU has it and the OS grants this process its tile
data (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, asked once per process); `route()` names
the instructions that run.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import platform
import sys
import threading
from typing import NamedTuple

import numpy as np

__all__ = ["autocast", "current", "bf16_active", "support", "require_bf16", "route", "normalise",
           "PRECISIONS", "PrecisionError", "Support"]

PRECISIONS = ("fp32", "bf16")
_ALIASES = {"fp32": "fp32", "float32": "fp32", "float": "fp32", "bf16": "bf16", "bfloat16": "bf16"}

# Models of LLVM whose own feature list has AVX512-BF16 (for NUMBA_CPU_NAME without _FEATURES)
_BF16_MODELS = ("cooperlake", "sapphirerapids", "emeraldrapids", "graniterapids", "diamondrapids",
                "znver4", "znver5")
# Linux x86-64: arch_prctl's syscall number, ARCH_REQ_XCOMP_PERM and XFEATURE_XTILEDATA
_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA = 158, 0x1023, 18


class PrecisionError(ValueError):
    """A precision this machine cannot run (the message says why), or an unknown name."""


class Support(NamedTuple):
    avx512_bf16: bool  # vdpbf16ps: the CPU has it and numba's compile target may use it
    amx_bf16: bool  # tdpbf16ps: the CPU has AMX-BF16 and the OS granted the tile data to this process
    reason: str  # why bfloat16 cannot run here ("" when it can)


def normalise(precision, where: str = "precision") -> str:
    """'fp32' or 'bf16' from those names or torch's ('float32', 'bfloat16'); where: the setting's
    name for the error."""
    name = _ALIASES.get(str(precision).lower()) if isinstance(precision, str) else None
    if name is None:
        raise PrecisionError(f"{where}: expected one of {', '.join(PRECISIONS)} (or float32, bfloat16), "
                             f"got {precision!r}")
    return name


def _host_features() -> dict:
    import llvmlite.binding as llvm
    return dict(llvm.get_host_cpu_features().items())


def _target_has_bf16() -> tuple[bool, str]:
    """Whether numba compiles the kernels for a CPU with AVX512-BF16 (NUMBA_CPU_NAME / _FEATURES
    count: a kernel compiled for another target cannot hold the instruction)."""
    from . import _simd
    name, features = _simd.target()
    if features:
        return "+avx512bf16" in features.split(","), f"NUMBA_CPU_NAME={name} with its feature list"
    return name.startswith(_BF16_MODELS), f"NUMBA_CPU_NAME={name}"


@functools.lru_cache(maxsize=None)
def _amx_permission() -> bool:
    """Ask Linux once per process for the AMX tile data (a process must before its first tile
    instruction, or the kernel kills it with SIGILL); True when granted."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(ctypes.c_long(_SYS_ARCH_PRCTL), ctypes.c_long(_ARCH_REQ_XCOMP_PERM),
                            ctypes.c_long(_XFEATURE_XTILEDATA)) == 0
    except (OSError, AttributeError):
        return False


@functools.lru_cache(maxsize=None)
def support() -> Support:
    """What this process can run (found once): AVX512-BF16 where the CPU has it (cpuid, as LLVM reads
    it, the OS's vector state included) and numba's target allows it; AMX-BF16 where the CPU has
    amx_bf16 and amx_tile and the OS grants the tile data."""
    if platform.machine() not in ("x86_64", "AMD64", "i686", "x86"):
        return Support(False, False, f"bfloat16 needs an x86 CPU with AVX512-BF16; this is {platform.machine()}")
    host = _host_features()
    if not host.get("avx512bf16"):
        return Support(False, False, "this CPU has no AVX512-BF16 (vdpbf16ps: Intel Cooper Lake, Sapphire "
                                     "Rapids and later, AMD Zen 4 and later)")
    target_ok, target = _target_has_bf16()
    if not target_ok:
        return Support(False, False, f"the kernels compile for a CPU without AVX512-BF16 ({target})")
    amx = bool(host.get("amx-bf16") and host.get("amx-tile")) and _amx_permission()
    return Support(True, amx, "")


def require_bf16(where: str = "bf16") -> None:
    """PrecisionError naming `where` and the reason unless this process can run bfloat16 kernels."""
    s = support()
    if not s.avx512_bf16:
        raise PrecisionError(f"{where}: bfloat16 is not available: {s.reason}")


def require_amx(where: str = "amx") -> None:
    """PrecisionError unless this process may run AMX tile instructions (the CPU has AMX-BF16 and the
    OS granted the tile data: without, the first tile instruction would kill the process)."""
    if not support().amx_bf16:
        raise PrecisionError(f"{where}: AMX-BF16 is not available: {support().reason or 'this CPU or OS has no AMX'}")


def route() -> str:
    """The instructions the bfloat16 kernels use here, for summaries and benchmark headers:
    'AVX512-BF16' (with a note when AMX is present but unused), or the reason there are none."""
    s = support()
    if not s.avx512_bf16:
        return f"none ({s.reason})"
    return "AMX (AVX512-BF16 below 16 channels)" if s.amx_bf16 else "AVX512-BF16"


_STATE = threading.local()


def current() -> str:
    """The precision set by the innermost autocast on this thread: 'fp32' outside any."""
    return getattr(_STATE, "precision", "fp32")


def bf16_active(dtype) -> bool:
    """Whether an op on arrays of `dtype` runs its bfloat16 kernel now (float32 inside autocast('bf16'))."""
    return current() == "bf16" and np.dtype(dtype) == np.float32


@contextlib.contextmanager
def autocast(precision: str = "bf16", dtype=None, enabled: bool = True, cache_enabled=None):
    """Inside, the matmul-like ops of float32 tensors run in `precision` ('bf16' or 'fp32', also
    torch's names 'bfloat16', 'float32'); enabled=False (or 'fp32') leaves float32. torch's
    spelling works too: autocast("cpu", dtype=torch.bfloat16) (dtype by name; "cpu" alone means
    bfloat16, torch's CPU default; cache_enabled is accepted and changes nothing). Refuses 'bf16'
    on a machine without the instructions (PrecisionError with the reason). Nests; per thread."""
    if precision == "cpu":  # torch.autocast(device_type, dtype=...)
        precision = "bf16" if dtype is None else str(dtype).rsplit(".", 1)[-1]
    elif dtype is not None:
        raise PrecisionError(f"autocast: dtype= goes with device_type 'cpu' (torch's spelling), got "
                             f"{precision!r} and dtype={dtype!r}")
    name = normalise(precision, "autocast") if enabled else "fp32"
    if name == "bf16":
        require_bf16("autocast('bf16')")
    previous = current()
    _STATE.precision = name
    try:
        yield
    finally:
        _STATE.precision = previous
