"""curves.png: every loss term and a GAN discriminator's outputs, not only the total loss."""
import pytest
from PIL import Image

from framework.engine.run.runlog import MetricsLog, curve_panels, plot_curves

GAN = ["iteration", "time_s", "loss", "lr", "l_g_pix", "l_g_percep", "l_g_style", "l_g_gan",
       "l_d_real", "l_d_fake", "out_d_real", "out_d_fake", "psnr_y", "bicubic_psnr_y"]


def _gan_log(tmp_path):
    log = MetricsLog(tmp_path / "metrics.csv", GAN)
    for it in (1, 2, 3, 4):
        log.write(iteration=it, time_s=0.1 * it, loss=1.0 / it, lr=1e-4, l_g_pix=0.5 / it,
                  l_g_percep=0.3 / it, l_g_gan=0.7, l_d_real=0.6, l_d_fake=0.65,
                  out_d_real=0.2 * it, out_d_fake=-0.1 * it)  # style never logged (weight 0)
    log.write(iteration=4, psnr_y=24.5, bicubic_psnr_y=24.0)
    return log


def test_a_gan_runs_curves_hold_every_term_and_the_discriminators_outputs(tmp_path):
    panels = curve_panels(_gan_log(tmp_path).read(), "psnr_y", "bicubic_psnr_y")
    assert [p["ylabel"] for p in panels] == ["training loss", "discriminator output (mean)",
                                            "validation PSNR, Y (dB)"]
    losses = {label: ys for label, _, ys in panels[0]["series"]}
    assert list(losses) == ["loss", "l_g_pix", "l_g_percep", "l_g_gan", "l_d_real", "l_d_fake"]
    assert losses["l_g_pix"] == pytest.approx([0.5, 0.25, 0.5 / 3, 0.125], rel=1e-5)  # 6 digits
    assert panels[0]["log"]
    outputs = {label: (xs, ys) for label, xs, ys in panels[1]["series"]}
    assert outputs["out_d_fake"] == ([1, 2, 3, 4], [pytest.approx(-0.1 * i) for i in (1, 2, 3, 4)])
    assert not panels[1]["log"]
    assert [(label, xs, ys) for label, xs, ys in panels[2]["series"]] == [
        ("model", [4.0], [24.5]), ("bicubic", [4.0], [24.0])]


def test_the_png_has_a_panel_each(tmp_path):
    pytest.importorskip("matplotlib")
    assert plot_curves(_gan_log(tmp_path), tmp_path / "gan.png", "psnr_y", "bicubic_psnr_y")
    assert Image.open(tmp_path / "gan.png").size == (1500, 350)  # three 5-inch panels at 100 dpi
    sr = MetricsLog(tmp_path / "sr.csv", ["iteration", "time_s", "loss", "lr"])
    sr.write(iteration=1, loss=0.5, lr=1e-3)
    assert plot_curves(sr, tmp_path / "sr.png")
    assert Image.open(tmp_path / "sr.png").size == (500, 350)
