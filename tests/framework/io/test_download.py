"""io/download.py against a loopback HTTP server (http.server in a thread) serving a file the test
makes: first download, resume after a cut, hash mismatch, 404, offline (connection refused), a
server that ignores Range, a complete partial (HTTP 416), a second process, a symlinked partial;
and the hostile cases (issue 37 point 5): a hard-linked partial or destination, a body past the
size cap, a trickle past the deadline, redirects to other schemes, a cache path that is a file.
Never the real network."""
import hashlib
import http.server
import os
import time

import numpy as np
import pytest

from framework.io.download import DownloadError, check_sha256, download
from tests.conftest import loopback_server, refused_url

PAYLOAD = np.random.default_rng(0).integers(0, 256, 300_000, dtype=np.uint8).tobytes()
SHA = hashlib.sha256(PAYLOAD).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        server = self.server
        server.requests.append({"path": self.path, "range": self.headers.get("Range")})
        if self.path.startswith("/to/"):  # /to/<url>: a redirect there
            self.send_response(302)
            self.send_header("Location", self.path[len("/to/"):])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path in ("/endless", "/trickle", "/claims"):
            self.send_response(200)
            if self.path == "/claims":  # says 1 TB, sends a little
                self.send_header("Content-Length", str(10 ** 12))
            self.end_headers()
            try:  # bounded: the server must stop by itself if the client does not
                for _ in range(4000):
                    self.wfile.write(b"x" * (1 if self.path == "/trickle" else 65536))
                    time.sleep(0.05 if self.path == "/trickle" else 0)
            except OSError:  # the client hung up
                pass
            self.close_connection = True
            return
        if self.path == "/slow-headers":  # a header a byte at a time: for ever, to a client
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            try:
                for _ in range(100):
                    self.wfile.write(b"x")
                    time.sleep(0.05)
            except OSError:
                pass
            self.close_connection = True
            return
        if self.path == "/page":
            body = b"<html>are you sure?</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path != "/model.pth":
            self.send_error(404, "Not Found")
            return
        start = 0
        asked = self.headers.get("Range")
        if asked and not server.ignore_range:
            start = int(asked.split("=")[1].rstrip("-"))
            if start >= len(PAYLOAD):
                self.send_error(416, "Range Not Satisfiable")
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(PAYLOAD) - 1}/{len(PAYLOAD)}")
        else:
            self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(PAYLOAD) - start))
        self.end_headers()
        body = PAYLOAD[start:]
        if server.cut_after is not None:  # once: send part of the body, then drop the connection
            body, server.cut_after = body[:server.cut_after], None
            self.wfile.write(body)
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture
def server(monkeypatch):
    with loopback_server(_Handler, monkeypatch, requests=[], cut_after=None,
                         ignore_range=False) as httpd:
        yield httpd


def test_first_download_installs_the_checked_file(server, tmp_path):
    dest = tmp_path / "cache" / "model.pth"
    assert download(server.url + "/model.pth", dest, SHA, progress=False) == dest
    assert dest.read_bytes() == PAYLOAD
    assert os.listdir(dest.parent) == ["model.pth"]  # no partial left
    assert server.requests == [{"path": "/model.pth", "range": None}]


def test_a_cut_transfer_keeps_its_bytes_and_the_next_call_resumes(server, tmp_path):
    dest = tmp_path / "model.pth"
    server.cut_after = 100_000
    with pytest.raises(DownloadError, match=r"after 100000 of 300000 bytes.*run again to resume"):
        download(server.url + "/model.pth", dest, SHA, progress=False)
    partial = tmp_path / "model.pth.partial"
    assert not dest.exists() and partial.read_bytes() == PAYLOAD[:100_000]
    said = []
    download(server.url + "/model.pth", dest, SHA, progress=False, say=said.append)
    assert dest.read_bytes() == PAYLOAD and not partial.exists()
    assert server.requests[-1]["range"] == "bytes=100000-"  # only the rest was asked for
    assert said == [f"resuming {partial} from 100000 bytes"]


def test_a_server_that_ignores_the_range_restarts_the_file(server, tmp_path):
    dest = tmp_path / "model.pth"
    (tmp_path / "model.pth.partial").write_bytes(b"x" * 5000)  # stale bytes: must not stay
    server.ignore_range = True
    download(server.url + "/model.pth", dest, SHA, progress=False)
    assert dest.read_bytes() == PAYLOAD


def test_a_complete_partial_is_checked_and_installed(server, tmp_path):
    dest = tmp_path / "model.pth"
    (tmp_path / "model.pth.partial").write_bytes(PAYLOAD)  # the server answers 416
    download(server.url + "/model.pth", dest, SHA, progress=False)
    assert dest.read_bytes() == PAYLOAD and server.requests[-1]["range"] == "bytes=300000-"


def test_a_hash_mismatch_deletes_the_partial_and_says_both_hashes(server, tmp_path):
    dest = tmp_path / "model.pth"
    wrong = "0" * 64
    with pytest.raises(DownloadError) as err:
        download(server.url + "/model.pth", dest, wrong, progress=False)
    msg = str(err.value)
    assert SHA in msg and wrong in msg and "partial download was deleted" in msg
    assert os.listdir(tmp_path) == []
    with pytest.raises(DownloadError, match=r"the server sent a web page, not the file"):
        download(server.url + "/page", dest, SHA, progress=False)


def test_http_404_names_the_url_and_where_to_put_the_file(server, tmp_path):
    dest = tmp_path / "model.pth"
    with pytest.raises(DownloadError) as err:
        download(server.url + "/gone.pth", dest, SHA, progress=False)
    assert f"{server.url}/gone.pth: HTTP 404 Not Found" in str(err.value)
    assert f"by hand and save it as {dest}" in str(err.value)
    assert not dest.exists()


def test_offline_says_where_to_put_the_file_by_hand(tmp_path):
    dest, url = tmp_path / "model.pth", refused_url()
    with pytest.raises(DownloadError) as err:
        download(url, dest, SHA, progress=False, timeout=5)
    msg = str(err.value)
    assert msg.startswith(f"cannot reach {url} (") and "offline?" in msg
    assert f"download {url} by hand and save it as {dest}" in msg


@pytest.mark.skipif(os.name != "posix", reason="the lock is POSIX flock")
def test_a_second_process_is_kept_out_of_the_partial(server, tmp_path):
    import fcntl
    dest = tmp_path / "model.pth"
    with open(tmp_path / "model.pth.partial", "wb") as other:  # another download holds it
        fcntl.flock(other.fileno(), fcntl.LOCK_EX)
        with pytest.raises(DownloadError, match="another process is downloading into"):
            download(server.url + "/model.pth", dest, SHA, progress=False)
    assert server.requests == []


@pytest.mark.skipif(not hasattr(os, "O_NOFOLLOW"), reason="needs O_NOFOLLOW")
def test_a_symlinked_partial_is_not_followed(server, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"keep me")
    (tmp_path / "model.pth.partial").symlink_to(target)
    with pytest.raises(DownloadError, match="cannot open"):
        download(server.url + "/model.pth", tmp_path / "model.pth", SHA, progress=False)
    assert target.read_bytes() == b"keep me"


def test_the_expected_hash_is_checked_first():
    with pytest.raises(ValueError, match="sha256 must be 64 hex digits"):
        check_sha256("abc")
    assert check_sha256(SHA.upper()) == SHA


# -- hostile cases (issue 37 point 5) -------------------------------------------------------------
@pytest.mark.parametrize("ignore_range", [False, True])
def test_a_hard_linked_partial_is_refused_and_its_other_name_untouched(server, tmp_path,
                                                                        ignore_range):
    """With a Range server the victim got the file appended; without Range it became the file."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"the user's file")
    os.link(victim, tmp_path / "model.pth.partial")
    server.ignore_range = ignore_range
    with pytest.raises(DownloadError, match=r"model.pth.partial has 2 hard links.*remove it"):
        download(server.url + "/model.pth", tmp_path / "model.pth", SHA, progress=False)
    assert victim.read_bytes() == b"the user's file" and not (tmp_path / "model.pth").exists()
    assert server.requests == []


def test_a_partial_or_destination_that_is_not_a_plain_file_is_refused(server, tmp_path):
    url, dest = server.url + "/model.pth", tmp_path / "model.pth"
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep")
    os.mkfifo(tmp_path / "model.pth.partial")
    with pytest.raises(DownloadError, match=r"model.pth.partial is not a regular file"):
        download(url, dest, SHA, progress=False, timeout=2)
    os.remove(tmp_path / "model.pth.partial")
    linked = r"has 2 hard links \(another name shares its data\)"
    for make, what in [(lambda: dest.symlink_to(victim), "is a symbolic link"),
                       (lambda: os.link(victim, dest), linked),
                       (lambda: dest.symlink_to(tmp_path / "nowhere"), "is a symbolic link")]:
        make()
        with pytest.raises(DownloadError, match=rf"{dest} {what}: srgrad does not replace it"):
            download(url, dest, SHA, progress=False)
        dest.unlink()
    assert victim.read_bytes() == b"keep" and server.requests == []
    assert sorted(os.listdir(tmp_path)) == ["victim.txt"]


def test_a_body_past_the_size_cap_is_cut_and_deleted(server, tmp_path):
    dest = tmp_path / "model.pth"
    start = time.monotonic()
    with pytest.raises(DownloadError, match=r"/endless: the server sent more than 200000 bytes "
                                            r"\(the most srgrad downloads"):
        download(server.url + "/endless", dest, SHA, progress=False, max_bytes=200_000)
    assert time.monotonic() - start < 5
    with pytest.raises(DownloadError, match=r"/claims: the file is 1000000000000 bytes, more than "
                                            r"200000"):
        download(server.url + "/claims", dest, SHA, progress=False, max_bytes=200_000)
    assert os.listdir(tmp_path) == []  # nothing kept
    download(server.url + "/model.pth", dest, SHA, progress=False, max_bytes=len(PAYLOAD))


def test_the_default_cap_and_deadline_come_from_the_environment(server, tmp_path, monkeypatch):
    monkeypatch.setenv("SRGRAD_DOWNLOAD_MAX_BYTES", "1000")
    with pytest.raises(DownloadError, match=r"300000 bytes, more than 1000 .*"
                                            r"SRGRAD_DOWNLOAD_MAX_BYTES"):
        download(server.url + "/model.pth", tmp_path / "m.pth", SHA, progress=False)
    monkeypatch.setenv("SRGRAD_DOWNLOAD_MAX_BYTES", "lots")
    with pytest.raises(DownloadError, match=r"SRGRAD_DOWNLOAD_MAX_BYTES must be a positive "
                                            r"number, got 'lots'"):
        download(server.url + "/model.pth", tmp_path / "m.pth", SHA, progress=False)


def test_a_trickle_ends_at_the_deadline_and_keeps_its_bytes(server, tmp_path):
    dest = tmp_path / "model.pth"
    start = time.monotonic()
    with pytest.raises(DownloadError, match=r"/trickle: the download did not finish within 0.4 s "
                                            r"\(\d+ bytes.*SRGRAD_DOWNLOAD_DEADLINE.*run again"):
        download(server.url + "/trickle", dest, SHA, progress=False, timeout=1, deadline=0.4)
    assert time.monotonic() - start < 2
    assert 0 < (tmp_path / "model.pth.partial").stat().st_size < 100


def test_a_server_that_trickles_its_headers_ends_at_the_deadline(server, tmp_path):
    start = time.monotonic()
    with pytest.raises(DownloadError, match=r"/slow-headers: the server did not answer within "
                                            r"0.3 s \(SRGRAD_DOWNLOAD_DEADLINE"):
        download(server.url + "/slow-headers", tmp_path / "m.pth", SHA, progress=False,
                 timeout=1, deadline=0.3)
    assert time.monotonic() - start < 1.5
    assert os.listdir(tmp_path) == []  # no byte arrived: no partial


@pytest.mark.parametrize("target", ["ftp://127.0.0.1/model.pth", "file:///etc/hostname"])
def test_a_redirect_to_another_scheme_is_refused(server, tmp_path, target):
    dest = tmp_path / "model.pth"
    with pytest.raises(DownloadError, match=rf"redirects to {target}: refused \(srgrad follows "
                                            r"http and https redirects only\)"):
        download(f"{server.url}/to/{target}", dest, SHA, progress=False)
    assert os.listdir(tmp_path) == []
    with pytest.raises(DownloadError, match=r"only http and https URLs"):
        download(target, dest, SHA, progress=False)
    download(f"{server.url}/to/{server.url}/model.pth", dest, SHA, progress=False)  # http: fine
    assert dest.read_bytes() == PAYLOAD


@pytest.mark.parametrize("kind", ["file", "dangling link"])
def test_a_folder_that_is_a_file_says_it_needs_a_folder(server, tmp_path, kind):
    cache = tmp_path / "cache"
    if kind == "file":
        cache.write_bytes(b"")
    else:
        cache.symlink_to(tmp_path / "gone")
    for dest in (cache / "model.pth", cache / "models" / "model.pth"):
        with pytest.raises(DownloadError, match=rf"^{cache} is a {kind}: the download needs a "
                                                rf"folder there \({dest.parent}\)$"):
            download(server.url + "/model.pth", dest, SHA, progress=False)
    assert server.requests == []


def test_offline_leaves_no_empty_partial(tmp_path):
    with pytest.raises(DownloadError, match="offline"):
        download(refused_url(), tmp_path / "model.pth", SHA, progress=False, timeout=5)
    assert os.listdir(tmp_path) == []
    (tmp_path / "model.pth.partial").write_bytes(b"12345")  # a real partial stays
    with pytest.raises(DownloadError, match="offline"):
        download(refused_url(), tmp_path / "model.pth", SHA, progress=False, timeout=5)
    assert (tmp_path / "model.pth.partial").read_bytes() == b"12345"
