"""scripts/bench_gan.py times the same work on both sides: one float64 step of srgrad's GAN trainer
(and of the benchmark's generator + discriminator parts + EMA) leaves the generator, the
discriminator (weights and spectral-norm vectors) and the EMA where Real-ESRGAN's
optimize_parameters on the torch twins leaves them, with the same logged loss values."""
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
bench_gan = pytest.importorskip("bench_gan")


def _close(ours, theirs, what, rtol=1e-9):
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
    err = np.abs(np.asarray(ours) - theirs).max()
    assert err <= rtol * max(np.abs(theirs).max(), 1e-12), f"{what}: {err:.3g}"


def _same_networks(ours, theirs, tag):
    t = ours.trainer.recipe
    moved = False
    for k, v in theirs.g.state_dict().items():
        _close(t.model.state_dict()[k], v, f"{tag} G {k}")
    for k, v in theirs.d.state_dict().items():  # weight_orig and the spectral norms' u, v
        _close(t.net_d.state_dict()[k], v, f"{tag} D {k}")
    for k, v in theirs.ema.items():
        _close(t.ema.state_dict()[k], v, f"{tag} EMA {k}")
        moved |= not np.array_equal(v.numpy(), t.model.state_dict()[k])
    assert moved  # the EMA lags the weights: the comparison is not of untouched copies


@pytest.mark.parametrize("perceptual", [True, False])
def test_one_step_equals_realesrgans_on_torch_twins(tmp_path, perceptual):
    torch.set_num_threads(1)
    ours, theirs = bench_gan.build(tmp_path, batch=2, gt=16, perceptual=perceptual, dtype="float64")
    assert ours.trainer.model.state_dict()["body.0.weight"].dtype == np.float64
    before = {k: v.copy() for k, v in ours.trainer.recipe.net_d.state_dict().items()}
    mine, log = ours.step(), theirs.step()
    assert set(log) == {"l_g_pix", "l_g_gan", "l_d_real", "l_d_fake", "out_d_real", "out_d_fake"} \
        | ({"l_g_percep"} if perceptual else set())
    for k in log:
        _close(mine[k], log[k], k)
    after = ours.trainer.recipe.net_d.state_dict()
    assert any(not np.array_equal(before[k], v) for k, v in after.items())
    _same_networks(ours, theirs, "step")

    # the parts the benchmark times separately, on a second trainer (same seed, same weights)
    parts = bench_gan.Ours(bench_gan.make_trainer(tmp_path, tmp_path / "vgg19-random.pth", 2, 16,
                                                  perceptual, "float64"), ours.batch)
    parts.discriminator_part(parts.generator_part())
    parts.trainer.recipe.ema.update()
    _same_networks(parts, theirs, "parts")
