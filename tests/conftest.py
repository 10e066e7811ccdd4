"""Shared test helpers: float64 leaf tensors, smooth test images, a tiny training config, the name a
killed write leaves, a loopback HTTP server."""
import contextlib
import os
import subprocess
import sys
import textwrap

# The race tests (tests/framework/functional/test_parallel.py) need two numba threads even on a
# one-core machine; set before numba is imported.
if (os.cpu_count() or 1) < 2:
    os.environ.setdefault("NUMBA_NUM_THREADS", "2")
# numba's OpenMP layer and torch share libgomp: with OpenMP's default (active) waiting, numba's idle
# threads spin and the torch twins' backward passes run 10-30x slower. Tests time nothing: wait
# passively.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
# srgrad-train's precompile children (engine/run/precompile.py) would start for every tiny test config;
# tests/framework/engine/test_precompile.py turns them on where it tests them.
os.environ["SRGRAD_PRECOMPILE"] = "0"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

import framework as sg  # noqa: E402
from framework.io import atomic  # noqa: E402


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def t64(rng, *shape, positive=False, requires_grad=True):
    """A float64 leaf tensor of standard normals (or values in [0.5, 2) when positive)."""
    a = rng.uniform(0.5, 2.0, shape) if positive else rng.standard_normal(shape)
    return sg.tensor(a, requires_grad=requires_grad, dtype=np.float64)


def smooth_image(rng, h, w, channels=3):
    """uint8 (h, w, channels) of low-frequency waves plus a little noise: SR has something to learn."""
    y, x = np.mgrid[0:h, 0:w] / max(h, w)
    planes = [0.5 + 0.35 * np.sin(2 * np.pi * (fx * x + fy * y) + ph)
              + 0.05 * rng.standard_normal((h, w))
              for fx, fy, ph in rng.uniform(1, 6, (channels, 3))]
    return (np.clip(np.stack(planes, -1), 0, 1) * 255).round().astype(np.uint8)


@pytest.fixture(scope="session")
def tiny_train(tmp_path_factory):
    """A folder of three 16x16 RGB PNGs."""
    root = tmp_path_factory.mktemp("tiny_train")
    rng = np.random.default_rng(0)
    for i in range(3):
        Image.fromarray(smooth_image(rng, 16, 16)).save(root / f"t{i}.png")
    return root


def tiny_config_text(train_root, run_root, iters=6, every=1, keep=2, extra="", train_extra=""):
    """A tiny ESPCN x2 run: 8x8 crops, batch 2, Adam + cosine schedule, no validation set.
    `train_extra` is added to the datasets.train mapping (e.g. ", bad_files: skip")."""
    return textwrap.dedent(f"""\
        name: tiny
        scale: 2
        seed: 5
        run_root: {run_root}
        model: {{type: ESPCN, num_feat: [4, 4]}}
        datasets:
          train: {{type: HRImageDataset, root: {train_root}, gt_size: 8{train_extra}}}
        train:
          total_iters: {iters}
          batch_size: 2
          optimizer: {{type: Adam, lr: 1e-2}}
          scheduler: {{type: CosineAnnealingLR, T_max: {iters}, eta_min: 1e-4}}
          log_every: 1
        checkpoint: {{every: {every}, keep: {keep}}}
        """) + extra


@pytest.fixture
def make_tiny_config(tmp_path, tiny_train):
    """make_tiny_config(name="cfg.yaml", train_root=tiny_train, **tiny_config_text keywords) ->
    path; run_root is tmp_path/runs."""
    def make(name="cfg.yaml", train_root=None, **kw):
        path = tmp_path / name
        path.write_text(tiny_config_text(train_root or tiny_train, tmp_path / "runs", **kw))
        return path
    return make


def dead_pid() -> int:
    """The PID of a process that has ended (and been reaped)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    return int(child.stdout)


def partial_name(name: str, pid=None, host=None) -> str:
    """The temporary name framework.io.atomic gives a write of `name` by process `pid` (default: one
    that has ended, i.e. what a killed write leaves behind) on `host` (default: this machine)."""
    pid = dead_pid() if pid is None else pid
    return f".{name}.{host or atomic._HOST}-{pid}-{'0' * 16}{atomic.TEMP_SUFFIX}"


@contextlib.contextmanager
def loopback_server(handler, monkeypatch, **attrs):
    """An http.server.ThreadingHTTPServer with `handler` on 127.0.0.1 (a free port) in a thread,
    `attrs` set on it and `.url` its root; the environment's proxies are removed (urllib would
    send a loopback request to them). For the download tests: never the real network."""
    import http.server
    import threading
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                 "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    for key, value in attrs.items():
        setattr(httpd, key, value)
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    # (a short poll: shutdown() waits up to one interval, 0.5 s by default, per test)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def refused_url(path: str = "/model.pth") -> str:
    """A loopback URL with nothing listening: connection refused, as offline."""
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"
