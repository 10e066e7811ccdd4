"""An image's own blur kernel as a file (KernelGAN's estimate, a measured PSF): the .npy that
srgrad-zssr writes and that F.imresize (a numeric `kernel=`), ZSSR (`--kernel K.npy`) and
RealESRGANDataset (an entry of `kernel_list`) read. The file holds one (k, k) float64 array, k odd,
summing to 1, centred (its centre of mass on the centre tap): a blur kernel like BasicSR's. The
alignment of a downscale with it is imresize's business (framework.functional.imresize.kernel_shift).

KernelGAN's post-processing (zeroize_negligible: util.zeroize_negligible_val) and its x4 kernel
(analytic_kernel: util.analytic_kernel) live here too."""
from __future__ import annotations

import io
import os
import stat
from functools import lru_cache

import numpy as np

from ...functional.imresize import check_kernel, kernel_shift
from ...io.atomic import atomic_open

__all__ = ["load_kernel", "save_kernel", "centre_kernel", "analytic_kernel", "zeroize_negligible",
           "is_kernel_file"]

MAX_KERNEL = 255  # a larger "kernel" is surely not one (and would make the correlation crawl)


def is_kernel_file(name) -> bool:
    """Whether a kernel_list entry names a kernel file (ends in .npy) rather than a kernel type."""
    return isinstance(name, (str, os.PathLike)) and os.fspath(name).lower().endswith(".npy")


def centre_kernel(kernel) -> np.ndarray:
    """`kernel` normalised to sum 1, zero-padded to an odd square and moved so that its centre of
    mass is its centre tap (kernel_shift with s = 1: a whole-pixel move is exact)."""
    k = check_kernel(kernel, "centre_kernel")
    k = kernel_shift(k / k.sum(), 1)
    # kernel_shift leaves room for any move: drop the border rings that stayed zero (to 1e-12 of
    # the peak), the same number from every side, so the kernel stays odd and centred
    live = np.abs(k) > 1e-12 * np.abs(k).max()
    rows, cols = np.flatnonzero(live.any(axis=1)), np.flatnonzero(live.any(axis=0))
    ring = min(rows[0], cols[0], k.shape[0] - 1 - rows[-1], k.shape[1] - 1 - cols[-1])
    k = k[ring:k.shape[0] - ring, ring:k.shape[1] - ring]
    return k / k.sum()


def zeroize_negligible(kernel, n: int = 40) -> np.ndarray:
    """KernelGAN's zeroize_negligible_val: values below 0.75 x the (n + 1)-th largest are set to
    0, the rest lowered by it, and the kernel renormalised to sum 1 (n=40 is KernelGAN's
    n_filtering)."""
    k = np.asarray(kernel, np.float64)
    floor = 0.75 * np.sort(k.ravel())[-min(n, k.size - 1) - 1]
    out = np.clip(k - floor, 0.0, None)
    if not out.sum() > 0:
        raise ValueError("zeroize_negligible: nothing of the kernel is left")
    return out / out.sum()


def analytic_kernel(k2) -> np.ndarray:
    """KernelGAN's x4 kernel from its x2 kernel (the paper's appendix): downscaling twice by 2 with
    k2 is one downscale by 4 with k2 correlated with k2 dilated by 2, (3k - 2) square; KernelGAN
    crops k // 2 from each side (negligible values) and normalises to sum 1."""
    k = check_kernel(k2, "analytic_kernel")
    if k.shape[0] != k.shape[1]:
        raise ValueError(f"analytic_kernel: the x2 kernel must be square, got {k.shape}")
    size = k.shape[0]
    big = np.zeros((3 * size - 2, 3 * size - 2))
    for r in range(size):
        for c in range(size):
            big[2 * r:2 * r + size, 2 * c:2 * c + size] += k[r, c] * k
    crop = size // 2
    big = big[crop:big.shape[0] - crop, crop:big.shape[1] - crop]
    return big / big.sum()


def save_kernel(path, kernel) -> np.ndarray:
    """Write `kernel`, centred and normalised (centre_kernel), to `path` (.npy) atomically;
    returns what was written."""
    k = centre_kernel(kernel)
    buf = io.BytesIO()
    np.save(buf, k, allow_pickle=False)
    with atomic_open(path) as fh:
        fh.write(buf.getvalue())
    return k


def load_kernel(path, what: str = "kernel file") -> np.ndarray:
    """The kernel in .npy file `path` (no pickles), checked and normalised to sum 1; a one-line
    ValueError naming `what` and the file otherwise. Cached by (path, modification time, size).
    The file is read header first (`_read_npy`): nothing the header does not allow is read."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ValueError(f"{what} {path}: cannot read it ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block open(), a device never ends
        raise ValueError(f"{what} {path}: not a regular file")
    return _load(os.path.abspath(path), st.st_mtime_ns, st.st_size, what).copy()


def _read_npy(path: str, what: str) -> np.ndarray:
    """The array of a regular .npy file, checked in this order before its data is read: the magic
    and header (versions 1.0 and 2.0, numpy's own parser, at most 10,000 bytes), a real
    floating-point dtype, a 2-D shape of at most MAX_KERNEL x MAX_KERNEL, and a file size equal to
    the header plus that data (a truncated copy or trailing bytes are refused)."""
    fmt = np.lib.format
    try:  # O_NONBLOCK: a FIFO swapped in after load_kernel's stat must not block either
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise ValueError(f"{what} {path}: cannot read it ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fd).st_size
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{what} {path}: not a regular file")
        if size == 0:
            raise ValueError(f"{what} {path}: empty file: not a .npy array file")
        if fh.read(6) != fmt.MAGIC_PREFIX:
            raise ValueError(f"{what} {path}: not a .npy array file (no .npy magic)")
        fh.seek(0)
        try:
            version = fmt.read_magic(fh)
            reader = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
            if version not in reader:
                raise ValueError(f".npy format version {version[0]}.{version[1]}")
            shape, fortran, dtype = reader[version](fh)
        except Exception as exc:  # EOF, SyntaxError, tokenize's TokenError, ...: a hostile header
            reason = " ".join(str(exc).split())[:200]
            raise ValueError(f"{what} {path}: unreadable .npy header ({reason})") from None
        if dtype.kind != "f":
            raise ValueError(f"{what} {path}: holds {dtype} values; a kernel is real "
                             f"floating-point (save it as float64)")
        if len(shape) != 2 or min(shape) < 1:
            raise ValueError(f"{what} {path}: the kernel must be a 2-D array (kh, kw), the file "
                             f"holds shape {shape}")
        if max(shape) > MAX_KERNEL:
            raise ValueError(f"{what} {path}: a {shape[0]}x{shape[1]} kernel is larger than "
                             f"{MAX_KERNEL}x{MAX_KERNEL}: is it an image?")
        start = fh.tell()
        want = start + shape[0] * shape[1] * dtype.itemsize
        if size != want:
            raise ValueError(f"{what} {path}: the file has {size} bytes, its header says {want} "
                             f"({'truncated' if size < want else 'trailing data'}: not a whole "
                             f".npy file)")
        data = fh.read(want - start)
    return np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")


@lru_cache(maxsize=32)
def _load(path, mtime, size, what):
    arr = _read_npy(path, what)
    try:
        k = check_kernel(arr, "", "the kernel")
    except ValueError as exc:
        raise ValueError(f"{what} {path}: {str(exc).lstrip(': ')}") from None
    return k / k.sum()
