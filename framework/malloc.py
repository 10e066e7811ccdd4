"""glibc's allocator, tuned by the commands so that a run's arrays are not page-faulted afresh.

numpy takes its arrays from malloc. glibc serves a request above its mmap threshold (128 KiB at
start, raised by the size of each freed mapping up to 32 MiB) with a fresh mmap, returns the heap's
freed top to the system above its trim threshold, and every page of fresh memory faults on first
touch (with transparent huge pages, which numpy asks for on large arrays, a fault can also compact
memory). A training step allocates and frees the same 1-30 MB activations every step, and one
512x512 inference the same 64-256 MB ones every image: in a process that runs srgrad alone (as a
user runs it) those faults were ~20% of a 16-patch step (SRVGGNetCompact: 93-97 ms, 77-80 ms with
a 32 MiB mmap threshold) and 8-38% of a 512x512 inference even with that threshold (EDSR 4.4-4.8 s,
3.2 s with the settings below; docs/benchmarks.md). A process that also ran torch hid the first,
because torch's large frees had raised the threshold.

`tune()` sets, through mallopt, M_MMAP_MAX to 0 (every block from the heap, whatever its size; a
thread's own arena that cannot grow to hold a block still maps it) and M_TRIM_THRESHOLD to 2 GiB - 1
(the largest mallopt takes: the heap keeps what it freed, in practice until the process ends). So a freed array's memory serves the next one of its size
without a fault, as an engine's memory arena would; the cost is the resident size, which stays near
the run's peak after it, and a peak 6-12% higher at 512x512 (freed blocks too small for the next
request stay behind it). The environment variable SRGRAD_MALLOC=system leaves glibc's defaults
(`tuned` or unset applies these; any other value is warned about and taken as `tuned`); on other C
libraries (musl, macOS, Windows) nothing is changed. `status()` says what was done.

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

TRIM_THRESHOLD = 2**31 - 1
MMAP_MAX = 0
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's <malloc.h>

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
            ok = (libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
                  and libc.mallopt(_M_MMAP_MAX, MMAP_MAX) == 1)
        except (OSError, AttributeError) as exc:
            ok, why = False, str(exc)
        else:
            why = "mallopt refused"
        _STATE["status"] = (f"glibc heap only (mmap max {MMAP_MAX}), trim threshold "
                            f"{(TRIM_THRESHOLD + 1) >> 20} MiB"
                            if ok else f"glibc defaults ({why})")
    return _STATE["status"]


def status() -> str:
    """What tune() did in this process, for benchmark headers and bug reports."""
    return _STATE["status"]
