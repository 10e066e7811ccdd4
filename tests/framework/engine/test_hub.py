"""engine/hub/models.py: the registry of published models (names, official URLs, real sha256 values, specs
the originals build), the cache folder, fetch on first use through a loopback HTTP server, and
Real-ESRGAN's -dn blend. Never the real network."""
import hashlib
import http.server
import inspect
import os
import re

import numpy as np
import pytest

import models  # noqa: F401  registers the architectures
from framework.engine import build_model
from framework.engine.hub import models as hub
from framework.io.download import DownloadError
from framework.registry import MODELS
from framework.weights.pth_write import write_pth
from tests.conftest import loopback_server, refused_url


def test_every_entry_is_complete_and_names_resolve():
    hosts = ("https://github.com/xinntao/Real-ESRGAN/releases/download/",
             "https://github.com/JingyunLiang/SwinIR/releases/download/",
             "https://drive.google.com/uc?export=download&confirm=1&id=")
    for name, entry in hub.PUBLISHED.items():
        assert entry.file.endswith(".pth") and hub.get(name) == (name, entry)
        assert hub.get(entry.file) == (name, entry) and hub.get(entry.file[:-4])[0] == name
        assert entry.url is None or entry.url.startswith(hosts), name
        assert entry.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", entry.sha256), name
        assert entry.url is not None or entry.page, name  # where to get it by hand
        signature = inspect.signature(MODELS.get(entry.spec["type"]).__init__)
        assert set(entry.spec) - {"type"} <= set(signature.parameters), name
    # the Real-ESRGAN names inference_realesrgan.py takes, and the -dn pair
    for name in ("RealESRGAN_x4plus", "RealESRNet_x4plus", "RealESRGAN_x4plus_anime_6B",
                 "RealESRGAN_x2plus", "realesr-animevideov3", "realesr-general-x4v3"):
        assert hub.PUBLISHED[name].sha256 is not None
    assert hub.PUBLISHED["realesr-general-x4v3"].partner == "realesr-general-wdn-x4v3"
    with pytest.raises(ValueError, match=r"-n RealESRGAN_x8: not a published model .*--list-models"):
        hub.get("RealESRGAN_x8")


def test_basicsr_hashes_start_with_the_prefix_in_their_file_names():
    """torch hub's convention, which BasicSR's names follow: NAME-<first 8 hex of sha256>.pth."""
    named = [e for e in hub.PUBLISHED.values() if re.search(r"-[0-9a-f]{8}\.pth$", e.file)]
    assert len(named) >= 4
    for entry in named:
        assert entry.sha256.startswith(entry.file[-12:-4]), entry.file


@pytest.mark.parametrize("name,params", [("realesr-general-x4v3", 1213296),
                                         ("realesr-animevideov3", 621424),
                                         ("EDSR_Mx4_f64b16_DIV2K_official", 1517571)])
def test_small_specs_build_the_published_sizes(name, params):
    """The parameter counts the release files hold (e.g. realesr-general-x4v3.pth: 4,885,111 bytes
    of float32 = 1.21 M parameters plus the pickle)."""
    model = build_model(hub.PUBLISHED[name].spec)
    assert sum(p.data.size for p in model.parameters()) == params


def test_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("SRGRAD_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert hub.cache_dir() == tmp_path / "home" / ".cache" / "srgrad" / "models"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.cache_dir() == tmp_path / "xdg" / "srgrad" / "models"
    monkeypatch.setenv("SRGRAD_HOME", str(tmp_path / "sg"))
    assert hub.cache_dir() == tmp_path / "sg" / "models"


# -- fetch through a loopback server --------------------------------------------------------------
class _Files(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        body = self.server.files.get(self.path)
        self.server.paths.append(self.path)
        if body is None:
            self.send_error(404, "Not Found")
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server(monkeypatch, tmp_path):
    monkeypatch.setenv("SRGRAD_HOME", str(tmp_path / "home"))
    with loopback_server(_Files, monkeypatch, files={}, paths=[]) as httpd:
        yield httpd


def _publish(monkeypatch, server, name, body, known=True, spec=None, partner=None):
    server.files[f"/{name}.pth"] = body
    sha = hashlib.sha256(body).hexdigest()
    entry = hub.Published(f"{name}.pth", f"{server.url}/{name}.pth", sha if known else None,
                          spec or {"type": "SRVGGNetCompact", "scale": 4}, "page",
                          partner=partner)
    monkeypatch.setitem(hub.PUBLISHED, name, entry)
    return sha


def test_fetch_downloads_once_then_checks_the_cached_file(server, monkeypatch):
    sha = _publish(monkeypatch, server, "tiny", b"weights" * 1000)
    said = []
    path = hub.fetch("tiny", progress=False, say=said.append)
    assert path == hub.cache_dir() / "tiny.pth" and path.read_bytes() == b"weights" * 1000
    assert said == [f"downloading tiny from {server.url}/tiny.pth into {path}"]
    assert hub.fetch("tiny.pth", progress=False) == path and server.paths == ["/tiny.pth"]
    path.write_bytes(b"tampered")  # checked before every use, never silently replaced
    with pytest.raises(DownloadError, match=rf"its sha256 is [0-9a-f]{{64}}, expected {sha} for "
                                            r"tiny; delete it to download"):
        hub.fetch("tiny", progress=False)
    assert path.read_bytes() == b"tampered"


def test_an_unknown_hash_needs_the_users(server, monkeypatch):
    body = b"unknown" * 100
    _publish(monkeypatch, server, "nohash", body, known=False)
    with pytest.raises(DownloadError, match=r"srgrad knows no sha256 for nohash.pth.*--sha256 HEX"):
        hub.fetch("nohash", progress=False)
    assert server.paths == []  # refused before any download
    with pytest.raises(DownloadError, match=r"sha256 is .* expected 0{64}.*partial download was "
                                            r"deleted"):
        hub.fetch("nohash", sha256="0" * 64, progress=False)
    good = hashlib.sha256(body).hexdigest()
    assert hub.fetch("nohash", sha256=good, progress=False).read_bytes() == body


def test_a_known_hash_must_agree_with_the_users(server, monkeypatch):
    _publish(monkeypatch, server, "tiny", b"x" * 10)
    with pytest.raises(ValueError, match=r"--sha256 1{64} is not the sha256 of tiny.pth"):
        hub.fetch("tiny", sha256="1" * 64, progress=False)


def test_a_file_published_only_in_a_folder_is_asked_for_by_hand(server, monkeypatch):
    with pytest.raises(DownloadError) as err:
        hub.fetch("RCAN_BIX4-official", progress=False)
    path = hub.cache_dir() / "RCAN_BIX4-official.pth"
    assert "publishes RCAN_BIX4-official.pth only at https://drive.google.com/drive/folders/" \
        in str(err.value) and f"save it as {path}" in str(err.value)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"by hand")  # then it is used, with a note
    said = []
    assert hub.fetch("RCAN_BIX4-official", say=said.append) == path
    assert "srgrad knows no sha256 for RCAN_BIX4-official.pth" in said[0]


def test_offline_says_where_the_file_goes(monkeypatch, tmp_path):
    url = refused_url("/tiny.pth")
    monkeypatch.setenv("SRGRAD_HOME", str(tmp_path))
    monkeypatch.setitem(hub.PUBLISHED, "tiny", hub.Published("tiny.pth", url, "0" * 64,
                                                             {"type": "ESPCN"}, "page"))
    with pytest.raises(DownloadError, match=rf"offline\? download {url} by hand and save it as "
                                            rf"{tmp_path}/models/tiny.pth"):
        hub.fetch("tiny", progress=False)
    assert os.listdir(tmp_path / "models") == []  # no empty tiny.pth.partial (issue 42 point 4)


@pytest.mark.parametrize("kind", ["file", "dangling link"])
def test_a_cache_that_is_not_a_folder_is_named(server, monkeypatch, tmp_path, kind):
    _publish(monkeypatch, server, "tiny", b"x" * 10)
    home = tmp_path / "home"
    home.mkdir()
    if kind == "file":
        (home / "models").write_bytes(b"")
    else:
        (home / "models").symlink_to(tmp_path / "gone")
    with pytest.raises(DownloadError, match=rf"^{home / 'models'} is a {kind}: the model cache "
                                            rf"\(SRGRAD_HOME moves it\) needs a folder there"):
        hub.fetch("tiny", progress=False)
    assert server.paths == []


# -- -dn: Real-ESRGAN's deep network interpolation -----------------------------------------------
def test_denoise_blend_matches_realesrgans_dni_in_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = {"w": rng.standard_normal((64, 3, 3, 3)).astype(np.float32), "b": rng.random(7, np.float32)}
    b = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in a.items()}
    for strength in (0.5, 0.3, 0.0):
        got = hub.denoise_blend(a, b, strength)
        for k in a:  # RealESRGANer.dni: dni_weight[0] * v_a + dni_weight[1] * v_b
            ref = strength * torch.from_numpy(a[k]) + (1 - strength) * torch.from_numpy(b[k])
            assert got[k].dtype == np.float32
            np.testing.assert_array_equal(got[k], ref.numpy())  # two products and a sum, exact
    with pytest.raises(ValueError, match=r"-dn: w has shape"):
        hub.denoise_blend(a, {**b, "w": b["w"][:1]}, 0.5)


def _srvgg_pth(path, seed):
    spec = {"type": "SRVGGNetCompact", "num_feat": 8, "num_conv": 2, "scale": 4}
    from framework.nn import init
    init.manual_seed(seed)
    state = build_model(spec).state_dict()
    write_pth(path, {"params": {k: np.asarray(v) for k, v in state.items()}})
    return spec, state


def test_infer_by_name_blends_the_denoise_pair(server, monkeypatch, tmp_path):
    from PIL import Image
    from framework.engine.commands.cli import infer_main
    from framework.engine.inference.upscale import upscale
    spec, a = _srvgg_pth(tmp_path / "a.pth", 1)
    _, b = _srvgg_pth(tmp_path / "b.pth", 2)
    _publish(monkeypatch, server, "gen", (tmp_path / "a.pth").read_bytes(), spec=spec,
             partner="gen-wdn")
    _publish(monkeypatch, server, "gen-wdn", (tmp_path / "b.pth").read_bytes(), spec=spec)
    rng = np.random.default_rng(3)
    Image.fromarray(rng.integers(0, 256, (9, 11, 3), dtype=np.uint8)).save(tmp_path / "x.png")
    out = tmp_path / "out"
    assert infer_main(["-n", "gen", "-dn", "0.25", "-i", str(tmp_path / "x.png"), "-o", str(out),
                       "--no-progress"]) == 0
    assert sorted(server.paths) == ["/gen-wdn.pth", "/gen.pth"]
    model = build_model(spec).eval()
    model.load_state_dict(hub.denoise_blend(a, b, 0.25))
    from framework.io.image import quantise_into, read_image
    lq = read_image(tmp_path / "x.png")[0]
    expected = np.empty((36, 44, 3), np.uint8)
    quantise_into(expected, np.clip(upscale(model, lq), 0, 1), 8)
    np.testing.assert_array_equal(np.asarray(Image.open(out / "x_x4.png")), expected)
    # -dn 1 runs the first file alone and needs no partner
    server.files.pop("/gen-wdn.pth")
    for f in hub.cache_dir().iterdir():
        f.unlink()
    assert infer_main(["-n", "gen", "-dn", "1", "-i", str(tmp_path / "x.png"), "-o", str(out),
                       "--suffix", "one", "--no-progress"]) == 0
    assert (out / "x_one.png").exists() and server.paths[-1] == "/gen.pth"


def test_list_models_prints_the_registry_without_other_arguments(capsys, monkeypatch, tmp_path):
    from framework.engine.commands.cli import infer_main
    monkeypatch.setenv("SRGRAD_HOME", str(tmp_path))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "RealESRGAN_x4plus.pth").write_bytes(b"cached")
    with pytest.raises(SystemExit) as done:
        infer_main(["--list-models"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:] if line.strip()}
    assert rows["RealESRGAN_x4plus"] == ["RealESRGAN_x4plus", "RRDBNet", "x4", "(16.7M)",
                                         "4fa0d38905f75ac0...", "yes"]  # its size: its card's
    assert rows["realesr-general-x4v3"][-1] == "no"
    assert rows["RCAN_BIX4-official"][-3:] == ["unknown", "by", "hand"]
    assert f"cache folder: {tmp_path / 'models'} (SRGRAD_HOME moves it)" in out


def test_name_and_hash_arguments_are_checked(tmp_path, capsys):
    from framework.engine.commands.cli import infer_main
    (tmp_path / "a.png").write_bytes(b"")
    base = ["-i", str(tmp_path / "a.png"), "-o", str(tmp_path / "b.png")]
    assert infer_main(["-n", "RealESRGAN_x8", *base]) == 2
    assert "-n RealESRGAN_x8: not a published model srgrad knows" in capsys.readouterr().err
    assert infer_main(["-n", "realesr-general-x4v3", "-dn", "1.5", *base]) == 2
    assert "-dn must be in [0, 1]" in capsys.readouterr().err
    weights = tmp_path / "w.pth"
    weights.write_bytes(b"not these")
    assert infer_main(["--weights", str(weights), "--sha256", "ab", *base]) == 2
    assert "--sha256 must be 64 hex digits" in capsys.readouterr().err
    assert infer_main(["--weights", str(weights), "--sha256", "a" * 64, *base]) == 1
    assert f"--weights {weights}: its sha256 is " in capsys.readouterr().err


def test_eval_and_export_take_a_name_too(server, monkeypatch, tmp_path, capsys):
    from framework.engine.commands.cli import eval_main
    from framework.engine.commands.export import main as export_main
    from PIL import Image
    spec, _ = _srvgg_pth(tmp_path / "a.pth", 1)
    _publish(monkeypatch, server, "gen", (tmp_path / "a.pth").read_bytes(), spec=spec)
    hr = tmp_path / "hr"
    hr.mkdir()
    rng = np.random.default_rng(5)
    Image.fromarray(rng.integers(0, 256, (24, 28, 3), dtype=np.uint8)).save(hr / "a.png")
    monkeypatch.chdir(tmp_path)
    assert eval_main(["-n", "gen", "--input", str(hr), "--no-progress"]) == 0
    assert (tmp_path / "results" / "gen" / "metrics.csv").exists()  # under ./results, not the cache
    pytest.importorskip("onnx")
    assert export_main(["-n", "gen", "--output", str(tmp_path / "gen.onnx")]) == 0
    assert server.paths == ["/gen.pth"]  # downloaded once
