"""KernelGAN (Bell-Kligler, Shocher, Irani, NeurIPS 2019): estimate an image's own downscaling
kernel from the image alone, as sefibk/KernelGAN's kernelGAN.py, loss.py and learner.py do.

A deep linear generator G (models/kernelgan.py) downscales crops of the image by 2; a patch
discriminator D learns to tell its output's patches from the image's own patches. When D cannot,
G's product kernel is the kernel that downscales the image into a version of itself: the image's
degradation kernel. One iteration (`KernelGAN.step`): G's step on
    gan(D(G(g_in)), real)                          (KernelGAN's GANLoss: L1 against a map of 1s)
    + lambda_bicubic  MSE(G(g_in), bicubic(g_in))  (DownScaleLoss: stay near bicubic at first)
    + lambda_sum2one  |1 - sum k|                  (SumOfWeightsLoss)
    + lambda_boundaries  mean |k * mask|           (BoundariesLoss: mass far from the centre)
    + lambda_centralized  MSE(centre of mass, c)   (CentralizedLoss: c = k // 2 + 0.5 (s - 1))
    + lambda_sparse  mean |k|^0.2                  (SparsityLoss)
then D's step on (gan(D(real), real) + gan(D(G(g_in) + noise), fake)) / 2, both Adam(2e-4,
betas (0.5, 0.999)). The schedule (`Schedule`, learner.py): both learning rates / 10 every 750
iterations; once the bicubic loss is below 0.4 three times running, lambda_bicubic / 100 every 200
iterations (down to 5e-6), and when it falls below 5e-3 the centralisation (1) and sparsity (5)
terms start. The weights start at 5, 0.5, 0.5, 0, 0 (bicubic, sum2one, boundaries, centralized,
sparse). The result (`finish`) is KernelGAN's post_process_k: values below 0.75 x the 41st largest
zeroised (n_filtering 40), then centred and normalised (kernel_file.centre_kernel; KernelGAN also
moves it by half a pixel for x2, which imresize's kernel rule does when it downscales).

One deliberate difference: the bicubic target is MATLAB's x1/2 imresize of each colour plane.
KernelGAN's DownScaleLoss convolves with its 8x8 bicubic kernel expanded to 3 x 3 channels, i.e. the
*sum* of the three planes in every output plane (a slip: its docstring says "an ideal (bicubic)
downscaling"); the kernel is the same (matlab_table's x1/2 weights are KernelGAN's bicubic_k).
"""
from __future__ import annotations

import math

import numpy as np

from ... import functional as F
from ...autograd import no_grad
from ...data.degradations.kernel_file import centre_kernel, zeroize_negligible
from ...data.kernelgan import KernelGANCrops
from ..._check import int_arg
from ...optim import Adam
from ...registry import MODELS
from ...tensor import Tensor

__all__ = ["KernelGAN", "Schedule", "penalty_mask", "kernel_losses", "estimate_kernel",
           "mean_kernel"]


def penalty_mask(k_size: int, penalty_scale: float = 30.0) -> np.ndarray:
    """KernelGAN's create_penalty_mask: penalty_scale x (1 - a wide Gaussian / its peak), zero in
    the central (k // 2 + k % 2 + 2)-square."""
    z = np.arange(-k_size // 2 + 1, k_size // 2 + 1, dtype=np.float64)
    g = np.exp(-z ** 2 / (2 * k_size ** 2)) / np.sqrt(2 * np.pi * k_size ** 2)
    mask = np.outer(g, g)
    mask = 1 - mask / mask.max()
    centre = k_size // 2 + k_size % 2
    margin = (k_size - centre) // 2 - 1
    mask[margin:k_size - margin, margin:k_size - margin] = 0
    return penalty_scale * mask


def kernel_losses(k, scale: int, mask: np.ndarray) -> dict:
    """The regularisers of kernel `k` (a (K, K) Tensor): sum2one, boundaries, centralized,
    sparse (module docstring), as Tensors."""
    size = k.shape[0]
    idx = np.arange(size, dtype=k.dtype)
    total = k.sum()
    rows, cols = k.sum(axis=1), k.sum(axis=0)
    want = size // 2 + 0.5 * (scale - size % 2)
    com_r, com_c = (rows * idx).sum() / total, (cols * idx).sum() / total
    return {
        "sum2one": (total - 1.0).abs(),
        "boundaries": (k * Tensor(mask.astype(k.dtype))).abs().mean(),
        "centralized": ((com_r - want) ** 2 + (com_c - want) ** 2) / 2,
        "sparse": F.pow(k.abs(), 0.2).mean(),
    }


class Schedule:
    """KernelGAN's Learner (module docstring); `update(iteration, gan)` after each iteration."""

    lambda_update_freq = 200
    bic_loss_to_start_change = 0.4
    lambda_bicubic_decay_rate = 100.0
    update_l_rate_freq = 750
    update_l_rate_rate = 10.0
    lambda_sparse_end = 5.0
    lambda_centralized_end = 1.0
    lambda_bicubic_min = 5e-6

    def __init__(self):
        self.bic_loss_counter = 0
        self.similar_to_bicubic = False
        self.insert_constraints = True

    def update(self, iteration: int, gan: "KernelGAN") -> None:
        if iteration == 0:
            return
        if iteration % self.update_l_rate_freq == 0:
            for opt in (gan.optimizer_g, gan.optimizer_d):
                for group in opt.param_groups:
                    group["lr"] /= self.update_l_rate_rate
        if not self.similar_to_bicubic:
            if gan.loss_bicubic < self.bic_loss_to_start_change:
                if self.bic_loss_counter >= 2:
                    self.similar_to_bicubic = True
                else:
                    self.bic_loss_counter += 1
            else:
                self.bic_loss_counter = 0
        elif iteration % self.lambda_update_freq == 0 and \
                gan.lambdas["bicubic"] > self.lambda_bicubic_min:
            gan.lambdas["bicubic"] = max(gan.lambdas["bicubic"] / self.lambda_bicubic_decay_rate,
                                         self.lambda_bicubic_min)
            if self.insert_constraints and gan.lambdas["bicubic"] < 5e-3:
                gan.lambdas["centralized"] = self.lambda_centralized_end
                gan.lambdas["sparse"] = self.lambda_sparse_end
                self.insert_constraints = False


class KernelGAN:
    """The estimator for `image` (C, H, W) in [0, 1] at factor `scale` (2). Args as KernelGAN's
    configs.py: G_structure, G_chan, D_chan, D_kernel_size, D_n_layers, input_crop_size (64),
    g_lr / d_lr (2e-4), beta1 (0.5), n_filtering (40); real_image (no 10-pixel trim); seed (the
    weights and the crops)."""

    def __init__(self, image: np.ndarray, scale: int = 2, *, seed: int = 0,
                 G_structure=(7, 5, 3, 1, 1, 1), G_chan: int = 64, D_chan: int = 64,
                 D_kernel_size: int = 7, D_n_layers: int = 7,
                 input_crop_size: int = 64, g_lr: float = 2e-4, d_lr: float = 2e-4,
                 beta1: float = 0.5, n_filtering: int = 40, real_image: bool = False):
        from ... import nn
        from ..inference.zoo import load_zoo
        load_zoo()  # the networks are models/kernelgan.py's
        image = np.asarray(image)
        if image.ndim != 3 or image.shape[0] not in (1, 3) or not np.all(np.isfinite(image)):
            raise ValueError(f"KernelGAN: image must be a finite (C, H, W) array with 1 or 3 "
                             f"channels, got shape {image.shape}")
        if scale != 2:
            raise ValueError(f"KernelGAN estimates x2 kernels (x4: analytic_kernel of the x2 one), "
                             f"got scale {scale}")
        self.scale, self.n_filtering = scale, n_filtering
        nn.init.manual_seed(seed)
        channels = image.shape[0]
        self.G = MODELS.build({"type": "KernelGANGenerator", "G_structure": list(G_structure),
                               "G_chan": G_chan, "scale_factor": 1.0 / scale})
        self.D = MODELS.build({"type": "KernelGANDiscriminator", "D_chan": D_chan,
                               "D_kernel_size": D_kernel_size, "D_n_layers": D_n_layers,
                               "num_in_ch": channels})
        self.G.train(), self.D.train()
        k = self.G.kernel_size
        g_out = (input_crop_size - k) // scale + 1
        self.shave = (math.ceil(input_crop_size / scale) - g_out) // 2
        self.crops = KernelGANCrops(image, scale, input_crop_size, g_out, seed, real_image)
        self.optimizer_g = Adam(list(self.G.parameters()), lr=g_lr, betas=(beta1, 0.999))
        self.optimizer_d = Adam(list(self.D.parameters()), lr=d_lr, betas=(beta1, 0.999))
        self.lambdas = {"bicubic": 5.0, "sum2one": 0.5, "boundaries": 0.5, "centralized": 0.0,
                        "sparse": 0.0}
        self.mask = penalty_mask(k)
        self.schedule = Schedule()
        self.loss_bicubic = 0.0
        self.seed = seed

    def _gan(self, d_out, real: bool):
        label = np.ones if real else np.zeros
        return (d_out - Tensor(label(d_out.shape, d_out.dtype))).abs().mean()

    def step(self, iteration: int) -> dict:
        """One G step and one D step on the crops of `iteration`, then the schedule."""
        g_np, d_np = self.crops.crops(iteration)
        g_in, d_in = Tensor(g_np), Tensor(d_np)
        # -- G
        self.optimizer_g.zero_grad()
        self.D.requires_grad_(False)
        g_pred = self.G(g_in)
        loss_g = self._gan(self.D(g_pred), True)
        with no_grad():
            bic = F.imresize(g_in, 1.0 / self.scale).data
        s, n = self.shave, g_pred.shape[-1]
        bicubic = ((g_pred - Tensor(bic[..., s:s + n, s:s + n])) ** 2).mean()
        terms = {"bicubic": bicubic, **kernel_losses(self.G.kernel(), self.scale, self.mask)}
        total = loss_g
        for name, value in terms.items():
            if self.lambdas[name]:
                total = total + value * self.lambdas[name]
        total.backward()
        self.optimizer_g.step()
        self.loss_bicubic = float(bicubic.item())
        self.D.requires_grad_(True)
        # -- D: real crops, and G's output (cut from G's graph) with the same 1/255 noise
        self.optimizer_d.zero_grad()
        rng = np.random.default_rng([self.seed, iteration, 0xD])
        with no_grad():
            fake = self.G(g_in).data
        fake = fake + rng.standard_normal(fake.shape).astype(fake.dtype) / 255.0
        loss_d = (self._gan(self.D(Tensor(fake)), False) + self._gan(self.D(d_in), True)) * 0.5
        loss_d.backward()
        self.optimizer_d.step()
        self.schedule.update(iteration, self)
        return {"loss_g": float(loss_g.item()), "loss_d": float(loss_d.item()),
                "loss_bicubic": self.loss_bicubic}

    def kernel(self) -> np.ndarray:
        """G's current kernel (float64), as it is."""
        with no_grad():
            return self.G.kernel().data.astype(np.float64)

    def finish(self) -> np.ndarray:
        """KernelGAN's post_process_k: negligible values zeroised, then centred (odd, sum 1)."""
        return centre_kernel(zeroize_negligible(self.kernel(), self.n_filtering))


def estimate_kernel(image: np.ndarray, iters: int = 3000, seed: int = 0, real_image: bool = False,
                    on_step=None, restarts: int = 1) -> np.ndarray:
    """The x2 kernel of `image` (C, H, W) in [0, 1] after `iters` KernelGAN iterations (3000:
    KernelGAN's max_iters). `on_step(iteration, values)` after each (iterations counted across
    the restarts). Returns the post-processed kernel (centred, sum 1). A KeyboardInterrupt
    propagates (the kernel so far is not a result).

    `restarts` > 1: KernelGAN from seeds seed, seed + 1, ..., and the result is the mean of their
    kernels (each centred, zero-padded to one size), centred again. One run's error is mostly its
    own (its weights and crops are drawn from its seed), so the mean is nearer the truth than a
    typical run, and far nearer than one run of 3x the iterations: the runs stop improving after
    ~1000 iterations (issue 43's sweep, docs/benchmarks.md).

    Its matrices are small (64 channels on 26x26 crops): BLAS and numba run on one thread
    meanwhile. A second thread buys nothing here (16.3 s for 600 iterations on 1 or 2 threads),
    and on a busy machine waiting for it cost 7x (docs/benchmarks.md)."""
    from ...threads import get_num_threads, limit_blas_threads, restore_blas_threads, \
        set_num_threads
    iters = int_arg("estimate_kernel", "iters", iters)
    restarts = int_arg("estimate_kernel", "restarts", restarts)
    previous, threads = limit_blas_threads(1), get_num_threads()
    set_num_threads(1)
    kernels = []
    try:
        for r in range(restarts):
            gan = KernelGAN(image, 2, seed=seed + r, real_image=real_image)
            for it in range(iters):
                values = gan.step(it)
                if on_step is not None:
                    on_step(r * iters + it, values)
            kernels.append(gan.finish())
    finally:
        set_num_threads(threads)
        restore_blas_threads(previous)
    return mean_kernel(kernels)


def mean_kernel(kernels) -> np.ndarray:
    """The mean of (K_i, K_i) kernels, each centred (kernel_file.centre_kernel) and zero-padded to
    the largest, centred again; one kernel comes back centred."""
    kernels = [centre_kernel(k) for k in kernels]
    n = max(k.shape[0] for k in kernels)
    return centre_kernel(sum(np.pad(k, (n - k.shape[0]) // 2) for k in kernels) / len(kernels))
