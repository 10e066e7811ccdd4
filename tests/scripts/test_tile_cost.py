"""scripts/tile_cost.py: the pixels a tiled run carries (the ratio its timings are judged by) and
the six images of 179-566 px it times."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
tile_cost = pytest.importorskip("tile_cost")


def test_pixel_factor_counts_every_tile_with_its_context():
    # 256 px at tile 64, overlap 16: contexts of 80, 96, 96, 80 px per axis
    assert tile_cost.pixel_factor([(None, 256, 256)], 64) == pytest.approx((352 / 256) ** 2)
    assert tile_cost.pixel_factor([(None, 256, 256)], None) == 1.0
    assert tile_cost.pixel_factor([(None, 100, 50), (None, 256, 256)], 256) == 1.0


def test_the_images_are_the_bundled_ones_at_179_to_566_px(tmp_path):
    images = tile_cost.make_images(tmp_path)
    assert len(images) == 6
    assert sorted(max(h, w) for _, h, w in images) == [179, 256, 320, 400, 480, 566]
    assert [p.name for p, _, _ in tile_cost.make_images(tmp_path / "one", ["brick"])] == \
        ["brick.png"]
