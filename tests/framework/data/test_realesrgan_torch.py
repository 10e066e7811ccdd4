"""`degrade` and RealESRGANDataset against a torch re-implementation of Real-ESRGAN's feed_data
(tests/twins/realesrgan.py, DiffJPEG included) with every random draw forced to the same values
on both sides: the kernels, the noise fields (recorded as srgrad draws them) and the trace's
factors, modes, qualities and order. In float64 the LR images are the same 8-bit levels; the
dataset's float32 samples agree to float32 tolerance."""
import numpy as np
import pytest
from PIL import Image

from framework.data import RealESRGANDataset, degrade
from framework.data import realesrgan as R
from framework.data.degradations import gaussian_kernel1d
from framework.data.degradations import noise as N

torch = pytest.importorskip("torch")
from tests.twins import realesrgan as twin  # noqa: E402


@pytest.fixture
def recorder(monkeypatch):
    """Records each blur kernel degrade applies and each noise field it adds, in order."""
    seen = {"kernels": [], "noise": []}
    filter2d, gaussian, poisson = R.filter2d, N.generate_gaussian_noise, N.generate_poisson_noise

    def record_filter(img, kernel, *args, **kwargs):
        seen["kernels"].append(np.array(kernel, np.float64))
        return filter2d(img, kernel, *args, **kwargs)

    def recording(fn):
        def wrapper(*args, **kwargs):
            out = fn(*args, **kwargs)
            seen["noise"].append(np.array(np.broadcast_to(out, args[0].shape)))
            return out
        return wrapper

    monkeypatch.setattr(R, "filter2d", record_filter)
    monkeypatch.setattr(N, "generate_gaussian_noise", recording(gaussian))
    monkeypatch.setattr(N, "generate_poisson_noise", recording(poisson))
    return seen


def forced(seen: dict, trace: dict, dtype) -> dict:
    """The twin's draws from what degrade recorded and traced."""
    kernels = iter(seen["kernels"])

    def t(a):
        return torch.tensor(np.asarray(a, dtype))
    draws = {"kernel1": t(next(kernels)),
             "kernel2": None if trace["kernel2"] == "none" else t(next(kernels)),
             "sinc": None if trace["final_sinc_size"] is None else t(next(kernels)),
             "noise1": t(seen["noise"][0][None]), "noise2": t(seen["noise"][1][None])}
    assert next(kernels, None) is None and len(seen["noise"]) == 2
    for key in ("resize1_scale", "resize1_mode", "resize2_scale", "resize2_mode",
                "final_resize_mode", "jpeg1_quality", "jpeg2_quality", "final_order"):
        draws[key] = trace[key]
    return draws


def test_degrade_is_real_esrgan_s_feed_data_in_float64(recorder):
    rng = np.random.default_rng(0)
    gt = np.clip(np.kron(rng.random((3, 12, 10)), np.ones((8, 8)))
                 + 0.05 * rng.standard_normal((3, 96, 80)), 0, 1)
    seen_values = set()
    options = {"sinc_prob": 0.3, "sinc_prob2": 0.3}  # sinc kernels in both orders too
    for seed in range(10):
        recorder["kernels"].clear()
        recorder["noise"].clear()
        trace = {}
        lq = degrade(gt, np.random.default_rng(seed), options, 4, trace=trace)
        want = twin.degrade(torch.tensor(gt[None]), forced(recorder, trace, np.float64), 4)
        # both float64: the same 8-bit levels (a level apart would be 1/255)
        np.testing.assert_allclose(lq, want.numpy()[0], rtol=0, atol=1e-9, err_msg=f"seed {seed}")
        seen_values |= {trace["final_order"], trace["noise1"], trace["noise2"], trace["kernel1"],
                        trace["kernel2"], trace["resize1_mode"], trace["resize2_mode"],
                        trace["final_resize_mode"], trace["final_sinc_size"] is None}
    # the seeds cover both orders, both noises, every resize mode, sinc and no sinc, a second
    # blur and none, a first resize and a keep
    assert {"resize_sinc_then_jpeg", "jpeg_then_resize_sinc", "gaussian", "poisson", "area",
            "bilinear", "bicubic", "sinc", "none", None, True, False} <= seen_values


def test_dataset_sample_is_real_esrgan_s_lr_image(recorder, tmp_path):
    """RealESRGANDataset (float32, gt_usm: the LR is degraded from the sharpened HR, as
    RealESRNetModel with gt_usm: True) against the twin in float32 and in float64: as close to
    the float64 LR as torch's own float32 run is (float32 rounding can move a DCT coefficient of
    either across a rounding boundary, which changes a block)."""
    rng = np.random.default_rng(1)
    art = (np.clip(np.kron(rng.random((12, 12, 3)), np.ones((8, 8, 1)))
                   + 0.04 * rng.standard_normal((96, 96, 3)), 0, 1) * 255).astype(np.uint8)
    Image.fromarray(art).save(tmp_path / "hr.png")
    ds = RealESRGANDataset(tmp_path, scale=4, gt_size=96, crop_pad_size=96, use_flip=False,
                           gt_usm=True)  # the crop is the whole image: the LR is all of it
    g = gaussian_kernel1d(51)
    hr = art.transpose(2, 0, 1)[None] / np.float32(255)  # the crop is the whole image, unflipped
    sharp = {dtype: twin.usm_sharp(torch.tensor(hr.astype(dtype)),
                                   torch.tensor(np.outer(g, g).astype(dtype)))
             for dtype in (np.float32, np.float64)}
    ours, twin32, twin64 = [], [], []
    for seed in range(6):
        recorder["kernels"].clear()
        recorder["noise"].clear()
        trace = {}
        sample = ds.get(0, np.random.default_rng(seed), trace=trace)
        assert sample["gt"].tobytes() == hr[0].tobytes()
        ours.append(sample["lq"])
        for dtype, out in ((np.float32, twin32), (np.float64, twin64)):
            out.append(twin.degrade(sharp[dtype], forced(recorder, trace, dtype), 4).numpy()[0])
    ours, twin32, twin64 = np.array(ours), np.array(twin32), np.array(twin64, np.float32)
    levels = 255 * np.abs(ours - twin64)
    torch_levels = 255 * np.abs(twin32 - twin64)
    assert np.mean(levels > 0.5) <= max(2 * np.mean(torch_levels > 0.5), 0.01)
    assert levels.mean() <= max(2 * torch_levels.mean(), 0.01)
