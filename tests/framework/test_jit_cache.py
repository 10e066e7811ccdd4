"""The numba cache policy of framework/_jit.py: a cached kernel is reused by a later process, and an
edit to ANY kernel file of framework/ (not only the kernel's own) makes the next process recompile.
numba's own stamp hashes only the kernel's file, so a kernel that inlines a helper from another file
kept the helper's old machine code after the helper changed. A user's kernel file outside
framework/ is stamped by framework's kernels and itself: its edits recompile it, not the library."""
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


# a user's own kernel module beside the package (a custom layer file named in a config's imports:)
USER_LAYER = textwrap.dedent("""
    from framework._jit import kernel
    from framework.helpers import helper

    @kernel
    def layer(x):
        return helper(x) * {times}
""")
RUN_USER = textwrap.dedent("""
    from my_layer import layer
    from framework.users import twice_plus
    print(layer(1.0), layer.stats.cache_hits.__len__() > 0, twice_plus(1.0),
          twice_plus.stats.cache_hits.__len__() > 0)
""")


def _package(tmp_path, add):
    pkg = tmp_path / "framework"
    pkg.mkdir(exist_ok=True)
    shutil.copy(ROOT / "framework" / "_jit.py", pkg / "_jit.py")
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text(HELPER.format(add=add))
    (pkg / "users.py").write_text(USER)
    (pkg / "notes.py").write_text(f"NOTE = {add}\n")  # imports no kernel: not in the stamp


def _run(tmp_path, script=RUN):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}  # the in-tree __pycache__
    env["PYTHONPATH"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()
    return tuple(w == "True" if w in ("True", "False") else float(w) for w in words)


def test_a_later_process_reuses_the_cache_and_an_edit_in_another_file_recompiles(tmp_path):
    _package(tmp_path, add=1)
    assert _run(tmp_path) == (4.0, False)   # compiled and written
    assert _run(tmp_path) == (4.0, True)    # read back
    (tmp_path / "framework" / "helpers.py").write_text(HELPER.format(add=10))
    # with numba's stamp (users.py unchanged) this was (4.0, True): the old helper's machine code
    assert _run(tmp_path) == (22.0, False)
    assert _run(tmp_path) == (22.0, True)


def test_a_users_kernel_file_is_stamped_by_itself_and_the_framework(tmp_path):
    _package(tmp_path, add=1)
    (tmp_path / "my_layer.py").write_text(USER_LAYER.format(times=3))
    assert _run(tmp_path, RUN_USER) == (6.0, False, 4.0, False)
    assert _run(tmp_path, RUN_USER) == (6.0, True, 4.0, True)
    # the user's edit: their kernel recompiles (with framework's stamp alone it was (6.0, True):
    # the old machine code), the library's stays cached
    (tmp_path / "my_layer.py").write_text(USER_LAYER.format(times=5))
    assert _run(tmp_path, RUN_USER) == (10.0, False, 4.0, True)
    assert _run(tmp_path, RUN_USER) == (10.0, True, 4.0, True)
    # a framework edit reaches the user's kernel, which inlines the helper
    (tmp_path / "framework" / "helpers.py").write_text(HELPER.format(add=10))
    assert _run(tmp_path, RUN_USER) == (55.0, False, 22.0, False)


def test_the_stamp_covers_kernel_files_only(tmp_path):
    _package(tmp_path, add=1)
    before = _jit.stamp_of(tmp_path)
    (tmp_path / "framework" / "notes.py").write_text("NOTE = 2\n")
    assert _jit.stamp_of(tmp_path) == before
    (tmp_path / "models").mkdir()  # kernels outside framework/ are stamped by their own file
    (tmp_path / "models" / "layer.py").write_text(USER_LAYER.format(times=3))
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


def test_no_kernel_lives_outside_framework():
    """models/ is a client of the framework: a model's own op goes into functional/ as a family."""
    root = ROOT / "models"
    assert not [p.name for p in root.rglob("*.py") if b"_jit" in p.read_bytes() or b"numba" in p.read_bytes()]


# The direct convolution's parallel drivers (functional/_direct.py) come in variants (registers of
# 16 or 32 output channels in the weight gradient) with the same argument types: a cached variant
# must never stand in for another in a later process, and a later process must load, not compile.
DRIVERS = textwrap.dedent("""
    import numpy as np
    import framework as sg
    import framework.functional as F
    from framework.functional import _direct
    rng = np.random.default_rng(0)
    out = []
    for o in (16, 40):  # weight-gradient registers of 16 and of 32 channels
        x = rng.standard_normal((2, 8, 6, 7)).astype(np.float32)
        w = rng.standard_normal((o, 8, 3, 3)).astype(np.float32)
        g = rng.standard_normal((2, o, 6, 7)).astype(np.float32)
        X, W = sg.tensor(x, requires_grad=True), sg.tensor(w, requires_grad=True)
        F.conv2d(X, W, padding=1).backward(g)
        ref = np.einsum("bohw,bchw->oc", g.astype(np.float64), x.astype(np.float64))  # centre tap
        out.append(float(np.abs(W.grad.numpy()[:, :, 1, 1] - ref).max() / np.abs(ref).max()))
    hits = sum(len(d.stats.cache_hits) for d in (_direct._weight_grad_tasks_kernel(32, 8),
                                                 _direct._weight_grad_tasks_kernel(16, 8)))
    print(*out, hits)
""")


def test_the_direct_drivers_variants_stay_apart_in_the_cache(tmp_path):
    from framework import _simd
    if not _simd.has_avx512():
        return  # the two register widths are AVX-512's (AVX2 has one: 16 channels)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", DRIVERS], env=env, cwd=ROOT, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        runs.append([float(v) for v in out.stdout.split()])
    (first16, first40, first_hits), (second16, second40, second_hits) = runs
    assert max(first16, first40, second16, second40) < 1e-5  # right in both processes
    assert first_hits == 0 and second_hits == 2  # the second process loaded both variants
