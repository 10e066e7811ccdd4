"""srgrad's numba kernels give bit-identical results whatever instruction set LLVM compiles them for
(docs/numerics.md; the `_jit` policy in docs/architecture.md): no fastmath, so no reassociation and no
FMA contraction, and a wider vector only runs more of the same elementwise operations at once. This
test compiles the conv (a depthwise one of a channels-last view too) / resample / loss / activation /
DiffJPEG kernels for a lower target (AVX2 on an AVX-512 CPU, generic x86-64 elsewhere) in a child
process and compares every output and gradient bit for bit with this process's. Only numba's target differs: numpy and OpenBLAS are the same in both processes,
so any difference is the kernels'. Exact resume on another machine relies on this (and on OpenBLAS's
kernel: docs/numerics.md)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

_PROGRAM = r"""
import sys
import numpy as np
import framework as sg
import framework.functional as F

def run():
    rng = np.random.default_rng(7)
    out = {}
    for dt in (np.float32, np.float64):
        def t(*shape, scale=1.0):
            return sg.tensor((rng.standard_normal(shape) * scale).astype(dt), requires_grad=True)
        x, big = t(2, 16, 12, 12), t(1, 16, 44, 44)          # the direct route: 8 x 32 blocks or 6 x 16
        w, w1 = t(16, 16, 3, 3, scale=0.1), t(8, 16, 1, 1, scale=0.3)
        y = F.conv2d(x, w, padding=1, relu_slope=0.2)
        y2 = F.conv2d(big, w, padding=1)
        y3 = F.conv_transpose2d(F.conv2d(y, w1), t(8, 4, 4, 4, scale=0.2), stride=2, padding=1)
        r = [F.interpolate(y3, scale_factor=s, mode=m, antialias=a)
             for s, m, a in ((1.7, "bicubic", False), (0.6, "bilinear", True), (0.5, "area", False),
                             (2.0, "lanczos", False), (1.3, "nearest-exact", False))]
        lr = F.imresize(y2, scale_factor=0.25)
        act = [F.gelu(r[0]), F.tanh(r[1]), F.sigmoid(r[2]), F.softmax(r[3], -1), F.log_softmax(lr, 1)]
        jpg = F.diff_jpeg(F.sigmoid(y2[:, :3]), [37.5])      # DiffJPEG's colour and block kernels
        tokens = sg.tensor(np.ascontiguousarray(y2.data.transpose(0, 2, 3, 1)), requires_grad=True)
        dw = F.conv2d(tokens.permute(0, 3, 1, 2), t(16, 1, 3, 3), padding=1, groups=16)  # channels last
        loss = (F.l1_loss(act[0], r[0] * 0.5) + F.mse_loss(act[1], r[1] * 0.3) + jpg.mean()
                + F.charbonnier_loss(act[4], lr * 0.1) + (act[2] * r[2]).mean()
                + (act[3] * r[3]).mean() + (y2 * y2).mean() + r[4].sum() * 1e-3 + (dw * dw).mean())
        loss.backward()
        for name, v in (("y", y), ("y2", y2), ("y3", y3), ("lr", lr), ("loss", loss), ("x", x),
                        ("big", big), ("w", w), ("w1", w1), ("dw", dw), ("tokens", tokens)):
            out[f"{name}_{dt.__name__}"] = v.data
            if v.grad is not None:
                out[f"d{name}_{dt.__name__}"] = v.grad.data
        for i, v in enumerate(r + act + [jpg]):
            out[f"op{i}_{dt.__name__}"] = v.data
    return out

if __name__ == "__main__":
    np.savez(sys.argv[1], **run())
"""


def _lower_target() -> dict:
    with open("/proc/cpuinfo") as f:
        avx512 = " avx512f" in f.read()
    return {"NUMBA_CPU_NAME": "haswell" if avx512 else "x86-64", "NUMBA_CPU_FEATURES": ""}


def test_kernels_are_bit_identical_across_instruction_sets(tmp_path):
    program = tmp_path / "kernels.py"
    program.write_text(_PROGRAM)
    env = {**os.environ, **_lower_target(), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, str(program), str(tmp_path / "lower.npz")], env=env, cwd=ROOT,
                   check=True, timeout=600)
    sys.path.insert(0, str(tmp_path))
    try:
        import kernels
        here = kernels.run()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("kernels", None)
    lower = np.load(tmp_path / "lower.npz")
    assert sorted(lower.files) == sorted(here)
    differ = [k for k in here if here[k].dtype != lower[k].dtype or here[k].shape != lower[k].shape
              or here[k].tobytes() != lower[k].tobytes()]
    assert not differ, f"kernels compiled for {_lower_target()['NUMBA_CPU_NAME']} differ in {differ}"
