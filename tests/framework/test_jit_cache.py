"""The numba cache policy of framework/_jit.py: a cached kernel is reused by a later process, and an
edit to ANY kernel file (not only the kernel's own) makes the next process recompile. numba's own
stamp hashes only the kernel's file, so a kernel that inlines a helper from another file kept the
helper's old machine code after the helper changed."""
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

from framework import _jit

ROOT = pathlib.Path(_jit.__file__).resolve().parent.parent

HELPER = textwrap.dedent("""
    from ._jit import kernel

    @kernel
    def helper(x):
        return x + {add}
""")
USER = textwrap.dedent("""
    from ._jit import kernel
    from .helpers import helper

    @kernel
    def twice_plus(x):
        return helper(x) * 2
""")
RUN = textwrap.dedent("""
    from framework.users import twice_plus
    print(twice_plus(1.0), twice_plus.stats.cache_hits.__len__() > 0)
""")


def _package(tmp_path, add):
    pkg = tmp_path / "framework"
    pkg.mkdir(exist_ok=True)
    shutil.copy(ROOT / "framework" / "_jit.py", pkg / "_jit.py")
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text(HELPER.format(add=add))
    (pkg / "users.py").write_text(USER)
    (pkg / "notes.py").write_text(f"NOTE = {add}\n")  # imports no kernel: not in the stamp


def _run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}  # the in-tree __pycache__
    env["PYTHONPATH"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", RUN], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    value, hit = out.stdout.split()
    return float(value), hit == "True"


def test_a_later_process_reuses_the_cache_and_an_edit_in_another_file_recompiles(tmp_path):
    _package(tmp_path, add=1)
    assert _run(tmp_path) == (4.0, False)   # compiled and written
    assert _run(tmp_path) == (4.0, True)    # read back
    (tmp_path / "framework" / "helpers.py").write_text(HELPER.format(add=10))
    # with numba's stamp (users.py unchanged) this was (4.0, True): the old helper's machine code
    assert _run(tmp_path) == (22.0, False)
    assert _run(tmp_path) == (22.0, True)


def test_the_stamp_covers_kernel_files_only(tmp_path):
    _package(tmp_path, add=1)
    before = _jit.stamp_of(tmp_path)
    (tmp_path / "framework" / "notes.py").write_text("NOTE = 2\n")
    assert _jit.stamp_of(tmp_path) == before
    (tmp_path / "framework" / "users.py").write_text(USER + "\n# a comment is an edit too\n")
    assert _jit.stamp_of(tmp_path) != before


def test_every_kernel_uses_the_stamped_cache():
    from framework.functional import _im2col
    locator = _im2col.im2col._cache._impl.locator
    assert locator.get_source_stamp() == _jit.source_stamp()


def test_the_stamp_covers_the_simd_intrinsics(tmp_path):
    """_simd.py defines no kernel, but its intrinsics are compiled into every kernel that calls them:
    an edit there must recompile them too."""
    _package(tmp_path, add=1)
    (tmp_path / "framework" / "_simd.py").write_text("# intrinsics\n")
    before = _jit.stamp_of(tmp_path)
    (tmp_path / "framework" / "_simd.py").write_text("# intrinsics, edited\n")
    assert _jit.stamp_of(tmp_path) != before
