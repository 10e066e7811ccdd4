"""framework.io.png16 and its use by read_image / write_image: bit-exact round trips, files from an
independent encoder (every filter type, Adam7, split IDAT), EXIF orientation, hostile files."""
import struct
import tracemalloc
import zlib

import numpy as np
import pytest
from PIL import Image

from framework.io import image as image_io
from framework.io import png16
from framework.io.image import read_image, supports_16bit, write_image, write_quantised

_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))
_COLOR_TYPE = {1: 0, 2: 4, 3: 2, 4: 6}
BIG = 10 ** 9  # a pixel limit that never bites


# -- an independent reference encoder (numpy, row by row) -----------------------------------------
def chunk(ctype, data):
    return struct.pack(">I", len(data)) + ctype + data + struct.pack(">I", zlib.crc32(ctype + data))


def ihdr(width, height, color_type=2, depth=16, interlace=0, compression=0, filt=0):
    return chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, color_type, compression,
                                      filt, interlace))


def filter_rows(rows, bpp, first_type):
    """(n, stride) uint8 rows -> PNG-filtered bytes, row y with filter type (first_type + y) % 5."""
    out = []
    prev = np.zeros(rows.shape[1], np.int64)
    for y, row in enumerate(rows.astype(np.int64)):
        ftype = (first_type + y) % 5
        a = np.concatenate([np.zeros(bpp, np.int64), row[:-bpp]])
        c = np.concatenate([np.zeros(bpp, np.int64), prev[:-bpp]])
        b = prev
        p = a + b - c
        pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
        paeth = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
        pred = [0, a, b, (a + b) // 2, paeth][ftype]
        out.append(bytes([ftype]) + ((row - pred) % 256).astype(np.uint8).tobytes())
        prev = row
    return b"".join(out)


def reference_png(q, interlace=False, first_type=0, split=3, before_idat=b"", after_idat=b""):
    """A 16-bit PNG of uint16 (H, W, C), with every filter type, optional Adam7, and the zlib
    stream split over `split` IDAT chunks."""
    h, w, c = q.shape
    passes = _ADAM7 if interlace else ((0, 0, 1, 1),)
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = q[y0::dy, x0::dx]
        if sub.size:
            rows = sub.astype(">u2").view(np.uint8).reshape(sub.shape[0], -1)
            raw += filter_rows(rows, 2 * c, first_type)
    stream = zlib.compress(raw, 9)
    step = -(-len(stream) // split)
    idats = b"".join(chunk(b"IDAT", stream[i:i + step]) for i in range(0, len(stream), step))
    return (png16.SIGNATURE + ihdr(w, h, _COLOR_TYPE[c], interlace=int(interlace)) + before_idat
            + idats + after_idat + chunk(b"IEND", b""))


def pattern(h, w, c, seed=0):
    """uint16 (H, W, C): random values plus both extremes."""
    q = np.random.default_rng(seed).integers(0, 65536, (h, w, c), dtype=np.uint16)
    q.flat[0], q.flat[-1] = 0, 65535
    return q


def pillow_view(path):
    """What Pillow decodes (independently of us): exact 16-bit for gray, the high byte otherwise."""
    with Image.open(path) as im:
        return im.mode, np.asarray(im)


def assert_pillow_agrees(path, q):
    mode, got = pillow_view(path)
    if q.shape[2] == 1:
        assert mode.startswith("I;16")
        np.testing.assert_array_equal(got, q[:, :, 0])
    else:  # Pillow 13 truncates 16-bit colour to its high byte; gray + alpha becomes RGBA
        high = (q >> 8).astype(np.uint8)
        if q.shape[2] == 2:
            high = high[:, :, [0, 0, 0, 1]]
        np.testing.assert_array_equal(got, high)


SHAPES = [(1, 1), (5, 7), (2, 33), (17, 3)]


# -- round trips ----------------------------------------------------------------------------------
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip_bit_exact(tmp_path, channels, shape):
    q = pattern(*shape, channels, seed=channels)
    png16.write_png16(tmp_path / "a.png", q)
    back, info = png16.read_png16(tmp_path / "a.png", BIG)
    assert back.dtype == np.uint16 and back.shape == q.shape
    np.testing.assert_array_equal(back, q)
    assert info == {"color_type": _COLOR_TYPE[channels], "interlaced": False, "exif": None}
    assert_pillow_agrees(tmp_path / "a.png", q)  # our encoder, another decoder


def test_write_in_bands_and_many_idat(tmp_path, monkeypatch):
    """Several row bands (each band's first row filtered against the previous band's last) and
    several IDAT chunks."""
    monkeypatch.setattr(png16, "_IDAT_SIZE", 100)
    monkeypatch.setattr(png16, "_BAND_BYTES", 1000)
    y, x = np.mgrid[0:37, 0:60]
    q = np.stack([(y * 97 + x * 13) % 65536, (y * x) % 65536, (x * 255) % 65536], -1).astype(np.uint16)
    png16.write_png16(tmp_path / "big.png", q)  # 37 rows of 360 bytes: bands of 2 rows
    np.testing.assert_array_equal(png16.read_png16(tmp_path / "big.png", BIG)[0], q)
    assert (tmp_path / "big.png").read_bytes().count(b"IDAT") > 3
    assert_pillow_agrees(tmp_path / "big.png", q)


def test_write_rejects_bad_arrays(tmp_path):
    with pytest.raises(TypeError, match="must be uint16, got uint8"):
        png16.write_png16(tmp_path / "x.png", np.zeros((2, 2, 3), np.uint8))
    for shape in [(2, 2, 5), (0, 3, 3), (2, 2, 2, 2)]:
        with pytest.raises(ValueError, match=r"\(H, W, C\)"):
            png16.write_png16(tmp_path / "x.png", np.zeros(shape, np.uint16))
    assert not (tmp_path / "x.png").exists()


# -- files from the reference encoder -------------------------------------------------------------
@pytest.mark.parametrize("interlace", [False, True])
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (9, 10), (13, 2)])
def test_reads_reference_files(tmp_path, interlace, channels, shape):
    q = pattern(*shape, channels, seed=7)
    (tmp_path / "r.png").write_bytes(reference_png(q, interlace, first_type=shape[1] % 5))
    assert_pillow_agrees(tmp_path / "r.png", q)  # the reference encoder is right
    back, info = png16.read_png16(tmp_path / "r.png", BIG)
    np.testing.assert_array_equal(back, q)
    assert info["interlaced"] is interlace


@pytest.mark.parametrize("first_type", range(5))
def test_each_filter_type_in_the_first_row(tmp_path, first_type):
    """The first row has no row above (Up, Average, Paeth see zeros); so has each Adam7 pass."""
    q = pattern(4, 9, 3, seed=first_type)
    for interlace in (False, True):
        (tmp_path / "f.png").write_bytes(reference_png(q, interlace, first_type))
        np.testing.assert_array_equal(png16.read_png16(tmp_path / "f.png", BIG)[0], q)


def test_smooth_image_uses_several_filters_and_compresses(tmp_path):
    y, x = np.mgrid[0:64, 0:64]
    q = np.stack([y * 1000, x * 1000, (x + y) * 500], -1).astype(np.uint16)
    png16.write_png16(tmp_path / "s.png", q)
    data = (tmp_path / "s.png").read_bytes()
    raw = zlib.decompress(data[data.index(b"IDAT") + 4:-16])
    types = {raw[r * (64 * 6 + 1)] for r in range(64)}
    assert types - {0} and len(data) < q.nbytes // 10  # filtered, and the filters paid off


# -- read_image / write_image integration ---------------------------------------------------------
@pytest.mark.parametrize("channels,mode,colour", [(3, "RGB;16", 3), (4, "RGBA;16", 3),
                                                  (2, "LA;16", 1)])
@pytest.mark.parametrize("interlace", [False, True])
def test_read_image_keeps_16_bits(tmp_path, channels, mode, colour, interlace):
    q = pattern(6, 5, channels, seed=3)
    (tmp_path / "i.png").write_bytes(reference_png(q, interlace))
    arr, info = read_image(tmp_path / "i.png")
    assert info["bits"] == 16 and info["mode"] == mode and info["channels"] == colour
    expected = q.transpose(2, 0, 1).astype(np.float32) / np.float32(65535)
    assert arr.dtype == np.float32 and arr.flags.c_contiguous
    np.testing.assert_array_equal(arr, expected[:colour])
    if channels > colour:
        np.testing.assert_array_equal(info["alpha"], expected[colour:])
    else:
        assert info["alpha"] is None
    assert image_io.image_size(tmp_path / "i.png") == (5, 6)
    assert image_io.has_alpha(tmp_path / "i.png") == (channels > colour)


def test_read_image_gray16_stays_with_pillow(tmp_path):
    q = pattern(4, 3, 1)
    png16.write_png16(tmp_path / "g.png", q)
    arr, info = read_image(tmp_path / "g.png")
    assert info["mode"] == "I;16" and info["bits"] == 16
    np.testing.assert_array_equal(arr[0], q[:, :, 0] / np.float32(65535))


@pytest.mark.parametrize("channels,alpha", [(3, False), (3, True), (1, True)])
def test_write_image_16bit_colour_round_trip(tmp_path, channels, alpha):
    q = pattern(7, 4, channels + alpha, seed=5)
    planes = q.transpose(2, 0, 1).astype(np.float32) / np.float32(65535)
    write_image(tmp_path / "sub" / "w.png", planes[:channels], bits=16,
                alpha=planes[channels:] if alpha else None)
    np.testing.assert_array_equal(png16.read_png16(tmp_path / "sub" / "w.png", BIG)[0], q)
    arr, info = read_image(tmp_path / "sub" / "w.png")
    np.testing.assert_array_equal(arr, planes[:channels])


def test_supports_16bit_and_refusals(tmp_path):
    assert all(supports_16bit("a.png", n) for n in (1, 2, 3, 4))
    assert supports_16bit("a.TIF", 1) and not supports_16bit("a.tiff", 3)
    assert not any(supports_16bit(f"a.{e}", 1) for e in ("jpg", "bmp", "webp", "gif"))
    with pytest.raises(ValueError, match=r"16-bit output is supported only for PNG.*RGB as TIF"):
        write_quantised(tmp_path / "x.tif", np.zeros((2, 2, 3), np.uint16), bits=16)
    with pytest.raises(ValueError, match=r"uint16 \(H, W, C\).*got uint8"):
        write_quantised(tmp_path / "x.png", np.zeros((2, 2, 3), np.uint8), bits=16)
    with pytest.raises(ValueError, match="16-bit output is supported only for PNG"):
        write_image(tmp_path / "x.tif", np.zeros((1, 2, 2)), bits=16, alpha=np.zeros((1, 2, 2)))
    assert list(tmp_path.iterdir()) == []


def exif_chunk_of(path):
    data = path.read_bytes()
    start = data.index(b"eXIf") - 4
    return data[start:start + 12 + struct.unpack(">I", data[start:start + 4])[0]]


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_like_pillow(tmp_path, orientation):
    raw = np.random.default_rng(orientation).integers(0, 256, (3, 5, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(raw).save(tmp_path / "p8.png", exif=exif)
    expected, _ = read_image(tmp_path / "p8.png")  # Pillow + ImageOps.exif_transpose
    q = raw.astype(np.uint16) * 257
    where = {"before_idat" if orientation % 2 else "after_idat": exif_chunk_of(tmp_path / "p8.png")}
    (tmp_path / "p16.png").write_bytes(reference_png(q, **where))
    arr, info = read_image(tmp_path / "p16.png")
    assert info["bits"] == 16
    np.testing.assert_array_equal(arr, expected)  # v*257/65535 == v/255 exactly in float32


def test_unreadable_exif_is_ignored(tmp_path):
    q = pattern(2, 3, 3)
    (tmp_path / "e.png").write_bytes(reference_png(q, before_idat=chunk(b"eXIf", b"garbage")))
    np.testing.assert_array_equal(read_image(tmp_path / "e.png")[0],
                                  q.transpose(2, 0, 1) / np.float32(65535))


# -- hostile files --------------------------------------------------------------------------------
def expect_error(path, match, max_pixels=BIG):
    with pytest.raises(ValueError, match=match) as err:
        png16.read_png16(path, max_pixels)
    message = str(err.value)
    assert str(path) in message and "\n" not in message
    return message


def set_bytes(data, at, new):
    return data[:at] + new + data[at + len(new):]


def fix_crc(data, chunk_start):
    """Recompute the CRC of the chunk starting at `chunk_start` (its length field)."""
    length = struct.unpack(">I", data[chunk_start:chunk_start + 4])[0]
    body = data[chunk_start + 4:chunk_start + 8 + length]
    return set_bytes(data, chunk_start + 8 + length, struct.pack(">I", zlib.crc32(body)))


@pytest.fixture
def good(tmp_path):
    q = pattern(6, 5, 3, seed=11)
    data = reference_png(q, split=1, before_idat=chunk(b"tEXt", b"Comment\x00hi"))
    return tmp_path / "bad.png", data


@pytest.mark.parametrize("ctype", [b"IHDR", b"tEXt", b"IDAT", b"IEND"])
def test_bad_crc(good, ctype):
    path, data = good
    at = data.index(ctype) + 4  # first data byte (or the CRC itself for IEND)
    path.write_bytes(set_bytes(data, at, bytes([data[at] ^ 0x10])))
    expect_error(path, f"bad CRC in chunk {ctype.decode()}")


def test_every_truncation_is_a_clean_error(good):
    path, data = good
    for cut in range(len(data)):
        path.write_bytes(data[:cut])
        expect_error(path, "truncated|not a PNG")


def test_ihdr_lying_about_the_size(good):
    path, data = good
    path.write_bytes(fix_crc(set_bytes(data, 20, struct.pack(">I", 12)), 8))  # height 6 -> 12
    expect_error(path, r"truncated PNG: 186 of 372 bytes of pixel data for a 5x12 image")
    path.write_bytes(fix_crc(set_bytes(data, 20, struct.pack(">I", 3)), 8))  # height 6 -> 3
    expect_error(path, r"more pixel data than the IHDR size \(93 bytes\)")


def test_zlib_bomb_is_not_inflated(tmp_path):
    zobj = zlib.compressobj(9)
    block = bytes(1 << 20)
    stream = b"".join(zobj.compress(block) for _ in range(64)) + zobj.flush()  # 64 MiB of zeros
    path = tmp_path / "bomb.png"
    path.write_bytes(png16.SIGNATURE + ihdr(4, 4) + chunk(b"IDAT", stream) + chunk(b"IEND", b""))
    tracemalloc.start()
    try:
        expect_error(path, "more pixel data than the IHDR size")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(stream) + (1 << 20)  # a few copies of the ~64 KiB stream, never 64 MiB


@pytest.mark.parametrize("width,height,match", [
    (10_000, 10_000, r"needs 800010000 bytes of pixel data, more than a \d+-byte file can hold"),
    (100_000, 100_000, "10000000000 pixels exceeds the limit of 178956970"),
])
def test_huge_dimensions_allocate_nothing(tmp_path, width, height, match):
    path = tmp_path / "huge.png"
    path.write_bytes(png16.SIGNATURE + ihdr(width, height, 6) + chunk(b"IDAT", zlib.compress(b""))
                     + chunk(b"IEND", b""))
    tracemalloc.start()
    try:
        expect_error(path, match, max_pixels=image_io.MAX_PIXELS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_read_image_pixel_limit(tmp_path, monkeypatch):
    png16.write_png16(tmp_path / "big.png", np.zeros((20, 30, 3), np.uint16))
    monkeypatch.setattr(image_io, "MAX_PIXELS", 599)
    with pytest.raises(ValueError, match=r"big\.png: 30x20 = 600 pixels exceeds the limit of 599"):
        read_image(tmp_path / "big.png")


@pytest.mark.parametrize("fields,match", [
    (dict(width=0), "invalid size 0x4"),
    (dict(color_type=3), "bit depth 16 is invalid for colour type 3"),
    (dict(color_type=5), "bit depth 16 is invalid for colour type 5"),
    (dict(compression=1), r"unknown compression/filter/interlace method \(1, 0, 0\)"),
    (dict(filt=2), "unknown compression/filter/interlace"),
    (dict(interlace=2), "unknown compression/filter/interlace"),
    (dict(depth=8), "unsupported by the 16-bit PNG reader: bit depth 8"),
])
def test_invalid_header_fields(tmp_path, fields, match):
    args = dict(width=3, height=4, color_type=2)
    args.update(fields)
    path = tmp_path / "h.png"
    path.write_bytes(png16.SIGNATURE + ihdr(**args) + chunk(b"IEND", b""))
    expect_error(path, match)


@pytest.mark.parametrize("build,match", [
    (lambda d: d.replace(b"\x89PNG", b"\x89PNX"), "not a PNG file"),
    (lambda d: png16.SIGNATURE + chunk(b"IHDR", b"\0" * 12) + d[33:], "IHDR has 12 bytes"),
    (lambda d: png16.SIGNATURE + d[33:], "first chunk is tEXt, not IHDR"),
    (lambda d: d[:33] + chunk(b"ABCD", b"") + d[33:], "unknown critical chunk ABCD"),
    (lambda d: d[:33] + chunk(b"b@dd", b"") + d[33:], r"invalid chunk type b'b@dd'"),
    (lambda d: d[:d.index(b"IDAT") - 4] + chunk(b"IEND", b""), "truncated PNG: IDAT chunk missing"),
    (lambda d: d[:33] + ihdr(5, 6) + d[33:], "a second IHDR chunk"),
])
def test_structural_errors(good, build, match):
    path, data = good
    path.write_bytes(build(data))
    expect_error(path, match)


def test_bad_filter_type_and_bad_zlib_data(good):
    path, data = good
    start = data.index(b"IDAT") - 4
    length = struct.unpack(">I", data[start:start + 4])[0]
    stream = bytearray(zlib.decompress(data[start + 8:start + 8 + length]))
    stream[31 * 2] = 7  # row 2's filter type (5 pixels * 6 bytes + 1 per row)
    rest = data[start + 12 + length:]
    path.write_bytes(data[:start] + chunk(b"IDAT", zlib.compress(bytes(stream))) + rest)
    expect_error(path, "invalid filter type 7 in row 2")
    path.write_bytes(data[:start] + chunk(b"IDAT", b"\x78\x9c\xff\xff" + bytes(20)) + rest)
    expect_error(path, r"corrupt PNG pixel data \(zlib")


def test_random_corruption_with_valid_crcs(good):
    """Bytes mutated and every CRC recomputed, so the parser itself meets the garbage: a ValueError
    or a correctly shaped image, never another exception."""
    path, data = good
    rng = np.random.default_rng(0)
    starts = []
    at = 8
    while at < len(data):
        starts.append(at)
        at += 12 + struct.unpack(">I", data[at:at + 4])[0]
    for _ in range(300):
        mutated = bytearray(data)
        for pos in rng.integers(8, len(data), rng.integers(1, 4)):
            mutated[pos] = rng.integers(0, 256)
        mutated = bytes(mutated)
        for s in starts:
            try:
                mutated = fix_crc(mutated, s)
            except struct.error:
                break
        path.write_bytes(mutated)
        try:
            pixels, _ = png16.read_png16(path, 1 << 16)
        except ValueError as e:
            assert str(path) in str(e) and "\n" not in str(e)
        else:
            assert pixels.dtype == np.uint16 and pixels.ndim == 3
