"""Atomic file writes: readers see the old file or the new one, never a part. Every file srgrad
writes goes through here (checkpoints, weights, images, CSVs, configs, ONNX models)."""
from __future__ import annotations

import contextlib
import os

__all__ = ["atomic_open", "write_atomic"]


@contextlib.contextmanager
def atomic_open(path, mode: str = "wb"):
    """`with atomic_open(path) as fh:` writes `path.tmp` (same folder), then flushes, fsyncs and
    os.replaces it over `path` (and fsyncs the folder, best effort). On any error, or a
    KeyboardInterrupt, the temporary file is removed and `path` is untouched; an OSError names the
    file."""
    path = os.fspath(path)
    tmp = f"{path}.tmp"
    try:
        with open(tmp, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.remove(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OSError(exc.errno, f"cannot write {path}: {exc.strerror or exc} (any previous "
                                     f"version of the file is intact)") from exc
        raise
    _fsync_folder(path)


def write_atomic(path, data: bytes) -> None:
    """Write `data` to `path` atomically (atomic_open)."""
    with atomic_open(path) as fh:
        fh.write(data)


def _fsync_folder(path) -> None:
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
