"""framework/engine/hub/datasets.py: data sets by name through a loopback server with tiny stand-in
archives: fetched, checked, extracted once; hostile archives refused; offline and unknown-hash
entries say what to do."""
from __future__ import annotations

import hashlib
import http.server
import io
import tarfile
import zipfile

import numpy as np
import pytest
from PIL import Image

from framework.engine.hub import datasets as datahub
from framework.engine.hub.datasets import Archive, ArchiveError, SETS
from framework.io.download import DownloadError
from tests.conftest import loopback_server, refused_url


def _png(seed: int, size=(24, 20)) -> bytes:
    arr = np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def _tar(members: dict, links=()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in links:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buf.getvalue()


BENCHMARK = _tar({f"benchmark/{s}/HR/{n}.png": _png(i) for i, (s, n) in
                  enumerate([("Set5", "baby"), ("Set5", "bird"), ("Set14", "lenna")])})


class _Files(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.requests.append(self.path)
        body = self.server.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server(monkeypatch, tmp_path):
    monkeypatch.setenv("SRGRAD_HOME", str(tmp_path / "home"))
    with loopback_server(_Files, monkeypatch, requests=[], files={}) as httpd:
        yield httpd


def _serve(server, monkeypatch, name, body, path="/benchmark.tar", file="benchmark.tar"):
    server.files[path] = body
    archive = Archive(file, server.url + path, hashlib.sha256(body).hexdigest(), len(body))
    monkeypatch.setitem(SETS, name, SETS[name]._replace(archives=(archive,)))


def test_fetch_checks_extracts_once_and_names_folders(server, monkeypatch):
    for name in ("Set5", "Set14"):
        _serve(server, monkeypatch, name, BENCHMARK)
    said = []
    key, root = datahub.fetch("set5", progress=False, say=said.append)
    assert key == "Set5" and root == datahub.data_dir()
    hr = datahub.folder_of("Set5")
    assert sorted(p.name for p in hr.iterdir()) == ["baby.png", "bird.png"]
    assert (hr / "baby.png").read_bytes() == _png(0)
    # Set14 lives in the same archive: nothing downloaded again
    datahub.fetch("Set14", progress=False, say=said.append)
    assert server.requests == ["/benchmark.tar"]
    assert [p.name for p in datahub.folder_of("Set14").iterdir()] == ["lenna.png"]
    assert not list(root.glob("*.extracting-*"))
    with pytest.raises(ValueError, match=r"Set5 has no 'hr_valid' folder \(srgrad knows: hr, lr_x2"):
        datahub.folder_of("Set5", "hr_valid")


def test_a_wrong_hash_installs_nothing(server, monkeypatch):
    _serve(server, monkeypatch, "Set5", BENCHMARK)
    entry = SETS["Set5"]
    monkeypatch.setitem(SETS, "Set5", entry._replace(archives=(entry.archives[0]._replace(sha256="0" * 64),)))
    with pytest.raises(DownloadError, match="sha256"):
        datahub.fetch("Set5", progress=False, say=lambda m: None)
    assert not (datahub.data_dir() / "benchmark").exists()
    assert not (datahub.data_dir() / "archives" / "benchmark.tar").exists()


@pytest.mark.parametrize("case", ["parent", "absolute", "symlink", "zip_symlink", "too_big"])
def test_hostile_archives_are_refused_and_leave_nothing(server, monkeypatch, tmp_path, case):
    if case == "parent":
        body, match = _tar({"benchmark/../../evil.txt": b"x"}), "would be written outside the folder"
    elif case == "absolute":
        body, match = _tar({"/tmp/evil.txt": b"x"}), "would be written outside the folder"
    elif case == "symlink":
        body, match = _tar({"a.txt": b"x"}, links=[("benchmark/link", "/etc/passwd")]), "is a link or device"
    elif case == "zip_symlink":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            info = zipfile.ZipInfo("benchmark/link")
            info.external_attr = (0o120777 << 16)
            z.writestr(info, "/etc/passwd")
        body, match = buf.getvalue(), "is a link or device"
    else:
        monkeypatch.setattr(datahub, "MAX_MEMBERS", 2)
        body, match = _tar({f"f{i}": b"x" for i in range(3)}), "more than srgrad extracts"
    _serve(server, monkeypatch, "Set5", body)
    with pytest.raises(ArchiveError, match=match):
        datahub.fetch("Set5", progress=False, say=lambda m: None)
    root = datahub.data_dir()
    assert sorted(p.name for p in root.iterdir()) == ["archives"]  # no folder, no temporary one
    assert not (tmp_path / "evil.txt").exists()


def test_offline_unknown_hash_and_by_hand(server, monkeypatch):
    entry = SETS["Set5"]
    archive = entry.archives[0]._replace(url=refused_url("/benchmark.tar"))
    monkeypatch.setitem(SETS, "Set5", entry._replace(archives=(archive,)))
    with pytest.raises(DownloadError, match=r"cannot reach http://127.0.0.1:\d+/benchmark.tar.*offline\?"):
        datahub.fetch("Set5", progress=False, say=lambda m: None)
    with pytest.raises(DownloadError, match=r"Flickr2K: srgrad knows no sha256 for Flickr2K.tar.*--sha256 HEX"):
        datahub.fetch("Flickr2K", progress=False, say=lambda m: None)
    with pytest.raises(DownloadError, match=r"Manga109: Manga109.zip is shared only through "
                       r"http://www.manga109.org/en/download.html.*save it as .*archives/Manga109.zip"):
        datahub.fetch("Manga109", progress=False, say=lambda m: None)
    # put there by hand: used, with a note that srgrad could not check it
    zpath = datahub.data_dir() / "archives" / "Manga109.zip"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("Manga109/AisazuNihaIrarenai.png", _png(3))
    zpath.write_bytes(buf.getvalue())
    said = []
    datahub.fetch("Manga109", progress=False, say=said.append)
    assert any("put there by hand" in m for m in said)
    assert [p.name for p in datahub.folder_of("Manga109").iterdir()] == ["AisazuNihaIrarenai.png"]
    with pytest.raises(ValueError, match=r"'Set6' is not a data set srgrad knows \(known: Set5, Set14, B100"):
        datahub.get("Set6")
    assert datahub.get("BSD100")[0] == "B100"


def test_eval_benchmark_table_equals_one_set_evaluations(server, monkeypatch, tmp_path, capsys):
    """srgrad-eval --benchmark Set5 Set14: the sets fetched by name, each scored as --input on its HR
    folder would be, and the summary table (model and bicubic rows) written as benchmark.md."""
    from framework.engine.commands.cli import eval_main
    from framework.engine.inference.zoo import load_zoo
    from framework.nn import init
    from framework.registry import MODELS
    from framework.weights import write_pth
    load_zoo()
    for name in ("Set5", "Set14"):
        _serve(server, monkeypatch, name, BENCHMARK)
    init.manual_seed(0)
    write_pth(tmp_path / "edsr.pth", {"params": MODELS.build({"type": "EDSR", "num_feat": 4, "num_block": 1,
                                                               "scale": 2}).state_dict()})
    monkeypatch.chdir(tmp_path)
    assert eval_main(["--weights", "edsr.pth", "--benchmark", "Set5", "set14", "--no-progress",
                      "--no-save"]) == 0
    table = (tmp_path / "results" / "edsr" / "benchmark.md").read_text()
    lines = table.splitlines()
    assert lines[0] == "x2, Y, crop_border=2, psnr / ssim" and lines[2] == "| method | Set5 | Set14 |"
    ours = dict(zip(["Set5", "Set14"], lines[4].split("|")[2:4]))
    assert lines[4].startswith("| edsr |") and lines[5].startswith("| bicubic |")
    for name in ("Set5", "Set14"):  # the same numbers as an evaluation of the HR folder
        capsys.readouterr()
        assert eval_main(["--weights", "edsr.pth", "--input", str(datahub.folder_of(name)),
                          "--no-progress", "--no-save", "--csv", f"{name}.csv"]) == 0
        import csv
        rows = list(csv.DictReader(open(tmp_path / f"{name}.csv")))
        mean = next(r for r in rows if r["image"] == "mean")
        psnr_text, ssim_text = ours[name].split("/")
        assert float(psnr_text) == pytest.approx(float(mean["psnr_y"]), abs=0.0051)
        assert float(ssim_text) == pytest.approx(float(mean["ssim_y"]), abs=0.000051)
    assert eval_main(["--weights", "edsr.pth", "--benchmark", "Set5", "--input", "x"]) == 2


def test_prepare_a_dataset_by_name(server, monkeypatch, tmp_path):
    """srgrad-prepare --dataset DIV2K fetches the train HR archive and cuts it as --input would."""
    from framework.engine.commands.prepare import main
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for i in (1, 2):
            z.writestr(f"DIV2K_train_HR/{i:04d}.png", _png(10 + i, (40, 36)))
    _serve(server, monkeypatch, "DIV2K", buf.getvalue(), "/DIV2K_train_HR.zip", "DIV2K_train_HR.zip")
    common = ["--crop-size", "16", "--step", "16", "--scales", "2", "--workers", "1", "--no-progress"]
    assert main(["--dataset", "div2k", "--output", str(tmp_path / "by_name"), *common]) == 0
    assert main(["--input", str(datahub.folder_of("DIV2K")), "--output", str(tmp_path / "by_folder"),
                 *common]) == 0
    names = sorted(p.name for p in (tmp_path / "by_name" / "HR").iterdir())
    assert len(names) == 18 and names == sorted(p.name for p in (tmp_path / "by_folder" / "HR").iterdir())
    for sub in ("HR", "LR_bicubic/X2"):
        for n in names:
            assert (tmp_path / "by_name" / sub / n).read_bytes() == (tmp_path / "by_folder" / sub / n).read_bytes()
    assert main(["--dataset", "Set6", "--output", str(tmp_path / "x")]) == 2
    assert main(["--dataset", "div2k", "--input", "y", "--output", str(tmp_path / "x")]) == 2


def test_lpips_files_come_through_the_registry(server, monkeypatch, tmp_path, capsys):
    """srgrad-eval --metrics lpips: the two files LPIPS reads are fetched into the model cache
    (checked by sha256), once; a file whose hash differs is refused naming both hashes."""
    import csv
    import sys
    from pathlib import Path

    from framework.engine.hub import models as hub
    from framework.engine.commands.cli import eval_main
    from framework.engine.inference.zoo import load_zoo
    from framework.metrics.perceptual import _network
    from framework.nn import init
    from framework.registry import MODELS
    from framework.weights import write_pth
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
    import reference_metrics
    load_zoo()
    backbone, lin = reference_metrics.seeded_state("alex")
    for name, state in (("alexnet-owt-7be5be79.pth", backbone), ("lpips_v0.1_alex.pth", lin)):
        write_pth(tmp_path / name, state)
        body = (tmp_path / name).read_bytes()
        server.files["/" + name] = body
        monkeypatch.setitem(hub.AUXILIARY, name, (server.url + "/" + name, hashlib.sha256(body).hexdigest()))
    monkeypatch.delenv("SRGRAD_LPIPS_ALEX_BACKBONE", raising=False)
    monkeypatch.delenv("SRGRAD_LPIPS_ALEX_WEIGHTS", raising=False)
    _network.cache_clear()
    init.manual_seed(0)
    write_pth(tmp_path / "edsr.pth", {"params": MODELS.build({"type": "EDSR", "num_feat": 4, "num_block": 1,
                                                               "scale": 2}).state_dict()})
    (tmp_path / "hr").mkdir()
    (tmp_path / "hr" / "a.png").write_bytes(_png(5, (40, 36)))
    monkeypatch.chdir(tmp_path)
    argv = ["--weights", "edsr.pth", "--input", "hr", "--metrics", "psnr", "lpips", "--no-save",
            "--no-progress"]
    assert eval_main(argv + ["--csv", "one.csv"]) == 0
    assert sorted(server.requests) == ["/alexnet-owt-7be5be79.pth", "/lpips_v0.1_alex.pth"]
    assert (hub.cache_dir() / "lpips_v0.1_alex.pth").read_bytes() == (tmp_path / "lpips_v0.1_alex.pth").read_bytes()
    row = next(r for r in csv.DictReader(open("one.csv")) if r["image"] != "mean")
    assert 0 < float(row["lpips_rgb"]) < 1 and "bicubic_lpips_rgb" in row and "psnr_y" in row
    assert eval_main(argv + ["--csv", "two.csv"]) == 0
    assert len(server.requests) == 2  # cached: not fetched again
    (hub.cache_dir() / "lpips_v0.1_alex.pth").write_bytes(b"not the file")
    _network.cache_clear()
    capsys.readouterr()
    assert eval_main(argv + ["--csv", "three.csv"]) == 1
    assert "lpips_v0.1_alex.pth: its sha256 is" in capsys.readouterr().err
    _network.cache_clear()
