"""_transpose.contiguous: a permuted array copied into C order through 16 x 16 register transposes
(_simd.vtranspose16) is np.ascontiguousarray's copy bit for bit, and the ops that use it (Reshape,
conv2d's and the AMX layout's copies) give numpy's values."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.functional import _transpose

PERMUTED = [  # (shape of the memory, permutation read): tokens <-> planes, channels last, edges of 16
    ((1, 4096, 48), (0, 2, 1)),
    ((2, 64, 64, 48), (0, 3, 1, 2)),
    ((3, 37, 150), (0, 2, 1)),
    ((300, 70), (1, 0)),
    ((2, 3, 40, 50, 17), (0, 1, 4, 2, 3)),
    ((2, 48, 17, 33), (0, 2, 3, 1)),
]


@pytest.fixture
def tiles(monkeypatch):
    """How many times the tiled copy ran."""
    calls = []
    real = _transpose._swap_copy
    monkeypatch.setattr(_transpose, "_swap_copy", lambda *a: calls.append(a[2:]) or real(*a))
    return calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,perm", PERMUTED)
def test_contiguous_is_numpys_copy_bit_for_bit(shape, perm, dtype, tiles):
    rng = np.random.default_rng(len(shape))
    base = rng.standard_normal(shape).astype(dtype)
    flat = base.reshape(-1)
    flat[::97] = np.nan  # payloads and signs are moved, not computed
    flat[1::89] = -0.0
    x = base.transpose(perm)
    got = _transpose.contiguous(x)
    want = np.ascontiguousarray(x)
    assert got.flags.c_contiguous and got.shape == want.shape
    uint = np.uint32 if dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(got.view(uint), want.view(uint))
    assert len(tiles) == 1  # the tiled route, not numpy's


def test_contiguous_leaves_other_layouts_to_numpy(tiles):
    """A contiguous array is returned as it is; a small one, a strided slice, a permutation that is no
    swap of two runs of axes, one with a run of fewer than 16 elements and an integer array take
    numpy's copy."""
    a = np.arange(2 * 20 * 30 * 40, dtype=np.float32).reshape(2, 20, 30, 40)
    assert _transpose.contiguous(a) is a
    for x in (a[:, :, :, :4].transpose(0, 3, 1, 2), a[:, ::2].transpose(0, 2, 3, 1), a.transpose(0, 2, 1, 3),
              a.reshape(2, 20, 30, 4, 10).transpose(0, 4, 1, 2, 3),
              a.astype(np.int32).transpose(0, 3, 1, 2), a[:1, :2].transpose(0, 3, 1, 2)):
        np.testing.assert_array_equal(_transpose.contiguous(x), np.ascontiguousarray(x))
    assert tiles == []
    assert _transpose.swap(a.transpose(0, 2, 1, 3)) is None
    assert _transpose.swap(a.transpose(0, 3, 1, 2))[1:] == (2, 600, 40)  # (B, Q, P): 20 x 30 rows of 40


def test_reshape_of_a_permuted_array_is_numpys_copy(tiles):
    rng = np.random.default_rng(2)
    x = sg.tensor(rng.standard_normal((1, 48, 64, 64)).astype(np.float32))
    tokens = x.permute(0, 2, 3, 1)
    assert tokens.reshape(1, 4096, 48).numpy().base is not None and tiles == []  # (h, w) merge: a view
    flat = tokens.reshape(1, -1)
    np.testing.assert_array_equal(flat.numpy(), x.numpy().transpose(0, 2, 3, 1).reshape(1, -1))
    assert len(tiles) == 1
    assert x.reshape(48, 4096).numpy().base is not None  # a view stays a view
