"""glibc's allocator, tuned by the commands so that a training step's arrays are not page-faulted afresh.

numpy takes its arrays from malloc. glibc serves a request above its mmap threshold (128 KiB at
start, raised by the size of each freed mapping, trimmed back by heap shrinking) with a fresh mmap,
and every page of a fresh mapping faults on first touch. A training step allocates and frees the
same 1-30 MB activations and gradients every step: in a process that runs srgrad alone (as a user
runs it) those faults were ~20% of a 16-patch step (SRVGGNetCompact: 93-97 ms, 77-80 ms with the
settings below; docs/benchmarks.md). A process that also ran torch hid it, because torch's large
frees had raised the threshold.

`tune()` sets M_MMAP_THRESHOLD to 32 MiB (glibc's largest on 64-bit)
and M_TRIM_THRESHOLD to 256 MiB through mallopt: blocks below 32 MiB come from the heap and are
reused, and the heap keeps up to 256 MiB of freed memory instead of returning it to the system at
once (the resident size after a step stays near its peak; the peak itself does not grow). The
environment variable SRGRAD_MALLOC=system leaves glibc's defaults (`tuned` or unset applies these;
any other value is warned about and taken as `tuned`); on other C libraries (musl,
macOS, Windows) nothing is changed. `status()` says what was done.

Who calls it: every installed command (srgrad_cli.run, before the command's first line) and the
benchmark scripts that time srgrad. `import framework` changes nothing in the process: a library
that tunes the C allocator of whoever imports it would be a side effect the importer did not ask
for; a user's own training script calls `framework.malloc.tune()` first to get the same setting.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import warnings

MMAP_THRESHOLD = 32 * 2**20
TRIM_THRESHOLD = 256 * 2**20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h>

_STATE = {"status": "not tuned yet"}


def tune() -> str:
    """Apply the settings above once per process (idempotent); returns status()."""
    if _STATE["status"] != "not tuned yet":
        return _STATE["status"]
    choice = os.environ.get("SRGRAD_MALLOC", "").strip().lower()
    if choice not in ("", "tuned", "system"):
        warnings.warn(f"SRGRAD_MALLOC={os.environ['SRGRAD_MALLOC']!r} is not understood: 'system' keeps "
                      f"glibc's allocator defaults, 'tuned' (or unset) applies srgrad's; using 'tuned'",
                      stacklevel=2)
    if choice == "system":
        _STATE["status"] = "glibc defaults (SRGRAD_MALLOC=system)"
    elif platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        _STATE["status"] = f"unchanged (not glibc: {platform.system()} {platform.libc_ver()[0] or 'libc'})"
    else:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            ok = (libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                  and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)
        except (OSError, AttributeError) as exc:
            ok, why = False, str(exc)
        else:
            why = "mallopt refused"
        _STATE["status"] = (f"glibc mmap threshold {MMAP_THRESHOLD >> 20} MiB, trim threshold "
                            f"{TRIM_THRESHOLD >> 20} MiB" if ok else f"glibc defaults ({why})")
    return _STATE["status"]


def status() -> str:
    """What tune() did in this process, for benchmark headers and bug reports."""
    return _STATE["status"]
