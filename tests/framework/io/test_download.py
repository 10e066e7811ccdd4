"""io/download.py against a loopback HTTP server (http.server in a thread) serving a file the test
makes: first download, resume after a cut, hash mismatch, 404, offline (connection refused), a
server that ignores Range, a complete partial (HTTP 416), a second process, a symlinked partial.
Never the real network."""
import hashlib
import http.server
import os

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
