"""KernelGAN's estimator (framework/engine/zeroshot/kernelgan.py) and its crops
(framework/data/kernelgan.py): the regularisers' values against KernelGAN's formulas written out,
their gradients, the schedule of the weights and learning rates, the crops by gradient
probability (pure in seed and iteration, drawn where the edges are), and a few real steps."""
import math

import numpy as np
import pytest

from framework import Tensor
from framework.data.kernelgan import KernelGANCrops, gradient_map, probability_map
from framework.engine.zeroshot.kernelgan import KernelGAN, Schedule, estimate_kernel, kernel_losses, \
    penalty_mask
from framework.gradcheck import gradcheck


def _official_mask(k, scale=30.0):
    """util.create_penalty_mask, in plain Python (math.exp)."""
    g = [math.exp(-z ** 2 / (2 * k ** 2)) / math.sqrt(2 * math.pi * k ** 2)
         for z in range(-k // 2 + 1, k // 2 + 1)]
    peak = max(g) ** 2
    mask = [[1 - a * b / peak for b in g] for a in g]
    margin = (k - (k // 2 + k % 2)) // 2 - 1
    for i in range(margin, k - margin):
        for j in range(margin, k - margin):
            mask[i][j] = 0.0
    return scale * np.array(mask)


@pytest.mark.parametrize("k", [13, 11])
def test_penalty_mask_is_kernelgans(k):
    np.testing.assert_allclose(penalty_mask(k), _official_mask(k), rtol=1e-13, atol=1e-13)
    assert penalty_mask(k)[k // 2, k // 2] == 0 and penalty_mask(k)[0, 0] > 0


def _losses(k):
    return {n: float(v.item()) for n, v in
            kernel_losses(Tensor(k), 2, penalty_mask(k.shape[0])).items()}


def test_regulariser_values():
    delta = np.zeros((13, 13))
    delta[6, 6] = 1.0
    out = _losses(delta)
    assert out["sum2one"] == 0.0 and out["boundaries"] == 0.0
    # x2: the wanted centre of mass is 6.5 (between pixels); a delta at 6 is half a pixel off
    assert out["centralized"] == pytest.approx(0.25, abs=1e-15)
    assert out["sparse"] == pytest.approx(1 / 169, rel=1e-12)
    box = np.zeros((13, 13))
    box[6:8, 6:8] = 0.5  # sum 2, centred on 6.5
    out = _losses(box)
    assert out["sum2one"] == pytest.approx(1.0, abs=1e-15)
    assert out["centralized"] == pytest.approx(0.0, abs=1e-20)
    assert out["sparse"] == pytest.approx(4 * 0.5 ** 0.2 / 169, rel=1e-12)
    corner = np.zeros((13, 13))
    corner[0, 0] = 1.0
    assert _losses(corner)["boundaries"] == pytest.approx(_official_mask(13)[0, 0] / 169, rel=1e-12)


def test_regulariser_gradients(rng):
    k = Tensor(rng.random((13, 13)) + 0.1, requires_grad=True)
    mask = penalty_mask(13)
    for name in ("sum2one", "boundaries", "centralized", "sparse"):
        gradcheck(lambda t, n=name: kernel_losses(t, 2, mask)[n], (k,))


class _Opt:
    def __init__(self):
        self.param_groups = [{"lr": 2e-4}]


class _Gan:
    def __init__(self):
        self.lambdas = {"bicubic": 5.0, "sum2one": 0.5, "boundaries": 0.5, "centralized": 0.0,
                        "sparse": 0.0}
        self.optimizer_g, self.optimizer_d = _Opt(), _Opt()
        self.loss_bicubic = 1.0


def test_schedule_follows_kernelgans_learner():
    gan, sched = _Gan(), Schedule()
    for it in range(1, 4):  # above 0.4: nothing changes
        sched.update(it, gan)
    assert not sched.similar_to_bicubic
    gan.loss_bicubic = 0.3
    for it in range(4, 7):  # three times below 0.4 in a row
        sched.update(it, gan)
    assert sched.similar_to_bicubic and gan.lambdas["bicubic"] == 5.0
    for it in range(7, 801):
        sched.update(it, gan)
        if it == 200:
            assert gan.lambdas["bicubic"] == pytest.approx(0.05)
            assert gan.lambdas["sparse"] == 0.0
        if it == 400:  # 5e-4 < 5e-3: the constraints come in
            assert gan.lambdas["bicubic"] == pytest.approx(5e-4)
            assert gan.lambdas["centralized"] == 1.0 and gan.lambdas["sparse"] == 5.0
    assert gan.lambdas["bicubic"] == 5e-6  # floored at lambda_bicubic_min
    assert gan.optimizer_g.param_groups[0]["lr"] == pytest.approx(2e-5)  # / 10 at 750
    assert gan.optimizer_d.param_groups[0]["lr"] == pytest.approx(2e-5)


def test_probability_map_keeps_crops_inside():
    prob = probability_map(np.ones((40, 50)), 20).reshape(40, 50)
    assert prob.sum() == pytest.approx(1.0)
    assert prob[:10].sum() == 0 and prob[:, -10:].sum() == 0 and prob[20, 25] > 0


def _edge_image():
    """Flat grey except a textured square at rows/columns 60..90 of 120."""
    img = np.full((3, 120, 120), 0.5, np.float32)
    img[:, 60:90, 60:90] = np.random.default_rng(3).random((3, 30, 30))
    return img


def test_gradient_map_finds_the_edges():
    m = gradient_map(_edge_image())
    assert m.mean() == pytest.approx(1.0)
    assert m[65:85, 65:85].mean() > 5 * m[:40, :40].mean()


def test_crops_are_pure_and_drawn_where_the_edges_are():
    img = _edge_image()
    a = KernelGANCrops(img, 2, 32, 13, seed=5, real_image=True)
    b = KernelGANCrops(img, 2, 32, 13, seed=5, real_image=True)
    g1, d1 = a.crops(7)
    g2, d2 = b.crops(7)
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_array_equal(d1, d2)
    assert not np.array_equal(a.crops(8)[0], g1)
    assert g1.shape == (1, 3, 32, 32) and d1.shape == (1, 3, 13, 13)
    assert g1.min() >= -1 and g1.max() <= 1
    # every D crop overlaps the textured square (the flat rest has no gradient at all)
    textured = 0
    for it in range(20):
        _, d = a.crops(it)
        textured += float(np.std(d)) > 0.05
    assert textured == 20


def test_a_few_steps_and_the_kernel_file_form(rng):
    img = _edge_image()
    gan = KernelGAN(img, 2, seed=0, G_chan=8, D_chan=8, input_crop_size=32)
    k0 = gan.kernel()
    values = [gan.step(it) for it in range(3)]
    assert all(np.isfinite(list(v.values())).all() for v in values)
    assert np.abs(gan.kernel() - k0).max() > 0
    k = gan.finish()
    assert k.shape[0] % 2 == 1 and k.shape[0] == k.shape[1]
    assert k.sum() == pytest.approx(1.0, abs=1e-12)
    c = k.shape[0] // 2  # the centre of mass on the centre tap
    com = [(k.sum(axis=1 - a) * np.arange(k.shape[0])).sum() for a in (0, 1)]
    np.testing.assert_allclose(com, [c, c], atol=0.05)


def test_refusals():
    with pytest.raises(ValueError, match="x2 kernels"):
        KernelGAN(_edge_image(), 4)
    with pytest.raises(ValueError, match="smaller than"):
        KernelGAN(np.zeros((3, 40, 40), np.float32), 2)
    with pytest.raises(ValueError, match="image must be"):
        KernelGAN(np.zeros((40, 40), np.float32), 2)
    with pytest.raises(ValueError, match="iters"):
        estimate_kernel(_edge_image(), iters=0)


def test_mean_kernel_centres_pads_and_averages():
    from framework.data.degradations import bivariate_Gaussian
    from framework.data.degradations.kernel_file import centre_kernel
    from framework.engine.zeroshot.kernelgan import mean_kernel
    a = bivariate_Gaussian(13, 2.0, 0.8, 0.3, isotropic=False)
    b = np.pad(bivariate_Gaussian(9, 1.0, 1.0, 0.0, isotropic=True), ((0, 4), (4, 0)))  # off-centre
    m = mean_kernel([a, b])
    # b is moved to its centre and padded to a's 13 taps before the mean
    want = (centre_kernel(a) + np.pad(centre_kernel(b), (13 - centre_kernel(b).shape[0]) // 2)) / 2
    np.testing.assert_allclose(m, centre_kernel(want), rtol=0, atol=1e-15)
    assert m.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(mean_kernel([a]), centre_kernel(a), rtol=0, atol=1e-15)


def test_restarts_are_the_mean_of_the_seeds_runs_on_one_thread():
    from framework.engine.zeroshot.kernelgan import mean_kernel
    from framework.threads import get_num_threads
    img, seen, threads = _edge_image(), [], get_num_threads()
    k = estimate_kernel(img, iters=2, seed=5, restarts=2,
                        on_step=lambda it, v: seen.append((it, get_num_threads())))
    assert seen == [(0, 1), (1, 1), (2, 1), (3, 1)]  # counted across the runs, on one thread
    assert get_num_threads() == threads               # and the count is put back
    runs = []
    for seed in (5, 6):
        gan = KernelGAN(img, 2, seed=seed)
        for it in range(2):
            gan.step(it)
        runs.append(gan.finish())
    assert not np.array_equal(runs[0], runs[1])  # two seeds, two different runs
    np.testing.assert_allclose(k, mean_kernel(runs), rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match="restarts"):
        estimate_kernel(img, iters=1, restarts=0)
