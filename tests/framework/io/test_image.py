"""read_image / write_image / list_images: every Pillow mode we accept, round trips, hostile files."""
import zlib

import numpy as np
import pytest
from PIL import Image

from framework.io import image as image_io
from framework.io import image_size, list_images, read_image, write_image


def _gradient(h, w, c, peak=255, dtype=np.uint8):
    """A deterministic (H, W, C) pattern covering the value range."""
    base = (np.arange(h * w * c).reshape(h, w, c) * 37) % (peak + 1)
    return base.astype(dtype)


@pytest.mark.parametrize("mode,channels,has_alpha", [
    ("L", 1, False), ("LA", 1, True), ("RGB", 3, False), ("RGBA", 3, True)])
@pytest.mark.parametrize("ext", [".png", ".bmp", ".tif"])
def test_read_8bit_modes_values(tmp_path, mode, channels, has_alpha, ext):
    if ext == ".bmp" and has_alpha:
        pytest.skip("Pillow writes BMP without alpha")
    nplanes = channels + has_alpha
    raw = _gradient(5, 7, nplanes)
    Image.fromarray(raw[:, :, 0] if nplanes == 1 else raw, mode=mode).save(tmp_path / f"a{ext}")
    arr, info = read_image(tmp_path / f"a{ext}")
    assert arr.dtype == np.float32 and arr.shape == (channels, 5, 7)
    np.testing.assert_array_equal(arr, raw[:, :, :channels].transpose(2, 0, 1) / np.float32(255))
    assert info["mode"] == mode and info["bits"] == 8 and info["channels"] == channels
    if has_alpha:
        np.testing.assert_array_equal(info["alpha"][0], raw[:, :, -1] / np.float32(255))
    else:
        assert info["alpha"] is None


def test_read_palette_with_and_without_transparency(tmp_path):
    rgb = _gradient(4, 6, 3) // 64 * 64  # few colours: the palette is exact
    im = Image.fromarray(rgb, "RGB").convert("P", palette=Image.Palette.ADAPTIVE, colors=64)
    im.save(tmp_path / "p.png")
    arr, info = read_image(tmp_path / "p.png")
    assert info["mode"] == "P" and info["alpha"] is None and arr.shape == (3, 4, 6)
    np.testing.assert_array_equal(arr, rgb.transpose(2, 0, 1) / np.float32(255))
    im.save(tmp_path / "pt.png", transparency=int(np.asarray(im)[0, 0]))
    arr, info = read_image(tmp_path / "pt.png")
    assert info["alpha"][0, 0, 0] == 0 and arr.shape == (3, 4, 6)


def test_read_1bit(tmp_path):
    bits = (np.arange(24).reshape(4, 6) % 3 == 0)
    Image.fromarray(bits).save(tmp_path / "b.png")
    arr, info = read_image(tmp_path / "b.png")
    assert info["mode"] == "1" and arr.shape == (1, 4, 6)
    np.testing.assert_array_equal(arr[0], bits.astype(np.float32))


@pytest.mark.parametrize("ext", [".png", ".tif"])
def test_16bit_gray_round_trip(tmp_path, ext):
    raw = _gradient(6, 5, 1, peak=65535, dtype=np.uint16)[:, :, 0]
    Image.fromarray(raw).save(tmp_path / f"g{ext}")
    arr, info = read_image(tmp_path / f"g{ext}")
    assert info["bits"] == 16 and info["mode"].startswith("I;16") and arr.shape == (1, 6, 5)
    np.testing.assert_allclose(arr[0], raw / 65535.0, rtol=0, atol=1e-7)
    write_image(tmp_path / f"out{ext}", arr, bits=16)
    back = np.asarray(Image.open(tmp_path / f"out{ext}"))
    np.testing.assert_array_equal(back, raw)  # 16-bit survives exactly, not just to 8 bits


def test_read_mode_I_beyond_16_bits_refused(tmp_path):
    Image.fromarray(np.full((3, 3), 70000, np.int32), mode="I").save(tmp_path / "i.tif")
    with pytest.raises(ValueError, match=r"i\.tif.*32-bit integer"):
        read_image(tmp_path / "i.tif")


def test_unsupported_mode_names_file(tmp_path):
    Image.fromarray(np.zeros((3, 3), np.float32), mode="F").save(tmp_path / "f.tif")
    with pytest.raises(ValueError, match=r"f\.tif: unsupported image mode 'F'"):
        read_image(tmp_path / "f.tif")


@pytest.mark.parametrize("channels,alpha", [(1, False), (1, True), (3, False), (3, True)])
@pytest.mark.parametrize("ext", [".png", ".tif"])
def test_write_read_round_trip_8bit(tmp_path, channels, alpha, ext):
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (channels, 5, 4)) / 255.0
    a = rng.integers(0, 256, (1, 5, 4)) / 255.0 if alpha else None
    write_image(tmp_path / f"x{ext}", img.astype(np.float32), alpha=a)
    arr, info = read_image(tmp_path / f"x{ext}")
    np.testing.assert_allclose(arr, img, atol=1e-7)
    if alpha:
        np.testing.assert_allclose(info["alpha"], a, atol=1e-7)
    else:
        assert info["alpha"] is None


def test_write_clips_and_rounds_half_to_even(tmp_path):
    img = np.array([[[-0.5, 0.0, 0.5 / 255, 1.5 / 255, 1.0, 7.0]]], np.float64)
    write_image(tmp_path / "c.png", img)
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "c.png")), [[0, 0, 0, 2, 255, 255]])


def test_write_jpeg_and_bmp(tmp_path):
    img = np.full((3, 8, 8), 0.5, np.float32)
    write_image(tmp_path / "sub" / "j.jpg", img, quality=100)
    arr, _ = read_image(tmp_path / "sub" / "j.jpg")
    np.testing.assert_allclose(arr, 128 / 255, atol=2 / 255)
    write_image(tmp_path / "b.bmp", img)
    np.testing.assert_array_equal(read_image(tmp_path / "b.bmp")[0], np.float32(128 / 255))


@pytest.mark.parametrize("kwargs,match", [
    (dict(path="x.gif"), r"extension '\.gif'"),
    (dict(bits=12), "bits must be 8 or 16, got 12"),
    (dict(array=np.zeros((2, 4, 4))), r"1 or 3 channels.*\(2, 4, 4\)"),
    (dict(array=np.zeros((1, 1, 4, 4))), r"\(C, H, W\).*\(1, 1, 4, 4\)"),
    (dict(array=np.full((3, 4, 4), np.nan)), "NaN"),
    (dict(alpha=np.zeros((1, 3, 4))), r"alpha shape \(1, 3, 4\)"),
    (dict(path="x.jpg", alpha=np.zeros((1, 4, 4))), "JPEG cannot store alpha"),
    (dict(path="x.tif", bits=16), "16-bit output is supported only for PNG"),
    (dict(path="x.bmp", array=np.zeros((1, 4, 4)), bits=16), "16-bit output"),
])
def test_write_rejects(tmp_path, kwargs, match):
    args = dict(path="x.png", array=np.zeros((3, 4, 4)), bits=8, alpha=None)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        write_image(tmp_path / args.pop("path"), **args)


def test_write_rejects_integer_arrays(tmp_path):
    with pytest.raises(TypeError, match="array must be a float array.*uint8"):
        write_image(tmp_path / "x.png", np.zeros((3, 4, 4), np.uint8))


def test_exif_orientation_applied(tmp_path):
    raw = _gradient(2, 3, 3)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    Image.fromarray(raw).save(tmp_path / "o.png", exif=exif)
    arr, _ = read_image(tmp_path / "o.png")
    assert arr.shape == (3, 3, 2)
    np.testing.assert_array_equal(arr, np.rot90(raw, -1).transpose(2, 0, 1) / np.float32(255))


def test_decompression_bomb_refused_before_decoding(tmp_path, monkeypatch):
    Image.fromarray(np.zeros((20, 30), np.uint8)).save(tmp_path / "big.png")
    monkeypatch.setattr(image_io, "MAX_PIXELS", 599)
    decoded = []
    monkeypatch.setattr(Image.Image, "load", lambda self: decoded.append(1))
    with pytest.raises(ValueError, match=r"big\.png: 30x20 = 600 pixels exceeds the limit of 599"):
        read_image(tmp_path / "big.png")
    assert decoded == []  # refused from the header alone
    with pytest.raises(ValueError, match="exceeds the limit of 10"):
        read_image(tmp_path / "big.png", max_pixels=10)


def test_huge_header_refused(tmp_path):
    # A real bomb: a PNG header claiming 100000 x 100000 pixels (10^10 > Pillow's hard limit too).
    src = tmp_path / "s.png"
    Image.fromarray(np.zeros((1, 1), np.uint8)).save(src)
    data = bytearray(src.read_bytes())
    data[16:24] = (100000).to_bytes(4, "big") * 2  # IHDR width, height
    data[29:33] = zlib.crc32(bytes(data[12:29])).to_bytes(4, "big")  # the chunk's CRC must match
    (tmp_path / "bomb.png").write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"bomb\.png.*decompression bomb"):
        read_image(tmp_path / "bomb.png")


def test_truncated_and_corrupt_files_name_the_file(tmp_path):
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(tmp_path / "full.png")
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(tmp_path / "full.jpg")
    for ext in ("png", "jpg"):
        data = (tmp_path / f"full.{ext}").read_bytes()
        (tmp_path / f"cut.{ext}").write_bytes(data[: len(data) // 2])
        with pytest.raises(ValueError, match=rf"cut\.{ext}: corrupt or truncated"):
            read_image(tmp_path / f"cut.{ext}")
    (tmp_path / "notes.png").write_text("not an image")
    with pytest.raises(ValueError, match=r"notes\.png: not a readable image"):
        read_image(tmp_path / "notes.png")
    with pytest.raises(FileNotFoundError, match=r"missing\.png"):
        read_image(tmp_path / "missing.png")


def test_list_images(tmp_path):
    for name in ("b.PNG", "a.jpg", "c.tiff", "notes.txt", "d.bmp"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub.png").mkdir()
    assert [p.name for p in list_images(tmp_path)] == ["a.jpg", "b.PNG", "c.tiff", "d.bmp"]
    with pytest.raises(FileNotFoundError, match="nowhere"):
        list_images(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no image files.*empty"):
        list_images(tmp_path / "empty")


def test_image_size_reads_header_only(tmp_path, monkeypatch):
    Image.fromarray(np.zeros((20, 30), np.uint8)).save(tmp_path / "a.png")
    exif = Image.Exif()
    exif[0x0112] = 8  # rotated 90 degrees: read_image will return it 20 wide, 30 high
    Image.fromarray(np.zeros((20, 30, 3), np.uint8)).save(tmp_path / "r.jpg", exif=exif)
    Image.fromarray(np.zeros((20, 30, 3), np.uint8)).save(tmp_path / "r.png", exif=exif)
    sizes = {name: read_image(tmp_path / name)[0].shape[:0:-1] for name in ("r.jpg", "r.png")}
    monkeypatch.setattr(Image.Image, "load", lambda self: pytest.fail("decoded"))
    assert image_size(tmp_path / "a.png") == (30, 20)
    assert image_size(tmp_path / "r.jpg") == (20, 30) == sizes["r.jpg"]
    assert image_size(tmp_path / "r.png") == (20, 30) == sizes["r.png"]
    (tmp_path / "x.png").write_bytes(b"nope")
    with pytest.raises(ValueError, match=r"x\.png: not a readable image"):
        image_size(tmp_path / "x.png")
    with pytest.raises(FileNotFoundError, match=r"y\.png"):
        image_size(tmp_path / "y.png")


def test_image_size_refuses_bombs(tmp_path, monkeypatch):
    Image.fromarray(np.zeros((20, 30), np.uint8)).save(tmp_path / "big.png")
    monkeypatch.setattr(image_io, "MAX_PIXELS", 599)
    with pytest.raises(ValueError, match=r"big\.png: 30x20 = 600 pixels exceeds the limit of 599"):
        image_size(tmp_path / "big.png")
    assert image_size(tmp_path / "big.png", max_pixels=600) == (30, 20)


def test_cmyk_jpeg_reads_as_rgb(tmp_path):
    Image.new("CMYK", (4, 3), (0, 255, 255, 0)).save(tmp_path / "k.jpg", quality=100)  # red
    arr, info = read_image(tmp_path / "k.jpg")
    assert info["mode"] == "CMYK" and arr.shape == (3, 3, 4) and info["channels"] == 3
    np.testing.assert_allclose(arr[:, 0, 0], [1, 0, 0], atol=3 / 255)
