"""framework/malloc.py: glibc's allocator tuned by the commands, so that a step's freed arrays are
reused instead of mapped afresh (each fresh page faults); SRGRAD_MALLOC=system leaves glibc's
defaults; `import framework` alone changes nothing."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from framework import malloc

# In a fresh process: import framework, then 10 "steps" that each allocate and touch `count` arrays of
# `mb` MB (a step's activations, or a 512x512 inference's) and free them, counting the minor page
# faults after the first step.
_PROBE = """
import json, resource, sys, numpy as np
import framework
from framework import malloc
malloc.tune()
count, mb = int(sys.argv[1]), int(sys.argv[2])

def step():
    arrays = [np.empty(mb << 18, np.float32) for _ in range(count)]
    for a in arrays:
        a[:] = 1.0

step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(json.dumps({"faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before,
                  "status": malloc.status()}))
"""

glibc = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                           reason="the settings are glibc's")


def _probe(env_value=None, count=6, mb=8):
    env = {k: v for k, v in os.environ.items() if k not in ("SRGRAD_MALLOC", "GLIBC_TUNABLES")}
    if env_value is not None:
        env["SRGRAD_MALLOC"] = env_value
    out = subprocess.run([sys.executable, "-c", _PROBE, str(count), str(mb)], capture_output=True,
                         text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@glibc
def test_a_freed_array_is_reused_not_mapped_afresh():
    """10 steps of six 8 MB arrays (2048 pages each): tuned, almost no new faults; with glibc's
    defaults (SRGRAD_MALLOC=system) the freed heap is trimmed or the arrays mapped afresh, and every
    step faults on thousands of pages again (here ~3000)."""
    tuned, system = _probe(), _probe("system")
    assert tuned["status"] == "glibc heap only (mmap max 0), trim threshold 2048 MiB"
    assert system["status"] == "glibc defaults (SRGRAD_MALLOC=system)"
    assert tuned["faults"] < 500, tuned
    assert system["faults"] > 10 * 2048, system  # at least an array's pages again every step


@glibc
def test_an_array_above_glibcs_largest_mmap_threshold_is_reused_too():
    """Two 64 MB arrays per step (one 64-channel 512x512 activation each), above the 32 MiB that
    glibc's mmap threshold can reach: tuned, the heap serves them again without a fault; with glibc's
    defaults each is a fresh mapping, faulted again every step (once per 2 MB huge page, once per
    4 KB page without them: here 10880; the bound asks for one per 4 MB)."""
    tuned, system = _probe(count=2, mb=64), _probe("system", count=2, mb=64)
    assert tuned["faults"] < 100, tuned
    assert system["faults"] >= 10 * 2 * 16, system


_COMMAND = """
import json, sys
sys.path.insert(0, {repo!r})
import framework
from framework import malloc
print(json.dumps({{"after_import": malloc.status()}}))
sys.modules["probe_command"] = type(sys)("probe_command")
sys.modules["probe_command"].main = lambda: print(json.dumps({{"in_command": malloc.status()}})) or 0
import srgrad_cli
srgrad_cli.run("probe_command", "main")
"""


@glibc
def test_import_changes_nothing_and_every_command_tunes():
    """`import framework` leaves the process's allocator alone; srgrad_cli.run (every installed
    command's entry) tunes it before the command's first line."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {k: v for k, v in os.environ.items() if k != "SRGRAD_MALLOC"}
    out = subprocess.run([sys.executable, "-c", _COMMAND.format(repo=repo)], capture_output=True,
                         text=True, env=env, check=False)
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert lines[0] == {"after_import": "not tuned yet"}, out
    assert lines[1]["in_command"].startswith("glibc heap only"), out
    assert out.returncode == 0, out.stderr


def test_status_says_what_was_done_in_this_process():
    assert malloc.tune() == malloc.status() != "not tuned yet"


def test_an_unknown_setting_is_named_in_a_warning(monkeypatch):
    """A misspelt SRGRAD_MALLOC is not taken silently: the warning names the variable and its choices."""
    monkeypatch.setitem(malloc._STATE, "status", "not tuned yet")
    monkeypatch.setenv("SRGRAD_MALLOC", "sytem")
    with pytest.warns(UserWarning, match=r"SRGRAD_MALLOC='sytem' is not understood: 'system' keeps"):
        malloc.tune()
