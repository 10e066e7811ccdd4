"""A pytest plugin: which numba kernels a test run compiles, and for how long (the suite's cold
kernel cache is its slowest part: docs/benchmarks.md, "The suite's cold start").

    NUMBA_CACHE_DIR=$(mktemp -d) COMPILE_PROFILE=compile.json PYTHONPATH=scripts \
        python -m pytest -n 0 -p compile_profile [tests ...]
    python scripts/compile_profile.py compile.json        # the table, slowest first

Per kernel (module.qualname): the seconds spent compiling it, exclusive of the kernels it compiled
on the way (numba compiles a callee inside its caller's compile), and how many signatures. Only
this process's compiles: a test's subprocess (a command under test, an instruction-set child)
compiles in its own process, uncounted; so would pytest-xdist's workers (`-n 0` keeps the tests
in this process). An empty NUMBA_CACHE_DIR makes the run cold without
touching the tree's own cache.
"""
from __future__ import annotations

import atexit
import collections
import json
import os
import sys
import time

_STATS, _COUNTS, _STACK = collections.defaultdict(float), collections.Counter(), []


def _name(dispatcher) -> str:
    f = getattr(dispatcher, "py_func", None)
    return f"{f.__module__}.{f.__qualname__}" if f is not None else str(dispatcher)


def _install():
    from numba.core import event

    class _Listener(event.Listener):
        def on_start(self, ev):
            _STACK.append([time.perf_counter(), 0.0])

        def on_end(self, ev):
            t0, inner = _STACK.pop()
            total = time.perf_counter() - t0
            name = _name(ev.data.get("dispatcher"))
            _STATS[name] += total - inner
            _COUNTS[name] += 1
            if _STACK:
                _STACK[-1][1] += total

    event.register("numba:compile", _Listener())
    atexit.register(_dump, os.environ.get("COMPILE_PROFILE", "compile_profile.json"))


def _dump(path):
    rows = sorted(_STATS.items(), key=lambda kv: -kv[1])
    with open(path, "w") as f:
        json.dump({k: [round(v, 3), _COUNTS[k]] for k, v in rows}, f, indent=0)


def table(path, top=40) -> str:
    data = json.load(open(path))
    total, n = sum(v[0] for v in data.values()), sum(v[1] for v in data.values())
    lines = [f"{total:.1f} s compiling {n} signatures of {len(data)} kernels", "| s | signatures | kernel |",
             "|---:|---:|---|"]
    lines += [f"| {t:.2f} | {c} | {k} |" for k, (t, c) in list(data.items())[:top]]
    return "\n".join(lines)


def pytest_configure(config):
    """pytest calls this for a plugin it loaded (-p compile_profile), not for an import."""
    _install()


if __name__ == "__main__":
    print(table(sys.argv[1]))
