"""Inference: upscale arrays in overlapping tiles, upscale image files of any supported mode (the
model comes from engine/inference/loading.py's load_model).

Tiling: the LR image is cut into `tile` x `tile` blocks; each block is run with `overlap` extra LR
pixels of context on every side (clamped at the image border) and only its centre is written. When
`overlap` covers the network's receptive-field radius the result equals untiled inference (to float
rounding) while memory is bounded by one tile, so a 4000x3000 image runs on a small machine.

Self-ensemble (`self_ensemble=True`, srgrad-infer/-eval --tta) wraps the patch -> SR function once
(engine/inference/tta.py), so it runs per tile. `outscale` (Real-ESRGAN's option) resizes the quantised SR
image to outscale x the input size, band by band (`resize_quantised`).
"""
from __future__ import annotations

import math
import os
import weakref
from fractions import Fraction

import numpy as np

from ... import functional as F
from ..._check import choice, number, pair
from ...autograd import no_grad
from ...capture import Capture
from ...card import card, has_card
from ...functional.resample import _NEAREST_LARGE, MODES, Table, axis_table, resample
from ...registry import BASELINES
from ...tensor import Tensor
from ...threads import get_num_threads
from .autotile import BATCH_PIXELS, TILES_PER_WORKER
from .tta import self_ensemble as ensemble

__all__ = ["upscale", "bicubic", "upscale_file", "model_in_channels", "outscale_size",
           "capture_inference", "resize_quantised", "OUTSCALE_MODES", "ALPHA_UPSAMPLERS"]


def model_in_channels(info: dict) -> int:
    """Channels the model takes: its card's in_channels (framework/card.py), computed from the
    spec in info["model"]. A model without a card (a user's) is fed RGB, srgrad's convention:
    give it a card(spec) to say otherwise."""
    spec = info.get("model") or {}
    if not has_card(spec.get("type")):
        return 3
    return card({"scale": info.get("scale"), **spec} if info.get("scale") else spec).in_channels


def fixed_onnx_reason(info: dict) -> str | None:
    """Why one exported graph of the model holds for its traced size only (its card's fixed_onnx),
    None when one graph serves every size or the model has no card (the exporter's own two-size
    trace and residue checks then decide)."""
    spec = info.get("model") or {}
    if not has_card(spec.get("type")):
        return None
    return card({"scale": info.get("scale"), **spec} if info.get("scale") else spec).fixed_onnx


def size_rules(info: dict) -> tuple[int, int]:
    """(multiple, minimum) the model pads an input up to (its window, spandrel's requirements):
    its card's pads_to and pad_minimum; (1, 1) for a model without a card."""
    spec = info.get("model") or {}
    if not has_card(spec.get("type")):
        return 1, 1
    c = card({"scale": info.get("scale"), **spec} if info.get("scale") else spec)
    return int(c.pads_to), int(c.pad_minimum)


def _model_dtype(model):
    for p in model.parameters():
        return p.data.dtype
    return np.dtype(np.float32)




def tile_boxes(h: int, w: int, tile: int | None, overlap: int):
    """(core, context) boxes (y0, y1, x0, x1) in LR pixels covering an h x w image: `tile` x `tile`
    cores (one core = the whole image when tile is None), each with `overlap` pixels of context per
    side, clamped at the image border."""
    if tile is None or (h <= tile and w <= tile):
        return [((0, h, 0, w), (0, h, 0, w))]
    boxes = []
    for y0 in range(0, h, tile):
        for x0 in range(0, w, tile):
            y1, x1 = min(y0 + tile, h), min(x0 + tile, w)
            boxes.append(((y0, y1, x0, x1), (max(y0 - overlap, 0), min(y1 + overlap, h),
                                             max(x0 - overlap, 0), min(x1 + overlap, w))))
    return boxes


def tile_batches(boxes, workers: int | None = None, limit: int | None = None) -> list:
    """tile_boxes' boxes as batches: lists of boxes whose contexts have one shape, in the order of
    each shape's first tile, each of at most TILES_PER_WORKER x `workers` tiles (default: the
    thread count, framework.get_num_threads), `limit` tiles (a memory budget's: engine/inference/autotile.py)
    and BATCH_PIXELS context pixels (one tile at least)."""
    workers = workers or get_num_threads()
    shapes = {}
    for box in boxes:
        ey0, ey1, ex0, ex1 = box[1]
        shapes.setdefault((ey1 - ey0, ex1 - ex0), []).append(box)
    batches = []
    for (h, w), group in shapes.items():
        size = max(1, min(TILES_PER_WORKER * workers, BATCH_PIXELS // (h * w), limit or h * w))
        batches += [group[i:i + size] for i in range(0, len(group), size)]
    return batches


def sr_tiles(fn, lq: np.ndarray, tile=None, overlap: int = 16, batch: int | None = None):
    """Yield ((y0, y1, x0, x1) LR core box, scale s, SR of that core (C', (y1-y0) s, (x1-x0) s)) for
    each tile, batch by batch (tile_batches: not in raster order): `fn(patches)` maps LR patches
    (B, C, h, w) to their SR (B, C', h s, w s); only each core's part is kept. Memory is bounded
    by one batch (nothing of the full HR size is made here); `batch` caps its tiles."""
    if lq.ndim != 3:
        raise ValueError(f"upscale: lq must be (C, H, W), got shape {lq.shape}")
    if tile is not None and tile < 1:
        raise ValueError(f"upscale: tile must be >= 1, got {tile}")
    if overlap < 0:
        raise ValueError(f"upscale: tile overlap must be >= 0, got {overlap}")
    _, h, w = lq.shape
    for group in tile_batches(tile_boxes(h, w, tile, overlap), limit=batch):
        ey0, ey1, ex0, ex1 = group[0][1]
        patches = np.stack([lq[:, a:b, c:d] for _, (a, b, c, d) in group])
        res = fn(patches)
        s = res.shape[2] // (ey1 - ey0) if res.ndim == 4 else 0
        if res.shape[:1] + res.shape[2:] != (len(group), (ey1 - ey0) * s, (ex1 - ex0) * s) or s < 1:
            raise ValueError(f"upscale: the model maps LR patches {patches.shape} to "
                             f"{res.shape}, not a whole multiple of them")
        for ((y0, y1, x0, x1), (ey0, _, ex0, _)), one in zip(group, res):
            yield (y0, y1, x0, x1), s, one[:, (y0 - ey0) * s:(y1 - ey0) * s,
                                           (x0 - ex0) * s:(x1 - ex0) * s]


# The captured inference graphs of the models whose weights are final (`capture_inference`): the
# commands that only run a model (srgrad-infer, srgrad-eval) register theirs; validation during
# training does not (its weights change between calls).
_CAPTURES = weakref.WeakKeyDictionary()


def capture_inference(model) -> None:
    """Run `model` through captured inference graphs from now on (framework/capture: one per tile
    shape, recorded on its first two tiles, then replayed with the weights folded and packed once;
    the same bits as eager). Only for a model whose weights no longer change."""
    _CAPTURES.setdefault(model, Capture([model], train=False))


def model_fn(model, self_ensemble: bool = False):
    """patches (B, C, h, w) -> the model's output (B, C', h s, w s), under no_grad, in the model's
    dtype; with `self_ensemble` the mean of the 8 flipped/transposed runs (engine/inference/tta.py),
    unclipped. Through the model's captured graphs when `capture_inference` registered it."""
    dtype = _model_dtype(model)
    capture = _CAPTURES.get(model)

    def fn(patches):
        x = Tensor(patches.astype(dtype, copy=False))
        with no_grad():
            if capture is None:
                return model(x).data
            return capture(lambda x: {"sr": model(x)}, x)["sr"].data
    return ensemble(fn) if self_ensemble else fn


def assemble(tiles, lq_hw) -> np.ndarray:
    """The whole SR image (C', H s, W s) from sr_tiles' output."""
    out = None
    for (y0, y1, x0, x1), s, res in tiles:
        if out is None:
            out = np.empty((res.shape[0], lq_hw[0] * s, lq_hw[1] * s), res.dtype)
        out[:, y0 * s:y1 * s, x0 * s:x1 * s] = res
    return out


def upscale(model, lq: np.ndarray, tile: int | None = None, overlap: int = 16,
            self_ensemble: bool = False) -> np.ndarray:
    """SR of one LR image `lq` (C, H, W) -> (C', H*s, W*s) with the model in eval mode, under
    no_grad. `tile` (LR pixels) bounds the network's memory (tile_batches: small tiles run a few
    at a time); `overlap` LR pixels of context per side; `self_ensemble` (default False): average
    the 8 flips/transposes of each tile (x8 time). The whole HR image is assembled in memory
    (upscale_file writes tile by tile instead)."""
    return assemble(sr_tiles(model_fn(model, self_ensemble), lq, tile, overlap), lq.shape[1:])


@BASELINES.register("imresize")
def _imresize_baseline(x: Tensor, scale: int) -> Tensor:
    """MATLAB's imresize bicubic: what SR papers report as "Bicubic"."""
    return F.imresize(x, scale_factor=scale)


@BASELINES.register("interpolate")
def _interpolate_baseline(x: Tensor, scale: int) -> Tensor:
    """F.interpolate(mode="bicubic", align_corners=False), PyTorch's bicubic."""
    return F.interpolate(x, scale_factor=scale, mode="bicubic", align_corners=False)


def bicubic(lq: np.ndarray, scale: int, method: str = "imresize") -> np.ndarray:
    """Upscale (C, H, W), or a batch (N, C, H, W), by a registered baseline (BASELINES: "imresize",
    MATLAB's bicubic, or "interpolate", PyTorch's), clipped to [0, 1]."""
    try:
        fn = BASELINES.get(method)
    except KeyError as exc:
        raise ValueError(f"bicubic: method: {exc.args[0]}") from None
    batch = np.ascontiguousarray(lq if lq.ndim == 4 else lq[None])
    with no_grad():
        y = fn(Tensor(batch), scale)
    return np.clip(y.data if lq.ndim == 4 else y.data[0], 0.0, 1.0)


def channel_fn(model, in_ch: int, scale: int, self_ensemble: bool = False):
    """patches (B, c, h, w) -> SR (B, c, h s, w s) clipped to [0, 1], whatever c vs the model's
    channels: a 1-channel model on RGB runs on Y (Cb, Cr bicubic), a 3-channel model on gray runs
    on the gray replicated and averages back. Per patch, so tiles stay tiles; `self_ensemble`
    averages the network's 8 runs before clipping."""
    net = model_fn(model, self_ensemble)

    def fn(patches):
        c = patches.shape[1]
        if c == in_ch:
            sr = net(patches)
            return np.clip(sr, 0.0, 1.0, out=sr)
        if in_ch == 1 and c == 3:
            from ...color import rgb_to_ycbcr, ycbcr_to_rgb
            ycc = rgb_to_ycbcr(patches).astype(np.float32)
            y = net(ycc[:, :1])
            cbcr = bicubic(ycc[:, 1:], scale, "interpolate")
            return np.clip(ycbcr_to_rgb(np.concatenate([y, cbcr.astype(y.dtype)], axis=1)), 0, 1)
        if in_ch == 3 and c == 1:
            sr = net(np.repeat(patches, 3, axis=1))
            return np.clip(sr.mean(axis=1, keepdims=True), 0.0, 1.0)
        raise ValueError(f"cannot run a {in_ch}-channel model on a {c}-channel image")
    return fn


def super_resolve(model, img: np.ndarray, scale: int, in_ch: int, tile=None, overlap=16,
                  self_ensemble: bool = False):
    """SR (float, whole image, clipped to [0, 1]) of an image whatever its channels (channel_fn)."""
    fn = channel_fn(model, in_ch, scale, self_ensemble)
    return assemble(sr_tiles(fn, img, tile, overlap), img.shape[1:])


def _alpha_fn(model, info, scale, upsampler, self_ensemble):
    """patches (B, 1, h, w) of alpha -> (B, 1, h s, w s) in [0, 1]: "bicubic" (srgrad's default)
    PyTorch's bicubic interpolation, clipped; "realesrgan" (Real-ESRGAN's default) the model on
    the alpha replicated to RGB, clipped, then made gray as OpenCV's RGB2GRAY (BT.601 weights)."""
    if upsampler == "bicubic":
        return lambda patches: bicubic(patches, scale, "interpolate")
    net = model_fn(model, self_ensemble)
    in_ch = model_in_channels(info)
    if in_ch not in (1, 3):
        raise ValueError(f"--alpha_upsampler realesrgan: cannot run a {in_ch}-channel model on "
                         f"the alpha channel")

    def fn(patches):
        sr = net(patches if in_ch == 1 else np.repeat(patches, 3, axis=1))
        np.clip(sr, 0.0, 1.0, out=sr)
        if in_ch == 1:
            return sr
        return (sr[:, 0:1] * 0.299 + sr[:, 1:2] * 0.587 + sr[:, 2:3] * 0.114).astype(sr.dtype)
    return fn


ALPHA_UPSAMPLERS = ("bicubic", "realesrgan")


def _quantise_tiles(out, tiles, planes: slice, bits: int, scale: int) -> None:
    """Each SR tile into `out` (H s, W s, C) at `planes`; tiles over a padded image (pre_pad) are
    cropped to out's size."""
    from ...io.image import quantise_into
    ho, wo = out.shape[:2]
    for (y0, y1, x0, x1), s, res in tiles:
        if s != scale:
            raise ValueError(f"the model upscales x{s}, its weights say x{scale}")
        y1, x1 = min(y1 * s, ho), min(x1 * s, wo)
        if y0 * s < y1 and x0 * s < x1:
            quantise_into(out[y0 * s:y1, x0 * s:x1, planes], res[:, :y1 - y0 * s, :x1 - x0 * s],
                          bits)


def _pre_pad(planes: np.ndarray, pad: int, src) -> np.ndarray:
    """Real-ESRGAN's pre_pad: `pad` pixels of reflection added at the bottom and the right."""
    h, w = planes.shape[1:]
    if pad >= min(h, w):
        raise ValueError(f"{src}: --pre_pad {pad} must be smaller than the image ({w}x{h}) "
                         f"(a reflection, as Real-ESRGAN's)")
    return np.pad(planes, ((0, 0), (0, pad), (0, pad)), mode="reflect")


def _fixed_bytes(img, alpha, out, size, bits) -> int:
    """Bytes of the image's own buffers during the run: the float LR planes (and alpha), the
    quantised output, and with --outscale the resized output and resize_quantised's float bands."""
    total = img.nbytes + (0 if alpha is None else alpha.nbytes) + out.nbytes
    if size is not None and size != out.shape[:2]:
        total += size[0] * size[1] * out.shape[2] * out.itemsize + 3 * (1 << 20) * (
            4 if bits == 8 else 8)
    return total


def upscale_file(model, info: dict, src, dst, tile=None, overlap=16, self_ensemble: bool = False,
                 outscale: float | None = None, outscale_mode: str = "bicubic",
                 alpha_upsampler: str = "bicubic", pre_pad: int = 0, max_memory: int | None = None,
                 say=None) -> tuple:
    """Read `src`, super-resolve, write `dst` atomically (same mode family: RGB stays RGB, gray
    stays gray, alpha is upscaled by `alpha_upsampler`; 16-bit in -> 16-bit out where the output
    format allows). Tile by tile, each tile quantised straight into the output's 8/16-bit buffer:
    memory is the LR image, that buffer and one batch of tiles. `self_ensemble`: x8 TTA per tile.
    `alpha_upsampler` (_alpha_fn): "bicubic" (default) or "realesrgan" (the model). `pre_pad`
    (Real-ESRGAN's, default 0): the LR image (and an alpha the model upscales) gets that many
    reflected pixels at the bottom and the right, cropped off the SR. `outscale` (default None:
    the model's scale) resizes that buffer, alpha included, to `outscale_size` with
    `outscale_mode` (resize_quantised: band by band, bounded memory). `tile="auto"`: the largest
    tile whose run fits `max_memory` bytes (None: a fraction of the available memory), measured
    from the model (engine/inference/autotile.py); `say` gets the plan when it tiles. Returns the output
    (C, H, W) shape."""
    from ...io.image import read_image, supports_16bit, write_quantised
    if outscale is not None:
        choice("upscale_file", "outscale_mode", outscale_mode, OUTSCALE_MODES)
    choice("upscale_file", "alpha_upsampler", alpha_upsampler, ALPHA_UPSAMPLERS)
    img, meta = read_image(src)
    size = None if outscale is None else \
        checked_outscale_size(img.shape[1:], outscale, "upscale_file: outscale", src)
    scale = int(info["scale"])
    alpha = meta.get("alpha")
    colour = img.shape[0]
    channels = colour + (alpha is not None)
    bits = 16 if meta.get("bits") == 16 and supports_16bit(dst, channels) else 8
    out = np.empty((img.shape[1] * scale, img.shape[2] * scale, channels),
                   np.uint16 if bits == 16 else np.uint8)
    if pre_pad:
        img = _pre_pad(img, pre_pad, src)
        if alpha is not None and alpha_upsampler == "realesrgan":
            alpha = _pre_pad(alpha, pre_pad, src)
    fn = channel_fn(model, model_in_channels(info), scale, self_ensemble)
    batch = None
    if tile == "auto":
        from .autotile import auto_tile

        def run(lq):  # the untiled pipeline on a probe image, into its own output buffer
            q = np.empty((lq.shape[1] * scale, lq.shape[2] * scale, colour), out.dtype)
            _quantise_tiles(q, sr_tiles(fn, lq, None, overlap), slice(0, colour), bits, scale)
        plan = auto_tile(model, run, img.shape, overlap, max_memory,
                         _fixed_bytes(img, alpha, out, size, bits), self_ensemble, size_rules(info))
        tile, batch = plan.tile, plan.batch
        if tile is not None and say is not None:
            say(f"{src}: {plan}")
    _quantise_tiles(out, sr_tiles(fn, img, tile, overlap, batch), slice(0, colour), bits, scale)
    if alpha is not None:
        alpha_fn = _alpha_fn(model, info, scale, alpha_upsampler, self_ensemble)
        _quantise_tiles(out, sr_tiles(alpha_fn, alpha, tile, overlap, batch), slice(colour, None),
                        bits, scale)
    del img, alpha, meta  # the LR image is not needed for the resize
    if size is not None and size != out.shape[:2]:
        out = resize_quantised(out, size, outscale_mode)  # then the SR buffer is freed
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    write_quantised(dst, out, bits)
    return (colour, out.shape[0], out.shape[1])


# -- outscale: a final resize of the quantised SR image --------------------------------------------
# The interpolate modes that make sense for a final resize; bicubic first (the default).
OUTSCALE_MODES = ("bicubic", "bilinear", "area", "lanczos", "nearest")


def outscale_size(hw, outscale) -> tuple[int, int]:
    """(floor(F h), floor(F w)) for an input of `hw` = (h, w) LR pixels: Real-ESRGAN's
    int(h * outscale), with F the decimal the float prints as, multiplied exactly (100 * 0.29 is
    28.999999999999996 in floating point; 29 here)."""
    exact = Fraction(repr(float(outscale)))
    return tuple(math.floor(exact * n) for n in hw)


def check_outscale(outscale, name: str = "outscale") -> float:
    """`outscale` as a finite float > 0, else a ValueError naming `name`."""
    value = number("", name, outscale, low=0, low_open=True)  # NaN and <= 0 fail here
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number > 0, got {outscale!r}")
    return value


def checked_outscale_size(hw, outscale, name: str = "outscale", what="the image") -> tuple:
    """outscale_size after check_outscale, and the output at least 1x1 and within the pixel
    limit read_image uses (framework.io.image.MAX_PIXELS): else a ValueError naming `name`."""
    from ...io import image as image_io
    check_outscale(outscale, name)
    ho, wo = outscale_size(hw, outscale)
    h, w = hw
    if min(ho, wo) < 1:
        raise ValueError(f"{name} {outscale:g}: {what} ({w}x{h}) would become {wo}x{ho} pixels; "
                         f"the output must be at least 1x1")
    if ho * wo > image_io.MAX_PIXELS:
        raise ValueError(f"{name} {outscale:g}: {what} ({w}x{h}) would become {wo}x{ho} = "
                         f"{wo * ho} pixels, over the limit of {image_io.MAX_PIXELS} "
                         f"(framework.io.image.MAX_PIXELS)")
    return ho, wo


def _identity_table(n: int) -> Table:
    return Table(np.arange(n, dtype=np.int64)[:, None], np.ones((n, 1)), n)


def resize_quantised(q: np.ndarray, size, mode: str = "bicubic", band: int = 1 << 20) -> np.ndarray:
    """(H, W, C) uint8/uint16 -> (Ho, Wo, C) of the same dtype: F.interpolate(size=(Ho, Wo), mode)
    of the pixel values (antialiased along an axis that shrinks, for bicubic, bilinear, lanczos),
    clipped and rounded half to even. Band by band: a band of output rows needs only the input
    rows under its filter taps, so the float memory is about `band` output values (x (1 +
    H / Ho)), never the whole image. Each axis is one resample() pass in a fixed order (H first
    when shrinking, W first otherwise; the other axis an exact identity), so the result does not
    depend on `band`."""
    choice("resize_quantised", "mode", mode, OUTSCALE_MODES)
    if q.ndim != 3 or q.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"resize_quantised: q must be a uint8/uint16 (H, W, C) array, got "
                         f"{q.dtype} {q.shape}")
    (h, w, c), (ho, wo) = q.shape, pair("resize_quantised", "size", size, int, positive=True)
    # float32 rounding is far below an 8-bit step; at 65535 levels it would reach ~1/200 of one
    peak, work = (255, np.float32) if q.dtype == np.uint8 else (65535, np.float64)
    large = mode == "nearest" and ho + wo > _NEAREST_LARGE  # as interpolate picks the rule
    aa = MODES[mode].antialias is not None
    th = axis_table(mode, h, ho, None, False, aa and ho < h, large)
    tw = axis_table(mode, w, wo, None, False, aa and wo < w, large)
    h_first = ho < h
    out = np.empty((ho, wo, c), q.dtype)
    rows = max(1, int(band / (c * max(w, wo) * max(1.0, h / ho))))
    for o0 in range(0, ho, rows):
        o1 = min(o0 + rows, ho)
        index = th.index[o0:o1]
        r0, r1 = int(index.min()), int(index.max()) + 1
        sub = Table(index - r0, th.weight[o0:o1], r1 - r0)  # the band's rows of the H table
        x = np.ascontiguousarray(q[r0:r1].transpose(2, 0, 1), dtype=work)  # (C, r1 - r0, W)
        if h_first:
            y = resample(resample(x, sub, _identity_table(w)), _identity_table(o1 - o0), tw)
        else:
            y = resample(resample(x, _identity_table(r1 - r0), tw), sub, _identity_table(wo))
        np.rint(np.clip(y, 0, peak, out=y), out=y)
        out[o0:o1] = y.transpose(1, 2, 0)
    return out
