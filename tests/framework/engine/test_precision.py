"""train.precision and --bf16: bfloat16 training that learns and resumes exactly, the refusal where
the CPU lacks it, and inference's measured difference to float32."""
import re

import numpy as np
import pytest

import framework as sg
import framework.functional as F
import models  # noqa: F401  registers the architectures
from framework import nn, precision
from framework.engine import Trainer, build_model
from framework.engine.commands.cli import infer_main
from framework.engine.config.schema import load_config
from framework.io.config import ConfigError
from framework.nn import init
from framework.optim import Adam
from framework.weights import checkpoint as ckpt
from framework.weights import save_weights
from tests.framework.engine.test_cli_infer import _png

HAS_BF16 = precision.support().avx512_bf16
needs_bf16 = pytest.mark.skipif(not HAS_BF16, reason=f"bfloat16 kernels: {precision.support().reason}")
# convs the bfloat16 route takes: 16 -> 16 (AMX where present), 16 -> 12 (the x2 upsampler)
MODEL = "{type: SRVGGNetCompact, num_feat: 16, num_conv: 2}"
SPEC = {"type": "SRVGGNetCompact", "num_feat": 16, "num_conv": 2, "scale": 2}
NO_BF16 = precision.Support(False, False, "this CPU has no AVX512-BF16")


def _fit(p, steps=40):
    """Loss before and after `steps` Adam steps of a small conv net under autocast(p)."""
    rng = np.random.default_rng(0)
    xa = rng.uniform(0, 1, (4, 16, 10, 10)).astype(np.float32)
    x, target = sg.tensor(xa), sg.tensor(np.ascontiguousarray(xa[:, ::-1] * 0.5 + 0.25))  # learnable
    init.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 16, 3, padding=1))
    opt = Adam(net.parameters(), lr=3e-3)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with sg.autocast(p):
            loss = F.mse_loss(net(x), target)
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    return losses


@needs_bf16
def test_bf16_training_learns_and_ends_near_fp32():
    low, full = _fit("bf16"), _fit("fp32")
    assert low[-1] < 0.1 * low[0]
    assert abs(low[-1] - full[-1]) <= 0.01 * full[-1]  # measured 0.05% on an AMX Xeon
    assert low != full  # bfloat16 ran: the operands were rounded


def test_precision_key_is_checked(make_config, monkeypatch):
    path = make_config()
    assert load_config(path)["train"]["precision"] == "fp32"
    with pytest.raises(ConfigError, match=r"train.precision: 'fp16' is not one of"):
        load_config(path, ["train.precision=fp16"])
    monkeypatch.setattr(precision, "support", lambda: NO_BF16)
    with pytest.raises(ConfigError, match=r"train.precision: bf16 is not available: this CPU has no AVX512-BF16"):
        load_config(path, ["train.precision=bf16"])


@needs_bf16
def test_bf16_config_with_float64_is_refused(make_config):
    with pytest.raises(ConfigError, match=r"train.precision: bf16 rounds float32 operands; dtype is float64"):
        load_config(make_config(), ["train.precision=bf16", "dtype=float64"])


@needs_bf16
def test_bf16_run_says_its_route_and_resumes_bit_exact(make_config, tmp_path, capsys):
    def fit(name, iters, resume=None):
        cfg = load_config(path, [f"name={name}", f"train.total_iters={iters}", "train.precision=bf16"])
        return Trainer(cfg, progress=False, resume=resume).fit()

    path = make_config(model=MODEL, iters=4, every=2)
    fit("straight", 4)
    assert f"precision: bf16 operands, float32 sums, weights and optimizer state ({precision.route()})" \
        in capsys.readouterr().err
    fit("split", 2)
    fit("split", 4, resume="auto")
    a, _ = ckpt.load_weights(tmp_path / "runs" / "straight" / "net_latest.safetensors")
    b, _ = ckpt.load_weights(tmp_path / "runs" / "split" / "net_latest.safetensors")
    for k in a:
        assert a[k].dtype == np.float32  # checkpoints stay float32
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.fixture
def weights(tmp_path):
    init.manual_seed(0)
    model = build_model(SPEC).eval()
    path = tmp_path / "net.safetensors"
    save_weights(path, model.state_dict(), model=SPEC, scale=2)
    return path


@needs_bf16
def test_infer_bf16_prints_the_measured_difference(weights, tmp_path, capsys):
    src = _png(tmp_path / "a.png", 20, 23)
    assert infer_main(["--weights", str(weights), "-i", str(src), "-o", str(tmp_path / "b.png"), "--bf16",
                       "--no-progress"]) == 0
    out = capsys.readouterr().out
    diff = float(re.search(r"max \|bf16 - fp32\| = (\S+) on \[0, 1\] over a 20x23 LR crop of", out).group(1))
    assert 0 < diff < 0.02


def test_infer_bf16_refused_without_instructions(weights, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(precision, "support", lambda: NO_BF16)
    src = _png(tmp_path / "a.png", 8, 8)
    assert infer_main(["--weights", str(weights), "-i", str(src), "-o", str(tmp_path / "b.png"), "--bf16",
                       "--no-progress"]) == 1
    assert "--bf16: bfloat16 is not available: this CPU has no AVX512-BF16" in capsys.readouterr().err
    assert not (tmp_path / "b.png").exists()


@needs_bf16
def test_precompile_lists_the_bf16_kernels(make_tiny_config):
    from framework.engine.run import precompile
    cfg = load_config(make_tiny_config(), ["train.precision=bf16", "model.num_feat=[32, 16]"])
    names = {f"{d.py_func.__module__.rsplit('.', 1)[-1]}.{d.py_func.__name__}" for d, _ in precompile._dry_run(cfg)}
    assert "_direct_bf16.correlate_tiles" in names  # the 3-channel first conv: AVX512-BF16
    if precision.support().amx_bf16:
        assert {"_direct_amx._forward", "_direct_amx._weight_grad"} <= names
