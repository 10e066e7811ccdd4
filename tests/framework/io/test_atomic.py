"""framework.io.atomic: the temporary file is a fresh, unpredictable name created exclusively (never
an existing file, symlink or input), the result has a plain open's permissions, and
clean_partial_writes removes exactly what killed writers left: files of its own pattern, from this
machine, of processes that are gone, regular, single-link, owned by us, not an input."""
import os
import re
import signal
import subprocess
import sys

import pytest

from framework.io import atomic
from framework.io.atomic import TEMP_SUFFIX, atomic_open, clean_partial_writes, write_atomic
from tests.conftest import dead_pid, partial_name

pytestmark = pytest.mark.skipif(os.name != "posix", reason="symlinks, hard links, PIDs")


def temp_files(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(TEMP_SUFFIX))


def leftover(folder, name="out.png", pid=None, host=None):
    """A file named as a write of `name` by process `pid` (default: a dead one) names its temporary."""
    path = folder / partial_name(name, pid, host)
    path.write_bytes(b"half a file")
    return path


def test_the_temporary_is_a_fresh_hidden_name_beside_the_target(tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace

    def replace(src, dst):
        seen.append(os.fspath(src))
        return real_replace(src, dst)
    monkeypatch.setattr(os, "replace", replace)
    write_atomic(tmp_path / "out.png", b"one")
    write_atomic(tmp_path / "out.png", b"two")
    assert (tmp_path / "out.png").read_bytes() == b"two" and temp_files(tmp_path) == []
    pattern = rf"\.out\.png\.[0-9a-f]{{8}}-{os.getpid()}-[0-9a-f]{{16}}\.srgrad\.tmp"
    assert all(os.path.dirname(s) == str(tmp_path) for s in seen)
    assert all(re.fullmatch(pattern, os.path.basename(s)) for s in seen) and seen[0] != seen[1]


def test_the_result_has_the_permissions_of_a_plain_open(tmp_path):
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "a.bin", b"x")
        with open(tmp_path / "b.bin", "wb") as fh:
            fh.write(b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.bin").stat().st_mode == (tmp_path / "b.bin").stat().st_mode
    assert (tmp_path / "a.bin").stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("trap", ["symlink", "hardlink", "input"])
def test_the_old_temp_name_is_never_used(tmp_path, trap):
    """`out.tmp` a symlink or hard link to an input, or itself an input: untouched."""
    src = tmp_path / "input.png"
    src.write_bytes(b"the input")
    old_name = tmp_path / "out.png.tmp"
    if trap == "symlink":
        old_name.symlink_to(src)
    elif trap == "hardlink":
        os.link(src, old_name)
    else:
        src = old_name
        src.write_bytes(b"the input")
    write_atomic(tmp_path / "out.png", b"the output")
    assert src.read_bytes() == b"the input" and old_name.exists()
    assert (tmp_path / "out.png").read_bytes() == b"the output"


def test_a_file_or_symlink_at_the_random_name_is_never_opened(tmp_path, monkeypatch):
    """Someone who guessed the next name (here: made it known) gains nothing: O_EXCL refuses it and
    the writer draws another name."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    tokens = iter(["a" * 16, "b" * 16, "c" * 16])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda n: next(tokens))
    squat = tmp_path / f".out.{atomic._HOST}-{os.getpid()}-{'a' * 16}{TEMP_SUFFIX}"
    squat.symlink_to(victim)
    squat2 = tmp_path / f".out.{atomic._HOST}-{os.getpid()}-{'b' * 16}{TEMP_SUFFIX}"
    squat2.write_bytes(b"someone's")
    write_atomic(tmp_path / "out", b"data")
    assert (tmp_path / "out").read_bytes() == b"data"
    assert victim.read_bytes() == b"precious" and squat.is_symlink()
    assert squat2.read_bytes() == b"someone's"
    # three taken names in a row: an error naming the target, nothing written
    tokens = iter(["a" * 16, "b" * 16, "a" * 16])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda n: next(tokens))
    with pytest.raises(OSError, match=r"cannot write .*out: .*\(any previous version of the file "
                                      r"is intact\)"):
        write_atomic(tmp_path / "out", b"new")
    assert (tmp_path / "out").read_bytes() == b"data" and victim.read_bytes() == b"precious"


def test_mode_must_be_a_write_mode(tmp_path):
    with pytest.raises(ValueError, match="atomic_open: mode must be 'wb' or 'w', got 'ab'"):
        with atomic_open(tmp_path / "x", "ab"):
            pass


WRITER = """
import sys, time
from framework.io.atomic import atomic_open
with atomic_open(sys.argv[1]) as fh:
    fh.write(b"half a file")
    fh.flush()
    print("writing", flush=True)
    time.sleep(120)
"""


def test_a_killed_write_leaves_a_partial_file_that_the_cleaner_removes(tmp_path):
    target = tmp_path / "net.safetensors"
    target.write_bytes(b"previous")
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline() == "writing\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    (left,) = temp_files(tmp_path)
    assert left.startswith(".net.safetensors.") and (tmp_path / left).read_bytes() == b"half a file"
    assert target.read_bytes() == b"previous"
    assert clean_partial_writes(tmp_path) == [str(tmp_path / left)]
    assert temp_files(tmp_path) == [] and target.read_bytes() == b"previous"


def test_the_cleaner_removes_only_what_dead_writers_left(tmp_path):
    sub = tmp_path / "checkpoints"
    sub.mkdir()
    src = tmp_path / "input.png"
    src.write_bytes(b"the input")
    pid = dead_pid()
    gone = leftover(tmp_path, pid=pid)
    deeper = leftover(sub, "iter_00000002.safetensors", pid=pid)
    kept = {
        "alive": leftover(tmp_path, "a", pid=os.getpid()),  # a write in progress (this process)
        "other host": leftover(tmp_path, "b", pid=pid, host="0123abcd"),
        "old style": tmp_path / "out.png.tmp",
        "input": leftover(tmp_path, "c", pid=pid),
        "symlink": tmp_path / partial_name("d", pid),
        "hard link": tmp_path / partial_name("e", pid),
    }
    kept["old style"].write_bytes(b"x")
    kept["symlink"].symlink_to(src)
    os.link(src, kept["hard link"])
    before = {name: (p.is_symlink(), p.read_bytes()) for name, p in kept.items()}
    removed = clean_partial_writes(tmp_path, keep=[kept["input"], tmp_path / "missing.png"])
    assert removed == [str(gone)] and not gone.exists() and deeper.exists()  # not recursive
    assert {name: (p.is_symlink(), p.read_bytes()) for name, p in kept.items()} == before
    assert src.read_bytes() == b"the input"
    assert clean_partial_writes(tmp_path, recursive=True, keep=[kept["input"]]) == [str(deeper)]
    assert clean_partial_writes(tmp_path / "no such folder") == []
