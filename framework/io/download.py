"""Downloads of release files (engine/hub/models.py's published models) with the standard library only:
resumable, checked against a sha256 before use, installed atomically.

`download(url, dest, sha256)` writes to `<dest>.partial` beside `dest` (opened without following a
symlink, and locked: a second srgrad process downloading the same file is told so, not let in to
interleave its bytes). A later call resumes the partial file with an HTTP Range request; a server
that ignores the range sends the whole file and the partial restarts from zero. When the transfer
is complete the file's sha256 must equal `sha256`, else the partial is deleted and the error says
both hashes; only a checked file is moved over `dest` (atomic.install), so `dest` is absent or
complete and checked. A network failure keeps the partial (run again to resume) and the error says
how to put the file in place by hand; a failure before any byte arrived leaves no empty partial.

What a server (or a planted file) cannot make it do:
- write through another name: the partial and `dest` must each be a regular file with one link (a
  symlink, a hard link to a user's file, a FIFO are refused before any byte is written);
- write without end: at most `max_bytes` (default $SRGRAD_DOWNLOAD_MAX_BYTES, else MAX_BYTES,
  4 GiB, past any published SR model): a Content-Length above it is refused before the body, a
  body that goes past it is cut and its partial deleted;
- take for ever: the whole transfer must end within `deadline` seconds (default
  $SRGRAD_DOWNLOAD_DEADLINE, else DEADLINE, one hour), checked between reads, each of which waits
  at most `timeout` (a 1-byte-every-2-s trickle never trips a per-read timeout), and the request
  with its headers is given up at the deadline too; the partial is kept, to resume;
- leave http(s): the URL and every redirect must be http or https (ftp://, file://, data: refused).
A folder on the way that is a file or a dangling link is named: the download needs a folder.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPException
from pathlib import Path

from .atomic import install

__all__ = ["DownloadError", "download", "sha256_of", "check_sha256", "make_folder", "srgrad_home", "MAX_BYTES",
           "DEADLINE"]

CHUNK = 1 << 20
MAX_BYTES = 4 << 30  # the largest published SR models are a few hundred MB
DEADLINE = 3600.0  # seconds for a whole transfer (resumable: run again to go on)
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
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0) \
        | getattr(os, "O_NONBLOCK", 0)  # (a FIFO must not block the open; no effect on a file)
    try:
        fd = os.open(partial, flags, 0o666)
    except OSError as exc:
        raise DownloadError(f"cannot open {partial}: {exc.strerror or exc}") from None
    problem = _not_plain(os.fstat(fd))
    if problem:  # a hard link would write into the user's file it shares its data with
        os.close(fd)
        raise DownloadError(f"{partial} {problem}: srgrad does not write through it; remove it "
                            f"and run again")
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


def _not_plain(st) -> str:
    """Why a file with stat `st` is no plain file of its own ("" when it is one)."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_nlink > 1:
        return f"has {st.st_nlink} hard links (another name shares its data)"
    return ""


def srgrad_home(sub: str) -> Path:
    """srgrad's cache folder `sub` ("models", "datasets"): $SRGRAD_HOME/<sub> when SRGRAD_HOME is
    set, else $XDG_CACHE_HOME/srgrad/<sub> (default ~/.cache/srgrad/<sub>)."""
    home = os.environ.get("SRGRAD_HOME")
    if home:
        return Path(home).expanduser() / sub
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(cache).expanduser() / "srgrad" / sub


def make_folder(folder, what: str = "the download") -> None:
    """Make `folder` (and its parents); a DownloadError naming the first path on the way that is
    a file or a dangling link (`what` needs a folder there), or why it cannot be made."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return
    except (FileExistsError, NotADirectoryError):
        pass
    except OSError as exc:
        raise DownloadError(f"cannot make the folder {folder}: {exc.strerror or exc}") from None
    for path in [*reversed(folder.parents), folder]:
        if os.path.lexists(path) and not path.is_dir():
            kind = "file" if path.exists() else "dangling link"
            raise DownloadError(f"{path} is a {kind}: {what} needs a folder there ({folder})")
    raise DownloadError(f"cannot make the folder {folder}")


def _limit(value, env: str, default: float, what: str) -> float:
    """`value`, else $env, else `default`: a positive number, else a DownloadError naming it."""
    if value is None:
        value, what = os.environ.get(env) or default, env
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if not 0 < number < float("inf"):
        raise DownloadError(f"{what} must be a positive number, got {str(value)[:40]!r}")
    return number


class _HttpRedirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects (it follows http, https and ftp), http and https only."""

    def http_error_302(self, req, fp, code, msg, headers):
        target = urllib.parse.urljoin(req.full_url, headers.get("location") or
                                      headers.get("uri") or "")
        if urllib.parse.urlsplit(target).scheme.lower() not in ("http", "https"):
            fp.close()
            raise DownloadError(f"{req.full_url} redirects to {target[:200]}: refused (srgrad "
                                f"follows http and https redirects only)")
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


_OPENER = urllib.request.build_opener(_HttpRedirects)


def _open(url: str, start: int, timeout: float):
    """The HTTP response for `url` from byte `start`, or None when the server says the range is
    past the end (HTTP 416: the partial may be whole)."""
    headers = {"User-Agent": "srgrad", "Accept-Encoding": "identity"}
    if start:
        headers["Range"] = f"bytes={start}-"
    try:
        return _OPENER.open(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and start:
            return None
        raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}") from None


def _open_by(url: str, start: int, timeout: float, end: float, deadline: float):
    """_open, given up at `end` (time.monotonic()): a server that trickles its status line and
    headers never trips the per-read timeout. It runs in a daemon thread, left to its own end
    (the server's, or the per-read timeout) when abandoned."""
    out = {}

    def work():
        try:
            out["response"] = _open(url, start, timeout)
        except BaseException as exc:  # handed to the caller
            out["error"] = exc
    worker = threading.Thread(target=work, daemon=True, name="srgrad-download-open")
    worker.start()
    worker.join(max(0.0, end - time.monotonic()))
    if worker.is_alive():
        raise DownloadError(f"{url}: the server did not answer within {deadline:g} s "
                            f"(SRGRAD_DOWNLOAD_DEADLINE sets the limit)")
    if "error" in out:
        raise out["error"]
    return out["response"]


def _receive(response, fh, have: int, url: str, partial: Path, progress: bool, desc: str,
             max_bytes: int, end: float, deadline: float) -> None:
    """Append the response's body to fh (from `have` bytes: restart at 0 if the server sent the
    whole file), with a progress bar; a cut or late transfer keeps what arrived, one past
    `max_bytes` is refused (the caller deletes it). `end`: the time.monotonic() deadline."""
    from tqdm.auto import tqdm
    if have and response.status == 206:
        match = _RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
        if match is None or int(match[1]) != have:  # not the range asked for: start over
            have = 0
    else:
        have = 0
    length = response.headers.get("Content-Length")
    total = have + int(length) if length and length.isdigit() else None
    too_big = "(the most srgrad downloads: SRGRAD_DOWNLOAD_MAX_BYTES raises it)"
    if total is not None and total > max_bytes:
        raise _TooBig(f"{url}: the file is {total} bytes, more than {max_bytes} {too_big}")
    fh.seek(have)
    fh.truncate()
    got = have
    read = getattr(response, "read1", response.read)  # what has arrived, not a whole CHUNK
    with tqdm(total=total, initial=have, unit="B", unit_scale=True, unit_divisor=1024, desc=desc,
              disable=not progress, leave=False) as bar:
        try:
            while True:
                if time.monotonic() > end:
                    fh.flush()
                    raise DownloadError(
                        f"{url}: the download did not finish within {deadline:g} s ({got} bytes"
                        f"{f' of {total}' if total else ''} arrived; SRGRAD_DOWNLOAD_DEADLINE sets "
                        f"the limit); {partial} keeps them: run again to resume")
                block = read(CHUNK)
                if not block:
                    break
                if got + len(block) > max_bytes:
                    raise _TooBig(f"{url}: the server sent more than {max_bytes} bytes {too_big}")
                fh.write(block)
                got += len(block)
                bar.update(len(block))
        except (OSError, HTTPException) as exc:  # a reset, a timeout, a short read
            if isinstance(exc, DownloadError):
                raise
            fh.flush()
            raise DownloadError(f"{url}: the transfer was cut after {got} of "
                                f"{total or 'unknown'} bytes ({exc.__class__.__name__}: {exc}); "
                                f"{partial} keeps them: run again to resume") from None
    fh.flush()
    if total is not None and got != total:
        raise DownloadError(f"{url}: the transfer ended after {got} of {total} bytes; {partial} "
                            f"keeps them: run again to resume")


class _TooBig(DownloadError):
    """Past the size cap: the partial goes."""


def _discard(partial: Path, fh) -> None:
    """Remove `partial` if it is still the file `fh` holds open."""
    try:
        st, mine = os.lstat(partial), os.fstat(fh.fileno())
        if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
            os.remove(partial)
    except OSError:
        pass


def download(url: str, dest, sha256: str, *, progress: bool = True, timeout: float = 30.0,
             say=None, max_bytes: int | None = None, deadline: float | None = None) -> Path:
    """Download `url` (http or https) to `dest` (a path; its folder is made), resuming
    `<dest>.partial`, and install it only when its sha256 equals `sha256` (64 hex digits).
    Returns dest. Raises DownloadError (an OSError) when the server or the network fails (the
    partial is kept), when the hash differs or the body passes `max_bytes` (the partial is
    deleted), past `deadline` seconds (kept), when another process holds the partial, or when the
    partial or dest is not a plain file of its own (module docstring). `timeout`: seconds one
    read may wait. `say` (default: nothing) is told when a partial download is resumed."""
    expected = check_sha256(sha256)
    max_bytes = int(_limit(max_bytes, "SRGRAD_DOWNLOAD_MAX_BYTES", MAX_BYTES, "max_bytes"))
    deadline = _limit(deadline, "SRGRAD_DOWNLOAD_DEADLINE", DEADLINE, "deadline")
    end = time.monotonic() + deadline
    if urllib.parse.urlsplit(url).scheme.lower() not in ("http", "https"):
        raise DownloadError(f"{url}: srgrad downloads only http and https URLs; "
                            f"{_by_hand(url, Path(dest))}")
    dest = Path(dest)
    make_folder(dest.parent)
    with contextlib.suppress(FileNotFoundError):
        problem = _not_plain(os.lstat(dest))
        if problem:
            raise DownloadError(f"{dest} {problem}: srgrad does not replace it; remove it and run "
                                f"again")
    partial = dest.with_name(dest.name + ".partial")
    with _locked_partial(partial) as fh:
        try:
            _fetch_into(fh, url, dest, partial, expected, progress, timeout, say, max_bytes, end,
                        deadline)
        except _TooBig:
            _discard(partial, fh)
            raise
        except BaseException:
            if os.fstat(fh.fileno()).st_size == 0:  # nothing arrived: leave no empty partial
                _discard(partial, fh)
            raise
        install(partial, dest)
    return dest


def _fetch_into(fh, url, dest, partial, expected, progress, timeout, say, max_bytes, end,
                deadline) -> None:
    """download's transfer into the open partial `fh`, checked against `expected`."""
    have = os.fstat(fh.fileno()).st_size
    if have and say is not None:
        say(f"resuming {partial} from {have} bytes")
    try:
        response = _open_by(url, have, timeout, end, deadline)
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
            _receive(response, fh, have, url, partial, progress, dest.name, max_bytes, end,
                     deadline)
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
