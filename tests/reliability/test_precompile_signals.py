"""The kernel-compile children of a first run (framework/engine/run/precompile.py) end with their parent
(issue 37 point 9): SIGTERM (or kill -9) to srgrad-train while its 2 children dry-run and compile
left them compiling for 19 s, and their temporary folder behind."""
import os
import signal
import sys
import time

import pytest

from .conftest import start_train

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="finds the children through /proc")


def _processes_naming(text: str) -> list:
    """PIDs of the live processes whose command line contains `text`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if text.encode() in fh.read():
                    found.append(int(pid))
        except OSError:  # ended meanwhile
            pass
    return found


def _wait(predicate, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_the_compile_children_end_with_their_parent(make_tiny_config, tmp_path):
    """SIGTERM kills srgrad-train there as kill -9 does (its trainer does not handle signals yet:
    exit -15, no clean-up of its own), so this is the kill -9 case too (checked by hand with
    SIGKILL: gone 0-0.2 s after the parent). Each child takes SIGTERM in a thread of its own, so a
    child deep in LLVM, or one whose Python handler's exception got dropped, still ends at once
    (the earlier handler-in-the-main-thread failed here 1 run in 6 under two busy processes, and
    with the mask set after the imports, OpenBLAS's threads took the signal and the child died
    without cleaning up)."""
    signum = signal.SIGTERM
    tmp = tmp_path / "tmp"  # TMPDIR: the children's claims folder and their dry runs go here
    tmp.mkdir()
    proc = start_train([make_tiny_config(iters=1)], SRGRAD_PRECOMPILE="1", TMPDIR=tmp,
                       NUMBA_CACHE_DIR=tmp_path / "cache")  # a cold cache: a long compile
    try:
        # the children are at work once one of them has claimed a signature to compile (a file
        # in their claims folder; their dry runs before it last tens of milliseconds, too short
        # to be seen reliably)
        assert _wait(lambda: any(p.is_file() and p.parent.name.startswith("srgrad-precompile-")
                                 for p in tmp.rglob("*")), 60), \
            proc.stderr.read() if proc.poll() is not None else "no compile started"
        children = _processes_naming(str(tmp))
        assert len(children) == 2, children
        proc.send_signal(signum)
        assert proc.wait(10) == -signum
        start = time.monotonic()
        gone = _wait(lambda: not _processes_naming(str(tmp)) and not os.listdir(tmp), 8)
        took = time.monotonic() - start
        assert gone, (_processes_naming(str(tmp)), list(tmp.rglob("*"))[:5])
        print(f"children and their folder gone {took:.2f} s after the parent")
    finally:
        proc.kill()
        proc.communicate()
        for pid in _processes_naming(str(tmp)):  # a failed test leaves no compiler running
            os.kill(pid, signal.SIGKILL)
