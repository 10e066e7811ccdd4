"""Bad image input: truncated / corrupt / non-image files, empty folders, images smaller than the
crop, mixed modes in one set, and decompression bombs. Each is a clear error naming the file (or a
warning and a skip when configured), never a traceback or a huge allocation."""
import resource
import struct
import warnings
import zlib

import numpy as np
import pytest
from PIL import Image, ImageFile

from framework.data import HRImageDataset
from framework.engine.commands.cli import train_main
from framework.io import image as image_io
from framework.io.image import image_size, read_image

from tests.conftest import smooth_image


def save(path, rgb_uint8, mode="RGB"):
    Image.fromarray(rgb_uint8).convert(mode).save(path)
    return path


@pytest.fixture
def folder(tmp_path):
    """A folder with two good 16x16 RGB PNGs."""
    root = tmp_path / "images"
    root.mkdir()
    rng = np.random.default_rng(1)
    for i in range(2):
        save(root / f"good{i}.png", smooth_image(rng, 16, 16))
    return root


def train_cli(make_tiny_config, root, capsys, *args, **kw):
    code = train_main([str(make_tiny_config(train_root=root, iters=2, every=2, **kw)), "--no-progress",
                       *args])
    return code, capsys.readouterr().err


# -- truncated, corrupt and non-image files -------------------------------------------------------
def truncated_png(folder, rng):
    data = (folder / "good0.png").read_bytes()
    path = folder / "truncated.png"
    path.write_bytes(data[:len(data) // 2])  # header intact, pixel data cut
    return path


def corrupt_png(folder, rng):
    data = bytearray((folder / "good0.png").read_bytes())
    start = data.index(b"IDAT") + 8
    data[start:start + 40] = rng.integers(0, 256, 40, dtype=np.uint8).tobytes()
    path = folder / "corrupt.png"
    path.write_bytes(bytes(data))
    return path


def truncated_jpeg(folder, rng):
    path = folder / "truncated.jpg"
    Image.fromarray(smooth_image(rng, 16, 16)).save(path, quality=90)
    path.write_bytes(path.read_bytes()[:200])
    return path


def text_as_png(folder, rng):
    path = folder / "notes.png"
    path.write_text("these are my notes, not an image\n")
    return path


def empty_file(folder, rng):
    path = folder / "empty.bmp"
    path.write_bytes(b"")
    return path


BAD = [truncated_png, corrupt_png, truncated_jpeg, text_as_png, empty_file]


@pytest.mark.parametrize("make_bad", BAD)
def test_read_image_names_the_bad_file(folder, make_bad):
    path = make_bad(folder, np.random.default_rng(0))
    with pytest.raises(ValueError, match=rf"^{path}: (corrupt or truncated image|not a readable "
                                         rf"image)"):
        read_image(path)


@pytest.mark.parametrize("make_bad", BAD)
def test_dataset_with_a_bad_file_errors_or_skips_with_a_warning(folder, make_bad):
    path = make_bad(folder, np.random.default_rng(0))
    # default: an error naming the file, found when the data is first read at the latest
    with pytest.raises(ValueError, match=rf"{path}: "):
        ds = HRImageDataset(folder, scale=2, gt_size=8)
        for i in range(len(ds)):
            ds.pair(i)
    # bad_files="skip": a warning naming the file, found up front; the good files remain
    with pytest.warns(UserWarning, match=rf"skipping unreadable image: {path}: "):
        ds = HRImageDataset(folder, scale=2, gt_size=8, bad_files="skip")
    assert ds.names == ["good0.png", "good1.png"]
    assert ds.get(0, np.random.default_rng(0))["gt"].shape == (3, 8, 8)


@pytest.mark.parametrize("make_bad", [truncated_png, text_as_png])
def test_training_on_a_folder_with_a_bad_file(folder, make_bad, make_tiny_config, capsys):
    """Through srgrad-train: an error naming the file and no traceback (a truncated file whose
    header reads may be found only when its pixels are first decoded, mid-run: the message then
    says which batch and that the last checkpoint is intact); with bad_files: skip, a warning and
    the run completes."""
    path = make_bad(folder, np.random.default_rng(0))
    code, err = train_cli(make_tiny_config, folder, capsys)
    assert code in (1, 2), err
    # the start-up summary, then one error line
    assert f"{path}: " in err and err.splitlines()[-1].startswith("error: "), err
    assert "Traceback" not in err and err.count("error: ") == 1, err
    with pytest.warns(UserWarning, match=rf"skipping unreadable image: {path}"):
        code, err = train_cli(make_tiny_config, folder, capsys, "--set", "name=skip",
                              train_extra=", bad_files: skip")
    assert code == 0, err


def test_non_image_files_without_an_image_extension_are_ignored(folder):
    (folder / "README.txt").write_text("about these images")
    (folder / "Thumbs.db").write_bytes(b"\0" * 10)
    (folder / "sub.png").mkdir()  # a folder with an image-like name
    (folder / "dangling.png").symlink_to(folder / "missing.png")
    assert HRImageDataset(folder, scale=2).names == ["good0.png", "good1.png"]


# -- empty folders, small images ------------------------------------------------------------------
def test_empty_and_missing_folders(tmp_path, make_tiny_config, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=rf"no image files \(\.png, .*\) in folder {empty}$"):
        HRImageDataset(empty, scale=2)
    (empty / "notes.txt").write_text("no images here")
    with pytest.raises(ValueError, match=rf"no image files .* in folder {empty}$"):
        HRImageDataset(empty, scale=2)
    with pytest.raises(FileNotFoundError, match=rf"image folder not found: {tmp_path / 'nope'}"):
        HRImageDataset(tmp_path / "nope", scale=2)
    code, err = train_cli(make_tiny_config, empty, capsys)
    assert code == 2 and "datasets.train" in err and f"in folder {empty}" in err, err
    assert "Traceback" not in err
    code, err = train_cli(make_tiny_config, tmp_path / "nope", capsys)
    assert code == 2 and "datasets.train" in err and "image folder not found" in err, err


def test_every_file_bad_with_skip(folder):
    for p in folder.iterdir():
        p.write_bytes(b"garbage")
    with pytest.warns(UserWarning):
        with pytest.raises(ValueError, match="HRImageDataset: no readable images left after "
                                             "skipping"):
            HRImageDataset(folder, scale=2, bad_files="skip")


def test_images_smaller_than_the_crop_or_the_scale(folder, make_tiny_config, capsys):
    small = save(folder / "small.png", smooth_image(np.random.default_rng(0), 7, 9))
    with pytest.raises(ValueError, match=rf"{small}: image is 8x6 \(HR, after mod-crop to scale "
                                         rf"2\), smaller than the 8x8 crop \(gt_size\)"):
        HRImageDataset(folder, scale=2, gt_size=8)
    code, err = train_cli(make_tiny_config, folder, capsys)
    assert code == 2 and "datasets.train" in err and f"{small}: image is 8x6" in err, err
    small.unlink()
    tiny = save(folder / "tiny.png", smooth_image(np.random.default_rng(0), 1, 1))
    with pytest.raises(ValueError, match=rf"{tiny}: image is 1x1, smaller than scale=2"):
        HRImageDataset(folder, scale=2)


# -- mixed modes ----------------------------------------------------------------------------------
def mixed_folder(root):
    """One 16x16 image per Pillow mode a dataset may meet, and each one's expected RGB."""
    rng = np.random.default_rng(3)
    rgb = smooth_image(rng, 16, 16)
    expected = {}

    def add(name, im, **save_kw):
        im.save(root / name, **save_kw)
        with Image.open(root / name) as back:  # what the file holds, decoded independently
            if back.mode == "I;16":
                v = np.asarray(back, np.float64) / 65535
                expected[name] = np.repeat(v[None], 3, 0)
            else:
                rgb_back = np.asarray(back.convert("RGB"), np.float64)
                expected[name] = rgb_back.transpose(2, 0, 1) / 255

    add("rgb.png", Image.fromarray(rgb))
    add("gray.png", Image.fromarray(rgb).convert("L"))
    add("gray16.png", Image.fromarray((rgb[..., 0].astype(np.uint16) * 257 + 3)))
    add("rgba.png", Image.fromarray(np.dstack([rgb, rgb[..., :1]]), "RGBA"))
    add("la.png", Image.fromarray(rgb).convert("LA"))
    add("palette.png", Image.fromarray(rgb).convert("P", palette=Image.Palette.ADAPTIVE))
    pal_t = Image.fromarray(rgb).convert("P", palette=Image.Palette.ADAPTIVE)
    add("palette_transparent.png", pal_t, transparency=0)
    add("bilevel.png", Image.fromarray(rgb).convert("1"))
    add("cmyk.jpg", Image.fromarray(rgb).convert("CMYK"), quality=95)
    add("rgb.bmp", Image.fromarray(rgb))
    add("rgb.tif", Image.fromarray(rgb))
    return expected


def test_mixed_modes_in_one_set_read_consistently_and_train(tmp_path, make_tiny_config, capsys):
    root = tmp_path / "mixed"
    root.mkdir()
    expected = mixed_folder(root)
    ds = HRImageDataset(root, scale=2, gt_size=8)
    assert sorted(ds.names) == sorted(expected)
    for i, name in enumerate(ds.names):
        lq, gt = ds.pair(i)
        assert gt.dtype == np.float32 and gt.shape == (3, 16, 16) and lq.shape == (3, 8, 8), name
        np.testing.assert_allclose(gt, expected[name], atol=1e-6, err_msg=name)
    y = HRImageDataset(root, scale=2, gt_size=8, color="y")
    assert all(y.pair(i)[1].shape == (1, 16, 16) for i in range(len(y)))
    code, err = train_cli(make_tiny_config, root, capsys)
    assert code == 0, err
    code, err = train_cli(make_tiny_config, root, capsys, "--set", "name=y",
                          "--set", "model.num_in_ch=1", "--set", "model.num_out_ch=1",
                          train_extra=", color: y")
    assert code == 0, err


# -- decompression bombs --------------------------------------------------------------------------
def png_claiming(width, height):
    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
            chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


def bmp_claiming(path, width, height):
    Image.new("RGB", (4, 4)).save(path)
    data = bytearray(path.read_bytes())
    data[18:26] = struct.pack("<ii", width, height)
    return bytes(data)


def jpeg_claiming(path, width, height):
    Image.new("RGB", (16, 16)).save(path)
    data = bytearray(path.read_bytes())
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def tiff_claiming(path, width, height):
    Image.new("RGB", (4, 4)).save(path)
    data = bytearray(path.read_bytes())
    assert data[:2] == b"II"
    ifd = struct.unpack_from("<I", data, 4)[0]
    for i in range(struct.unpack_from("<H", data, ifd)[0]):
        at = ifd + 2 + 12 * i
        tag, kind = struct.unpack_from("<HH", data, at)
        if tag in (256, 257):
            value = width if tag == 256 else height
            if kind == 3:  # SHORT
                struct.pack_into("<H", data, at + 8, min(value, 65535))
            else:
                struct.pack_into("<I", data, at + 8, value)
    return bytes(data)


BOMBS = {
    "bomb.png": lambda p: png_claiming(100_000, 100_000),
    "bomb.bmp": lambda p: bmp_claiming(p, 60_000, 60_000),
    "bomb.jpg": lambda p: jpeg_claiming(p, 65_000, 65_000),
    "bomb.tif": lambda p: tiff_claiming(p, 65_535, 65_535),
}


@pytest.fixture
def no_decoding(monkeypatch):
    """Any pixel decode fails the test."""
    def load(self):
        raise AssertionError("pixels were decoded")
    monkeypatch.setattr(ImageFile.ImageFile, "load", load)


@pytest.mark.parametrize("pillow_limit", ["default", "off"])
@pytest.mark.parametrize("name", sorted(BOMBS))
def test_decompression_bomb_refused_before_decoding(tmp_path, name, pillow_limit, no_decoding,
                                                    monkeypatch):
    """Refused from the header: by Pillow's own check in Image.open (over twice its limit), or by
    srgrad's (width * height > MAX_PIXELS) when Pillow's is switched off."""
    if pillow_limit == "off":
        monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    path = tmp_path / name
    path.write_bytes(BOMBS[name](path))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for fn in (read_image, image_size):
        with pytest.raises(ValueError, match=rf"^{path}: .*exceeds (the )?limit of "
                                             rf"{image_io.MAX_PIXELS}.*(refusing to decode|could "
                                             rf"be) .*decompression bomb"):
            fn(path)
    # the peak memory of this process did not grow by anything like an image's worth (KiB)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 64 * 1024


def test_bomb_in_a_dataset_folder_is_refused_while_scanning(folder, no_decoding, monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)  # srgrad's own check, not Pillow's
    path = folder / "bomb.png"
    path.write_bytes(png_claiming(100_000, 100_000))
    with pytest.raises(ValueError, match=rf"{path}: 100000x100000 = 10000000000 pixels exceeds"):
        HRImageDataset(folder, scale=2)


def test_limit_applies_just_above_it(tmp_path, monkeypatch):
    """The check is `width * height > MAX_PIXELS`, on a real image."""
    path = save(tmp_path / "a.png", smooth_image(np.random.default_rng(0), 10, 10))
    monkeypatch.setattr(image_io, "MAX_PIXELS", 100)
    assert read_image(path)[0].shape == (3, 10, 10)
    monkeypatch.setattr(image_io, "MAX_PIXELS", 99)
    with pytest.raises(ValueError, match=r"10x10 = 100 pixels exceeds the limit of 99"):
        read_image(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no Pillow DecompressionBombWarning leaks either
        assert read_image(path, max_pixels=100)[0].shape == (3, 10, 10)


@pytest.mark.parametrize("tag,prefix", [(b"zTXt", b"Comment\0\0"), (b"iCCP", b"icc\0\0")])
def test_compressed_metadata_bomb_in_a_small_png(tmp_path, tag, prefix):
    """A 4x4 PNG whose zTXt comment or iCCP profile inflates to 200 MiB: refused by Pillow's
    chunk limit, named as corrupt, with no memory to speak of."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I",
                                                                         zlib.crc32(kind + data))
    small = tmp_path / "small.png"
    Image.new("RGB", (4, 4)).save(small)
    png = small.read_bytes()
    packer, zeros = zlib.compressobj(9), bytes(2**20)
    bomb = b"".join(packer.compress(zeros) for _ in range(200)) + packer.flush()  # ~200 KB
    path = tmp_path / "bomb.png"
    path.write_bytes(png[:33] + chunk(tag, prefix + bomb) + png[33:])  # right after IHDR
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError, match=rf"^{path}: corrupt or truncated image \(ValueError: "
                                         rf"Decompressed data too large"):
        read_image(path)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 64 * 1024


def test_corrupt_lossy_webp_decodes_without_an_error_as_documented(tmp_path):
    """docs/reliability.md says so (WebP has no checksum; Pillow decodes damaged data into wrong
    pixels): this pins the statement, so the note goes when Pillow starts detecting it."""
    from PIL import features
    if not features.check("webp"):
        pytest.skip("Pillow without WebP")
    rgb = (np.random.default_rng(0).random((64, 64, 3)) * 255).astype(np.uint8)
    good, bad = tmp_path / "good.webp", tmp_path / "bad.webp"
    Image.fromarray(rgb).save(good, quality=80)
    data = bytearray(good.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the middle of the VP8 data
    bad.write_bytes(bytes(data))
    a, _ = read_image(good)
    b, _ = read_image(bad)  # no error...
    assert b.shape == a.shape == (3, 64, 64)
    assert (a != b).any(axis=0).mean() > 0.05  # ...and wrong pixels
