"""Kernel files (framework/data/degradations/kernel_file.py): the saved form (odd, centred, sum 1),
KernelGAN's x4 composition and its post-processing, the refusals, and a kernel file as an entry of
RealESRGANDataset's kernel_list."""
import os

import numpy as np
import pytest

import framework.functional as F
from framework.data import degradations as D

ANISO = D.bivariate_Gaussian(13, 2.0, 1.0, 0.5, isotropic=False)


def _com(k):
    return [float((k.sum(axis=1 - a) * np.arange(k.shape[a])).sum() / k.sum()) for a in (0, 1)]


def test_save_and_load_centre_and_normalise(tmp_path):
    off = np.zeros((15, 15))
    off[1:14, 0:13] = 3 * ANISO  # off-centre by one column, sum 3
    path = tmp_path / "k.npy"
    written = D.save_kernel(path, off)
    assert written.shape[0] % 2 == 1 and written.shape[0] == written.shape[1]
    np.testing.assert_allclose(_com(written), [written.shape[0] // 2] * 2, atol=1e-12)
    assert abs(written.sum() - 1) < 1e-14
    c = written.shape[0] // 2  # a whole-pixel move is exact: the Gaussian itself, centred
    np.testing.assert_allclose(written[c - 6:c + 7, c - 6:c + 7], ANISO, atol=1e-15)
    np.testing.assert_allclose(D.load_kernel(path), written, rtol=1e-15, atol=0)


def test_analytic_kernel_is_two_x2_steps(rng):
    """Downscaling twice by 2 with k equals once by 4 with analytic_kernel(k), away from the
    borders, up to KernelGAN's crop of the composed kernel's negligible rim."""
    k = D.bivariate_Gaussian(13, 1.2, 0.8, 0.3, isotropic=False)
    k4 = D.analytic_kernel(k)
    assert k4.shape == (25, 25) and abs(k4.sum() - 1) < 1e-14
    x = rng.random((1, 48, 48))
    twice = F.imresize(F.imresize(x, 0.5, kernel=k), 0.5, kernel=k).data
    once = F.imresize(x, 0.25, kernel=k4).data
    inner = (slice(None), slice(4, -4), slice(4, -4))
    err = np.abs(twice[inner] - once[inner]).max()
    assert err < 0.02, err  # the two cubic half-pixel moves of the x2 route blur a little
    assert err > 0  # (not the same computation)


def test_analytic_kernel_hand_values():
    k = np.zeros((3, 3))
    k[1, 1] = 1.0  # a delta composes to a delta
    k4 = D.analytic_kernel(k)
    assert k4.shape == (5, 5) and k4[2, 2] == 1.0 and k4.sum() == 1.0


def test_zeroize_negligible_keeps_the_largest_values():
    k = np.arange(1.0, 10.0).reshape(3, 3)
    out = D.zeroize_negligible(k, n=2)  # floor = 0.75 * the 3rd largest (7) = 5.25
    want = np.clip(k - 5.25, 0, None)
    np.testing.assert_allclose(out, want / want.sum(), rtol=1e-15)


@pytest.mark.parametrize("content,match", [
    (np.ones(5), "2-D"), (np.full((3, 3), np.inf), "finite"), (np.zeros((3, 3)), "positive sum"),
    (np.ones((300, 300)), "is it an image"), (None, "not a .npy")])
def test_load_refusals(tmp_path, content, match):
    path = tmp_path / "bad.npy"
    if content is None:
        path.write_bytes(b"not numpy")
    else:
        np.save(path, content)
    with pytest.raises(ValueError, match=match) as info:
        D.load_kernel(path)
    assert str(path) in str(info.value)
    with pytest.raises(ValueError, match="cannot read"):
        D.load_kernel(tmp_path / "missing.npy")


def test_kernel_file_in_a_kernel_list(tmp_path, rng):
    path = str(tmp_path / "camera.npy")
    D.save_kernel(path, ANISO)
    assert D.check_kernel_list("o", "kernel_list", ["iso", path]) == ("iso", path)
    trace = {}
    got = D.random_mixed_kernels([path], [1.0], 21, rng=rng, trace=trace)
    np.testing.assert_allclose(got, ANISO, atol=1e-15)
    assert trace["kernel"] == path and trace["sigma_x"] is None
    with pytest.raises(ValueError, match="kernel_list: kernel file .*missing.npy"):
        D.check_kernel_list("o", "kernel_list", [str(tmp_path / "missing.npy")])


# -- hostile .npy files: refused from the header, before any data is read (issue 37 point 8) -----
def _npy_header(shape, descr="<f8") -> bytes:
    """A version 1.0 .npy header for `shape` and dtype `descr`, padded as numpy pads it."""
    import io
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False,
                                               "shape": shape})
    return buf.getvalue()


def _refused(path, match):
    with pytest.raises(ValueError, match=match) as info:
        D.load_kernel(path, "--kernel file")
    msg = str(info.value)
    assert msg.startswith(f"--kernel file {path}: ") and "\n" not in msg, msg


def test_a_huge_header_is_refused_before_reading(tmp_path):
    small = tmp_path / "claims.npy"  # 200 bytes claiming 50000x50000 float64 (20 GB)
    small.write_bytes(_npy_header((50000, 50000)).ljust(200, b"\0"))
    _refused(small, r"a 50000x50000 kernel is larger than 255x255")
    sparse = tmp_path / "sparse.npy"  # the whole 20 GB, as a sparse file
    with open(sparse, "wb") as fh:
        fh.write(_npy_header((50000, 50000)))
        fh.truncate(len(_npy_header((50000, 50000))) + 50000 * 50000 * 8)
    _refused(sparse, r"a 50000x50000 kernel is larger than 255x255")


def _garbled(text: bytes) -> bytes:
    """A version 1.0 .npy header (magic, length) around `text`, padded to 64 bytes."""
    body = text.ljust(64 - 10 - 1) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body


@pytest.mark.parametrize("content,match", [
    (b"", r"empty file: not a \.npy array file"),
    (_garbled(b"{'descr': '<f8, 'fortran_order': False, 'shape': (3, 3)}"),
     r"unreadable \.npy header"),  # an unterminated string: a TokenError inside numpy
    (_garbled(b"{'descr': '<f8', 'fortran_order': False, 'shape': (3, -3)}"),
     r"must be a 2-D array \(kh, kw\), the file holds shape \(3, -3\)"),
    (_garbled(b"\xff\xfe)]" * 8), r"unreadable \.npy header"),
    (b"\x93NUMPY\x01\x00\x40\x00{'descr': '<f8'", r"unreadable \.npy header"),  # cut short
    (b"PK\x03\x04 a zip", r"not a \.npy array file"),
])
def test_an_empty_or_garbled_file_is_one_line(tmp_path, content, match):
    path = tmp_path / "bad.npy"
    path.write_bytes(content)
    _refused(path, match)


def test_complex_and_non_float_kernels_are_refused(tmp_path):
    path = tmp_path / "k.npy"
    np.save(path, np.full((3, 3), 1 + 1j))
    _refused(path, r"complex128 values.*real floating-point")
    np.save(path, np.ones((3, 3), np.int64))
    _refused(path, r"int64 values.*real floating-point")
    np.save(path, np.ones((3, 3), np.float32) / 9)  # float32 is fine
    np.testing.assert_allclose(D.load_kernel(path), np.full((3, 3), 1 / 9), rtol=1e-7)


def test_the_file_size_must_match_the_header(tmp_path):
    path = tmp_path / "k.npy"
    np.save(path, np.ones((5, 5)))
    whole = path.read_bytes()
    path.write_bytes(whole[:-8])  # a truncated copy
    _refused(path, rf"{len(whole) - 8} bytes, its header says {len(whole)} \(truncated")
    path.write_bytes(whole + b"junk")
    _refused(path, rf"{len(whole) + 4} bytes, its header says {len(whole)}")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    import threading
    fifo = tmp_path / "k.npy"
    os.mkfifo(fifo)
    out = {}

    def load():
        try:
            D.load_kernel(fifo, "--kernel file")
        except ValueError as exc:
            out["error"] = str(exc)
    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # blocked in open(): release it, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("load_kernel blocked on a FIFO")
    assert out["error"] == f"--kernel file {fifo}: not a regular file"
