"""Atomic file writes: readers see the old file or the new one, never a part. Every file srgrad
writes goes through here (checkpoints, weights, images, CSVs, configs, ONNX models).

The temporary file beside the target is never a name an input or another user could have put
there: `.<name>.<host>-<pid>-<16 random hex>.srgrad.tmp`, created exclusively (O_CREAT | O_EXCL,
which refuses an existing file and never follows a symlink there; O_NOFOLLOW as well) with the
permissions a plain open gives (0o666 less the umask). A kill leaves it behind; the commands call
`clean_partial_writes` on the folders they write to when they start, which removes such leftovers
of processes that are gone, and nothing else.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import socket
import stat

__all__ = ["atomic_open", "write_atomic", "install", "clean_partial_writes", "is_temp_name",
           "TEMP_SUFFIX"]

TEMP_SUFFIX = ".srgrad.tmp"
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_TEMP = re.compile(r"\.(?P<name>.*)\.(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)-[0-9a-f]{16}"
                   + re.escape(TEMP_SUFFIX), re.S)
_NAME_KEPT = 100  # characters of the target's name kept in the temporary name (NAME_MAX is 255)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def is_temp_name(name: str) -> bool:
    """Whether `name` is one of this writer's temporary names (a write under way or killed)."""
    return _TEMP.fullmatch(name) is not None


def _temp_path(path: str) -> str:
    folder, name = os.path.split(path)
    token = secrets.token_hex(8)
    return os.path.join(folder, f".{name[:_NAME_KEPT]}.{_HOST}-{os.getpid()}-{token}{TEMP_SUFFIX}")


def _create_exclusive(path, flags):
    return os.open(path, flags | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)


@contextlib.contextmanager
def atomic_open(path, mode: str = "wb"):
    """`with atomic_open(path) as fh:` writes a new temporary file beside `path` (see the module
    docstring), then flushes, fsyncs and os.replaces it over `path` (and fsyncs the folder, best
    effort). On any error, or a KeyboardInterrupt, the temporary file is removed and `path` is
    untouched; an OSError names the file. `mode` is "wb" or "w"."""
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_open: mode must be 'wb' or 'w', got {mode!r}")
    path = os.fspath(path)
    tmp = None
    try:
        for attempt in range(3):  # another file at a fresh random name: astronomically rare
            tmp = _temp_path(path)
            try:
                fh = open(tmp, mode, opener=_create_exclusive)
                break
            except FileExistsError:
                tmp = None
                if attempt == 2:
                    raise
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
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


def install(src, path) -> None:
    """Move a complete file written beside `path` (a download's `.partial`, io/download.py) over
    `path`: fsync it, os.replace, fsync the folder. Readers see the old file or the new one."""
    src, path = os.fspath(src), os.fspath(path)
    fd = os.open(src, os.O_RDONLY | _NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(src, path)
    _fsync_folder(path)


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


def _gone(pid: int) -> bool:
    """Whether no process `pid` exists here (a zombie, or another user's process, still exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def clean_partial_writes(folder, *, recursive: bool = False, keep=()) -> list:
    """Remove the temporary files that writers killed mid-write left in `folder` (and below it when
    `recursive`, without following symlinked folders). A file goes only when all of these hold:
    its name is one this module makes, made on this machine by a process that is gone; it is a
    regular file (not a symlink) with one link, owned by this user; it is not one of `keep` (the
    command's inputs). Best effort: a file that cannot be removed stays (a leftover is harmless).
    Returns the removed paths. Does nothing on Windows (no safe way to ask whether a PID lives)."""
    if os.name != "posix":
        return []
    kept = set()
    for k in keep:
        try:
            st = os.stat(k)
            kept.add((st.st_dev, st.st_ino))
        except OSError:
            pass
    removed = []
    walk = os.walk(folder) if recursive else [(os.fspath(folder), (), _names(folder))]
    for root, _, names in walk:
        for name in names:
            match = _TEMP.fullmatch(name)
            if match is None or match["host"] != _HOST or not _gone(int(match["pid"])):
                continue
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
                if (not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.getuid()
                        or (st.st_dev, st.st_ino) in kept):
                    continue
                os.remove(path)
            except OSError:
                continue
            removed.append(path)
    return removed


def _names(folder) -> list:
    try:
        return os.listdir(folder)
    except OSError:
        return []
