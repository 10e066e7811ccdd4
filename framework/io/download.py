"""Downloads of release files (engine/hub.py's published models) with the standard library only:
resumable, checked against a sha256 before use, installed atomically.

`download(url, dest, sha256)` writes to `<dest>.partial` beside `dest` (opened without following a
symlink, and locked: a second srgrad process downloading the same file is told so, not let in to
interleave its bytes). A later call resumes the partial file with an HTTP Range request; a server
that ignores the range sends the whole file and the partial restarts from zero. When the transfer
is complete the file's sha256 must equal `sha256`, else the partial is deleted and the error says
both hashes; only a checked file is moved over `dest` (atomic.install), so `dest` is absent or
complete and checked. A network failure keeps the partial (run again to resume) and the error says
how to put the file in place by hand.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import urllib.error
import urllib.request
from http.client import HTTPException
from pathlib import Path

from .atomic import install

__all__ = ["DownloadError", "download", "sha256_of", "check_sha256"]

CHUNK = 1 << 20
_HEX64 = re.compile(r"[0-9a-f]{64}")
_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


class DownloadError(OSError):
    """A download that failed or was refused; the message says what to do."""


def check_sha256(value, what: str = "sha256") -> str:
    """`value` as 64 lowercase hex digits, else a ValueError naming `what`."""
    text = str(value).strip().lower()
    if not _HEX64.fullmatch(text):
        raise ValueError(f"{what} must be 64 hex digits (a sha256), got {str(value)[:80]!r}")
    return text


def sha256_of(path) -> str:
    """The sha256 of a file, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _by_hand(url: str, dest: Path) -> str:
    return f"download {url} by hand and save it as {dest}, then run again"


@contextlib.contextmanager
def _locked_partial(partial: Path):
    """The partial file opened for reading and writing (created if absent, never through a
    symlink), locked for this process (POSIX)."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(partial, flags, 0o666)
    except OSError as exc:
        raise DownloadError(f"cannot open {partial}: {exc.strerror or exc}") from None
    fh = os.fdopen(fd, "r+b")
    try:
        try:
            import fcntl
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # not POSIX: no lock
            pass
        except OSError:
            raise DownloadError(f"another process is downloading into {partial}: wait for it to "
                                f"finish (or stop it), then run again") from None
        yield fh
    finally:
        fh.close()


def _open(url: str, start: int, timeout: float):
    """The HTTP response for `url` from byte `start`, or None when the server says the range is
    past the end (HTTP 416: the partial may be whole)."""
    headers = {"User-Agent": "srgrad", "Accept-Encoding": "identity"}
    if start:
        headers["Range"] = f"bytes={start}-"
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                      timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and start:
            return None
        raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}") from None


def _receive(response, fh, have: int, url: str, partial: Path, progress: bool, desc: str) -> None:
    """Append the response's body to fh (from `have` bytes: restart at 0 if the server sent the
    whole file), with a progress bar; a cut transfer keeps what arrived."""
    from tqdm.auto import tqdm
    if have and response.status == 206:
        match = _RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
        if match is None or int(match[1]) != have:  # not the range asked for: start over
            have = 0
    else:
        have = 0
    fh.seek(have)
    fh.truncate()
    length = response.headers.get("Content-Length")
    total = have + int(length) if length and length.isdigit() else None
    got = have
    with tqdm(total=total, initial=have, unit="B", unit_scale=True, unit_divisor=1024, desc=desc,
              disable=not progress, leave=False) as bar:
        try:
            for block in iter(lambda: response.read(CHUNK), b""):
                fh.write(block)
                got += len(block)
                bar.update(len(block))
        except (OSError, HTTPException) as exc:  # a reset, a timeout, a short read
            fh.flush()
            raise DownloadError(f"{url}: the transfer was cut after {got} of "
                                f"{total or 'unknown'} bytes ({exc.__class__.__name__}: {exc}); "
                                f"{partial} keeps them: run again to resume") from None
    fh.flush()
    if total is not None and got != total:
        raise DownloadError(f"{url}: the transfer ended after {got} of {total} bytes; {partial} "
                            f"keeps them: run again to resume")


def download(url: str, dest, sha256: str, *, progress: bool = True, timeout: float = 30.0,
             say=None) -> Path:
    """Download `url` to `dest` (a path; its folder is made), resuming `<dest>.partial`, and
    install it only when its sha256 equals `sha256` (64 hex digits). Returns dest. Raises
    DownloadError (an OSError) when the server or the network fails (the partial is kept), when the
    hash differs (the partial is deleted) or when another process holds the partial. `say`
    (default: nothing) is told when a partial download is resumed."""
    expected = check_sha256(sha256)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    with _locked_partial(partial) as fh:
        have = os.fstat(fh.fileno()).st_size
        if have and say is not None:
            say(f"resuming {partial} from {have} bytes")
        try:
            response = _open(url, have, timeout)
        except DownloadError as exc:
            raise DownloadError(f"{exc}; {_by_hand(url, dest)}") from None
        except (urllib.error.URLError, OSError, HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise DownloadError(f"cannot reach {url} ({reason}): offline? {_by_hand(url, dest)}") \
                from None
        kind = ""
        if response is not None:
            with response:
                kind = response.headers.get("Content-Type", "")
                _receive(response, fh, have, url, partial, progress, dest.name)
        fh.flush()
        os.fsync(fh.fileno())
        got = sha256_of(partial)
        if got != expected:
            os.remove(partial)
            page = " (the server sent a web page, not the file)" if kind.startswith("text/html") \
                else ""
            raise DownloadError(f"{url}: the downloaded file's sha256 is {got}, expected "
                                f"{expected}{page}; the partial download was deleted: run again, "
                                f"or {_by_hand(url, dest)} and check its sha256")
        install(partial, dest)
    return dest

