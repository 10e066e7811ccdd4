"""DAT (Chen et al., "Dual Aggregation Transformer for Image Super-Resolution", ICCV 2023;
zhengchen1999/DAT as spandrel 0.4.2 reads it): conv_first -> residual groups of DATBs alternating

- a spatial block (even index): the channels split in two halves, each attending within rectangular
  windows (split_size (h, w) for the first half, (w, h) for the second), with a dynamic position
  bias (DynamicPosBias: an MLP from each relative offset, the rpe_biases buffer, to one bias per
  head, gathered by relative_position_index); some blocks (the original's rule on the group and
  block indices) shift the windows by half a window, masked as Swin's (attn_mask_0 / attn_mask_1
  stored for img_size);
- a channel block (odd index): each head attends across its channels (cosine similarity of the
  L2-normalised channel rows times a learnt per-head temperature);

each with the adaptive interaction module (AIM): a depthwise-conv branch on v beside the attention,
a channel map and a spatial map (BatchNorm, GELU, sigmoid) crossing between them; then the
spatial-gate feed-forward network (SGFN: fc1, GELU, half of the channels gating the other half
through LayerNorm and a depthwise 3x3 conv, fc2). Then norm, conv_after_body + long skip and the
reconstruction ("pixelshuffle" classical SR, "pixelshuffledirect" DAT-light). Variants (all this
class): DAT (embed 180, 6 groups of 6 blocks, 6 heads, split (8, 32), expansion 4), DAT-S (split
(8, 16), expansion 2), DAT-2 (expansion 2), DAT-light (embed 60, one group of 18, expansion 2,
"3conv", pixelshuffledirect). Any input size runs: the spatial blocks pad
their q, k, v with zeros to a multiple of the larger split side (unmasked, as the original) and
crop back. Training needs a batch of 2 or more (the channel map's BatchNorm sees one value per
channel and image, as the original).
"""
from __future__ import annotations

import math

import numpy as np

import framework as sg
import framework.functional as F
from framework import nn
from framework.check import choice, flag, int_arg, int_list, number, pair
from framework.detect import Assumed, NoMatch, count, need
from framework.functional.attention import relative_position_index, shift_mask
from framework.nn.module import claim
from framework.registry import MODELS
from framework.card import conv, linear, norm

from ._blocks import PixelShuffleUpsampler, drop_rates, trunc_normal_linears, upsampler_scale
from .swin2sr import _l2_normalize
from .swinir import UpsampleOneStep, _resi_conv, reconstruction, resi_parameters, swin_card

_NUM_FEAT = 64
_RGB_MEAN = (0.4488, 0.4371, 0.4040)


def _shifted(rg_idx: int, b_idx: int) -> bool:
    """The original's rule: which spatial blocks shift their windows."""
    return (rg_idx % 2 == 0 and b_idx > 0 and (b_idx - 2) % 4 == 0) or (rg_idx % 2 == 1 and b_idx % 4 == 0)


def _attend(qkv, heads, scale, bias, mask, drop):
    """softmax(scale q k^T + bias + mask) v on packed (B', N, 3C): fused, or with dropout on the
    weights (training with attn_drop > 0)."""
    if not (drop.training and drop.p > 0):
        return F.window_attention(qkv, heads, scale, bias, mask)
    b_, n, c3 = qkv.shape
    q, k, v = (F.permute(F.reshape(t, (b_, n, heads, -1)), (0, 2, 1, 3)) for t in F.chunk(qkv, 3, 2))
    attn = drop(F.attention_softmax(q @ F.transpose(k, -2, -1), scale, bias, mask))
    return F.reshape(F.transpose(attn @ v, 1, 2), (b_, n, c3 // 3))


class _ZeroWidth(nn.Module):
    """A Linear or LayerNorm of the original with no features (DAT below embed_dim 32): its
    zero-size weight and its bias (the original's keys and shapes), nothing computed."""

    def __init__(self, weight_shape: tuple, bias_size: int):
        super().__init__()
        self.weight = nn.Parameter(np.zeros(weight_shape, np.float32))
        self.bias = nn.Parameter(np.zeros(bias_size, np.float32))


class DynamicPosBias(nn.Module):
    """(R, 2) relative offsets -> (R, num_heads): pos_proj, then three LayerNorm-ReLU-Linear stages
    (the original's residual=False). pos_dim = dim // 4; at 0 (embed_dim < 32) every stage has
    zero width, as the original builds them, and the output is pos3's bias for every offset."""

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.pos_dim = dim // 4
        if self.pos_dim == 0:
            self.pos_proj = _ZeroWidth((0, 2), 0)
            for i, (shape, bias) in enumerate((((0,), 0), ((0,), 0), ((0,), 0)), 1):
                last = (num_heads, 0) if i == 3 else (0, 0)
                setattr(self, f"pos{i}", nn.Sequential(_ZeroWidth(shape, bias), nn.ReLU(),
                                                       _ZeroWidth(last, last[0])))
            return
        self.pos_proj = nn.Linear(2, self.pos_dim)
        for i, out in ((1, self.pos_dim), (2, self.pos_dim), (3, num_heads)):
            setattr(self, f"pos{i}", nn.Sequential(nn.LayerNorm(self.pos_dim), nn.ReLU(),
                                                   nn.Linear(self.pos_dim, out)))

    def forward(self, biases):
        if self.pos_dim == 0:  # a Linear of no inputs: its bias
            bias = self.pos3[2].bias
            return sg.tensor(np.zeros((biases.shape[0], bias.shape[0]), bias.data.dtype)) + bias
        return self.pos3(self.pos2(self.pos1(self.pos_proj(biases))))


def window_offsets(h_sp: int, w_sp: int) -> tuple[np.ndarray, np.ndarray]:
    """An h_sp x w_sp window's ((2h_sp - 1)(2w_sp - 1), 2) float32 offsets (dy, dx), row-major (the
    rpe_biases buffer), and its (N, N) relative_position_index into them."""
    dh, dw = np.meshgrid(np.arange(1 - h_sp, h_sp), np.arange(1 - w_sp, w_sp), indexing="ij")
    return (np.stack([dh.ravel(), dw.ravel()], 1).astype(np.float32),
            relative_position_index(h_sp, w_sp))


class SpatialAttention(nn.Module):
    """Window attention of one half of the channels, window (h_sp, w_sp) = split_size (idx 0) or
    its transpose (idx 1), on packed (B*nW, h_sp w_sp, 3 dim) windows."""

    def __init__(self, dim, idx, split_size, num_heads, attn_drop=0.0, qk_scale=None,
                 buffers=True):
        super().__init__()
        self.num_heads = num_heads
        self.scale = qk_scale or (dim // num_heads) ** -0.5
        self.h_sp, self.w_sp = split_size if idx == 0 else split_size[::-1]
        self.pos = DynamicPosBias(dim // 4, num_heads)
        if buffers:  # (CRAFT keeps one pair for the model: buffers=False, given to forward)
            rpe, index = window_offsets(self.h_sp, self.w_sp)
            self.register_buffer("rpe_biases", rpe)
            self.register_buffer("relative_position_index", index)
        self.attn_drop = nn.Dropout(attn_drop)

    def bias(self, dtype, rpe_biases=None, index=None):
        """(nH, N, N): the MLP's bias of each token pair's offset (the offsets and index: this
        module's buffers, or the model's, given, as CRAFT keeps them)."""
        n = self.h_sp * self.w_sp
        rpe = self.rpe_biases if rpe_biases is None else rpe_biases
        index = self.relative_position_index if index is None else index
        table = self.pos(sg.tensor(rpe.data.astype(dtype, copy=False)))
        table = F.getitem(table, index.data.reshape(-1))
        return F.permute(F.reshape(table, (n, n, self.num_heads)), (2, 0, 1))

    def forward(self, qkv, mask=None, rpe_biases=None, index=None):
        return _attend(qkv, self.num_heads, self.scale, self.bias(qkv.dtype, rpe_biases, index),
                       mask, self.attn_drop)


def _interactions(owner, dim):
    """AIM's three branches: dwconv (on v), channel_interaction (-> (B, C, 1, 1)) and
    spatial_interaction (-> (B, 1, H, W)), the original's Sequentials."""
    owner.dwconv = nn.Sequential(nn.Conv2d(dim, dim, 3, padding=1, groups=dim), nn.BatchNorm2d(dim),
                                 nn.GELU())
    owner.channel_interaction = nn.Sequential(
        nn.AdaptiveAvgPool2d(1), nn.Conv2d(dim, dim // 8, 1), nn.BatchNorm2d(dim // 8), nn.GELU(),
        nn.Conv2d(dim // 8, dim, 1))
    owner.spatial_interaction = nn.Sequential(
        nn.Conv2d(dim, dim // 16, 1), nn.BatchNorm2d(dim // 16), nn.GELU(), nn.Conv2d(dim // 16, 1, 1))


def _image(tokens, h, w):
    """(B, H*W, C) -> (B, C, H, W)."""
    return F.reshape(F.transpose(tokens, 1, 2), (tokens.shape[0], -1, h, w))


def _tokens(image):
    """(B, C, H, W) -> (B, H*W, C)."""
    return F.transpose(F.flatten(image, 2), 1, 2)


class RectangleWindows(nn.Module):
    """The rectangle-window self-attention both DAT's spatial block and RGT's L-SA run on (B, H*W, C):
    qkv, the two halves' SpatialAttentions (windows split_size and its transpose), the shifted
    blocks' stored masks, proj. `setup` registers them in the original's order; `windows` attends."""

    def setup(self, dim, num_heads, reso, split_size, qkv_bias, qk_scale, drop, attn_drop,
              rg_idx, b_idx):
        self.split_size = split_size
        self.shift_size = (split_size[0] // 2, split_size[1] // 2)
        self.shifted, self.reso = _shifted(rg_idx, b_idx), reso
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(drop)
        self.attns = nn.ModuleList([SpatialAttention(dim // 2, i, split_size, num_heads // 2,
                                                     attn_drop, qk_scale) for i in range(2)])
        masks = (None, None)
        if self.shifted:  # (nW, N, N) each: reso^2 N values, counted before they are made
            claim(2 * reso * reso * split_size[0] * split_size[1])
            masks = self._masks(reso, reso, np.float32)
        self.register_buffer("attn_mask_0", None if masks[0] is None else masks[0].copy())
        self.register_buffer("attn_mask_1", None if masks[1] is None else masks[1].copy())

    def masks(self, h, w, dtype):
        """The two halves' shifted-window masks for an (h, w) grid (the stored ones at img_size)."""
        if (h, w) == (self.reso, self.reso):
            return tuple(m.data.astype(dtype, copy=False) for m in (self.attn_mask_0, self.attn_mask_1))
        return self._masks(h, w, dtype)

    def _masks(self, h, w, dtype):
        (s0, s1), (t0, t1) = self.split_size, self.shift_size
        return (shift_mask(h, w, (s0, s1), (t0, t1), np.dtype(dtype)),
                shift_mask(h, w, (s1, s0), (t1, t0), np.dtype(dtype)))

    def windows(self, qkv, h, w, extra=({}, {})):
        """qkv (B, H*W, 3C) -> (B, H*W, C): each half of the channels attends within its windows,
        q, k, v padded with zeros at the bottom and right to multiples of the larger split side
        (unmasked, as the original), shifted blocks rolled by half a window and masked (`masks`);
        extra: each half's attention's further keywords."""
        b, n, c3 = qkv.shape
        c = c3 // 3
        m = max(self.split_size)
        hh, ww = h + (m - h % m) % m, w + (m - w % m) % m
        # zeros at the bottom and right up to multiples of m: one op at every size (ONNX export)
        grid = F.pad_to_multiple(F.reshape(qkv, (b, h, w, 3 * c)), m, "constant", axes=(1, 2))
        grid = F.reshape(grid, (b, hh, ww, 3, 2, c // 2))
        masks = self.masks(hh, ww, qkv.dtype) if self.shifted else (None, None)
        halves = []
        for i, attn in enumerate(self.attns):
            win = (attn.h_sp, attn.w_sp)
            shift = self.shift_size if i == 0 else self.shift_size[::-1]
            y = F.reshape(F.getitem(grid, (Ellipsis, i, slice(None))), (b, hh, ww, 3 * (c // 2)))
            if self.shifted:
                y = F.roll(y, (-shift[0], -shift[1]), (1, 2))
            y = F.window_reverse(attn(F.window_partition(y, win), masks[i], **extra[i]), win, hh, ww)
            if self.shifted:
                y = F.roll(y, shift, (1, 2))
            halves.append(F.reshape(y[:, :h, :w, :], (b, n, c // 2)))
        return F.cat(halves, 2)


def _v_image(qkv, h, w):
    """v of a packed qkv (B, H*W, 3C) as an image (B, C, H, W)."""
    c = qkv.shape[2] // 3
    return _image(F.getitem(qkv, (slice(None), slice(None), slice(2 * c, None))), h, w)


class AdaptiveSpatialAttention(RectangleWindows):
    """The spatial block's attention (the original's Adaptive_Spatial_Attention) on (B, H*W, C):
    the rectangle windows, with the adaptive interaction module beside them."""

    def __init__(self, dim, num_heads, reso, split_size, qkv_bias, qk_scale, drop, attn_drop,
                 rg_idx, b_idx):
        super().__init__()
        self.setup(dim, num_heads, reso, split_size, qkv_bias, qk_scale, drop, attn_drop, rg_idx,
                   b_idx)
        _interactions(self, dim)

    def forward(self, x, h, w):
        b, n, c = x.shape
        qkv = self.qkv(x)
        attened = self.windows(qkv, h, w)
        conv_x = self.dwconv(_v_image(qkv, h, w))
        channel_map = F.reshape(self.channel_interaction(conv_x), (b, 1, c))
        spatial_map = self.spatial_interaction(_image(attened, h, w))
        attened = attened * F.sigmoid(channel_map)
        conv_x = _tokens(F.sigmoid(spatial_map) * conv_x)
        return self.proj_drop(self.proj(attened + conv_x))


class AdaptiveChannelAttention(nn.Module):
    """The channel block's attention (the original's Adaptive_Channel_Attention) on (B, H*W, C):
    per head, its d channels attend to each other (rows of H*W values), through
    framework.functional.attention on (B, d, heads * H*W) with the temperature as per-head scale."""

    def __init__(self, dim, num_heads, qkv_bias, attn_drop, proj_drop):
        super().__init__()
        self.num_heads = num_heads
        self.temperature = nn.Parameter(np.ones((num_heads, 1, 1), np.float32))
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        _interactions(self, dim)

    def forward(self, x, h, w):
        b, n, c = x.shape
        heads, d = self.num_heads, c // self.num_heads
        qkv = self.qkv(x)
        v_img = _v_image(qkv, h, w)
        # (B, N, 3, heads, d) -> three (B, d, heads, N): a head's channels as tokens
        q, k, v = (F.permute(F.reshape(t, (b, n, heads, d)), (0, 3, 2, 1))
                   for t in F.chunk(F.reshape(qkv, (b, n, 3 * heads, d)), 3, 2))
        q, k = _l2_normalize(q), _l2_normalize(k)
        q, k, v = (F.reshape(t, (b, d, heads * n)) for t in (q, k, v))
        scale = F.reshape(self.temperature, (heads,))
        if self.training and self.attn_drop.p > 0:
            qh, kh, vh = (F.permute(F.reshape(t, (b, d, heads, n)), (0, 2, 1, 3)) for t in (q, k, v))
            attn = self.attn_drop(F.attention_softmax(qh @ F.transpose(kh, -2, -1), scale))
            y = F.permute(attn @ vh, (0, 2, 1, 3))  # (B, d, heads, N)
        else:
            y = F.reshape(F.attention(q, k, v, heads, scale), (b, d, heads, n))
        attened = F.reshape(F.permute(y, (0, 3, 2, 1)), (b, n, c))
        conv_x = self.dwconv(v_img)
        channel_map = self.channel_interaction(_image(attened, h, w))
        spatial_map = F.reshape(self.spatial_interaction(conv_x), (b, n, 1))
        attened = attened * F.sigmoid(spatial_map)
        conv_x = _tokens(conv_x * F.sigmoid(channel_map))
        return self.proj_drop(self.proj(attened + conv_x))


class SpatialGate(nn.Module):
    """(B, N, 2C) -> x1 * dwconv(norm(x2)) (B, N, C), the halves along the channels."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.conv = nn.Conv2d(dim, dim, 3, padding=1, groups=dim)

    def forward(self, x, h, w):
        x1, x2 = F.chunk(x, 2, 2)
        return x1 * _tokens(self.conv(_image(self.norm(x2), h, w)))


class SGFN(nn.Module):
    """The spatial-gate feed-forward network: fc1 (dim -> hidden), GELU, SpatialGate, fc2."""

    def __init__(self, dim: int, hidden: int, drop: float = 0.0):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.sg = SpatialGate(hidden // 2)
        self.fc2 = nn.Linear(hidden // 2, dim)
        self.drop = nn.Dropout(drop)

    def forward(self, x, h, w):
        x = self.drop(self.sg(self.drop(self.act(self.fc1(x))), h, w))
        return self.drop(self.fc2(x))


class DATB(nn.Module):
    """x + drop_path(attn(norm1(x))), then x + drop_path(ffn(norm2(x))); the attention is spatial
    for an even block index, channel for an odd one. The original's SGFN gets no dropout."""

    def __init__(self, dim, num_heads, reso, split_size, expansion_factor, qkv_bias, qk_scale,
                 drop, attn_drop, drop_path, rg_idx, b_idx):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        if b_idx % 2 == 0:
            self.attn = AdaptiveSpatialAttention(dim, num_heads, reso, split_size, qkv_bias,
                                                 qk_scale, drop, attn_drop, rg_idx, b_idx)
        else:
            self.attn = AdaptiveChannelAttention(dim, num_heads, qkv_bias, attn_drop, drop)
        self.drop_path = nn.DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.ffn = SGFN(dim, int(dim * expansion_factor))
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x, x_size):
        h, w = x_size
        x = x + self.drop_path(self.attn(self.norm1(x), h, w))
        return x + self.drop_path(self.ffn(self.norm2(x), h, w))


class ResidualGroup(nn.Module):
    """`depth` DATBs, then a conv on the image (resi_connection) and the group's skip."""

    def __init__(self, dim, depth, resi_connection, drop_paths, rg_idx, **kw):
        super().__init__()
        self.blocks = nn.ModuleList([DATB(dim, drop_path=drop_paths[i], rg_idx=rg_idx, b_idx=i, **kw)
                                     for i in range(depth)])
        self.conv = _resi_conv(dim, resi_connection)

    def forward(self, x, x_size):
        y = x
        for blk in self.blocks:
            y = blk(y, x_size)
        return x + _tokens(self.conv(_image(y, *x_size)))


class Tokens(nn.Module):
    """(B, C, H, W) -> (B, H*W, C): the original's einops Rearrange (no weights; before_RG.0)."""

    def forward(self, x):
        return _tokens(x)


def window_split(shapes: dict, prefix: str, index: str = "relative_position_index",
                 offsets: str = "rpe_biases") -> tuple[int, int]:
    """The rectangle window (h, w), h <= w, of the SpatialAttention at `prefix` (its attns.0) from
    its buffers' shapes (`prefix`.`index`, `prefix`.`offsets`; prefix "" for top-level keys):
    N = h w tokens and (2h - 1)(2w - 1) offsets fix {h, w}, not their order."""
    dot = f"{prefix}." if prefix else ""
    n = need(shapes, f"{dot}{index}", 2)[0]
    rows = need(shapes, f"{dot}{offsets}", 2)[0]
    total, rem = divmod(4 * n + 1 - rows, 2)  # (2h-1)(2w-1) = 4hw - 2(h+w) + 1
    root = math.isqrt(max(total * total - 4 * n, 0))
    h_sp = (total - root) // 2
    if rem or root * root != total * total - 4 * n or h_sp < 1 or h_sp * (total - h_sp) != n:
        raise NoMatch(f"{prefix}: {n} tokens and {rows} offsets are no h x w window")
    return h_sp, total - h_sp


def img_size_of_masks(shapes: dict, prefix: str, depth: int):
    """img_size from the first stored shifted-window mask of blocks `prefix`.0..depth-1 (nW windows
    of N tokens: img_size^2 = nW N), or None when no block stores one."""
    for j in range(depth):
        key = f"{prefix}.{j}.attn.attn_mask_0"
        if key in shapes:
            nw, tokens = need(shapes, key, 3)[:2]
            img_size = math.isqrt(nw * tokens)
            if img_size * img_size != nw * tokens:
                raise NoMatch(f"{key}: {nw} windows of {tokens} tokens are no square grid")
            return img_size
    return None


def ratio_of(features: int, dim: int) -> float:
    """The ratio r with int(dim * r) == features (features / dim, nudged up an ulp where the
    product rounds below), for keywords the keys give as a width (expansion, mlp or c ratio)."""
    r = features / dim
    return float(np.nextafter(r, np.inf)) if int(dim * r) < features else r


def position_bias_parameters(c: int, heads: int) -> int:
    """The two SpatialAttentions' DynamicPosBias MLPs of a block of c features and `heads` heads
    (embed_dim // 32 features each, heads // 2 outputs)."""
    pd = c // 32
    pos = linear(2, pd) + 2 * (norm(pd) + linear(pd, pd)) + norm(pd)
    return 2 * (pos + linear(pd, heads // 2))


_WINDOW_BUFFERS = ("rpe_biases", "relative_position_index", "attn_mask_0", "attn_mask_1")


def check_window_buffers(model, state_dict, name: str, buffers=_WINDOW_BUFFERS,
                         first="attns.0.rpe_biases") -> None:
    """Before a load: the window buffers of the file (keys ending in `buffers`: the offsets, the
    index, the masks) must be `model`'s, which split_size and img_size fix; else the file was made
    with another split_size (the weights' shapes cannot tell (8, 32) from (32, 8)) or img_size, and
    the ValueError says which (read from the first window's offsets, the key ending in `first`)."""
    own = model.state_dict()
    for key, value in state_dict.items():
        if key.endswith(tuple(buffers)) and key in own:
            arr = np.asarray(value.data if isinstance(value, sg.Tensor) else value, np.float64)
            if arr.shape == own[key].shape and not np.array_equal(arr, own[key].astype(np.float64)):
                hint = ""
                offsets = next((v for k, v in state_dict.items() if k.endswith(first)), None)
                offsets = np.asarray(getattr(offsets, "data", offsets))
                if offsets.ndim == 2 and len(offsets):  # its last offset is (h - 1, w - 1)
                    hint = f": the file's split_size is {tuple(int(v) + 1 for v in offsets[-1])}"
                raise ValueError(f"{name}.load_state_dict: {key} differs from this model's "
                                 f"(split_size {model.split_size}){hint}; build the model with "
                                 f"the file's split_size (and img_size)")


@MODELS.register()
class DAT(nn.Module):
    """DAT: (N, in_chans, h, w) in [0, 1] -> (N, in_chans, h*scale, w*scale), any h, w.

    Args (the original's names and defaults; `scale` is its `upscale`):
        img_size: training patch side, default 64: fixes the stored attn_mask_0 / attn_mask_1
            (a multiple of both split sides); other sizes run too.
        in_chans: image channels, default 3 (the output has as many).
        embed_dim: token features, default 180 (DAT-light: 60); even and at least 16 (the
            spatial interaction has embed_dim // 16 channels; below 32 the position-bias MLP has
            no features, as in the original).
        split_size: (h, w) of the spatial windows, default (2, 4) (published: (8, 32); DAT-S
            (8, 16)); each side >= 2.
        depth: DATBs per residual group, default (2, 2, 2, 2) (published: six 6s; light: (18,)).
        num_heads: heads per group, default (2, 2, 2, 2) (published 6): a channel block uses all
            (dividing embed_dim), a spatial block half of them per half of the channels.
        expansion_factor: SGFN hidden features / embed_dim, default 4 (DAT-2, light: 2).
        qkv_bias: biases on the qkv linears, default True. qk_scale: the spatial attention's
            factor, default None (head_dim^-0.5).
        drop_rate, attn_drop_rate: dropout, default 0. drop_path_rate: stochastic depth, rising
            linearly from 0, default 0.1.
        scale: default 2: "pixelshuffle" 2^n or 3, "pixelshuffledirect" any.
        img_range: images are multiplied by this after the mean shift, default 1 (every
            published file).
        resi_connection: "1conv" (default) or "3conv".
        upsampler: "pixelshuffle" (default) or "pixelshuffledirect" (DAT-light).
    """

    def __init__(self, img_size: int = 64, in_chans: int = 3, embed_dim: int = 180,
                 split_size=(2, 4), depth=(2, 2, 2, 2), num_heads=(2, 2, 2, 2),
                 expansion_factor: float = 4.0, qkv_bias: bool = True, qk_scale=None,
                 drop_rate: float = 0.0, attn_drop_rate: float = 0.0, drop_path_rate: float = 0.1,
                 scale: int = 2, img_range: float = 1.0, resi_connection: str = "1conv",
                 upsampler: str = "pixelshuffle"):
        super().__init__()
        name = "DAT"
        img_size = int_arg(name, "img_size", img_size)
        in_chans = int_arg(name, "in_chans", in_chans)
        embed_dim = int_arg(name, "embed_dim", embed_dim)
        # the original's own limits: two halves of equal width, and the spatial interaction's
        # embed_dim // 16 convolution needs a channel (torch refuses a 0-channel one when it runs);
        # below 32 the position-bias MLP has embed_dim // 32 = 0 features, which the original
        # builds and runs: its bias is then its last Linear's bias alone
        if embed_dim < 16 or embed_dim % 2:
            raise ValueError(f"{name}: embed_dim must be even and at least 16 (the spatial "
                             f"interaction has embed_dim // 16 channels), got {embed_dim}")
        split_size = pair(name, "split_size", split_size, minimum=2)
        if img_size % split_size[0] or img_size % split_size[1]:
            raise ValueError(f"{name}: img_size {img_size} must be a multiple of both split_size "
                             f"sides {split_size} (the stored masks' grid)")
        depth = int_list(name, "depth", depth, minimum=0)
        num_heads = int_list(name, "num_heads", num_heads, length=len(depth))
        for d, heads in zip(depth, num_heads):
            if d and (embed_dim % heads or heads < 2 or (embed_dim // 2) % (heads // 2)):
                raise ValueError(f"{name}: num_heads {heads} must divide embed_dim {embed_dim}, "
                                 f"be at least 2 and its half divide embed_dim / 2")
        expansion_factor = number(name, "expansion_factor", expansion_factor, low=0, low_open=True)
        hidden = int(embed_dim * expansion_factor)
        if hidden < 2 or hidden % 2:
            raise ValueError(f"{name}: expansion_factor {expansion_factor} gives {hidden} SGFN "
                             f"features: the spatial gate needs an even number, at least 2")
        qkv_bias = flag(name, "qkv_bias", qkv_bias)
        if qk_scale is not None:
            qk_scale = number(name, "qk_scale", qk_scale, low=0, low_open=True)
        drop_rate, attn_drop_rate, drop_path_rate = drop_rates(name, drop_rate, attn_drop_rate,
                                                               drop_path_rate)
        self.img_range = number(name, "img_range", img_range, low=0, low_open=True)
        resi_connection = choice(name, "resi_connection", resi_connection, ("1conv", "3conv"))
        self.upsampler = choice(name, "upsampler", upsampler, ("pixelshuffle", "pixelshuffledirect"))
        self.scale = (upsampler_scale(name, scale) if self.upsampler == "pixelshuffle"
                      else int_arg(name, "scale", scale))
        self.split_size = split_size
        self.mean = (np.float32(_RGB_MEAN) if in_chans == 3 else np.zeros(1, np.float32)).reshape(1, -1, 1, 1)

        self.conv_first = nn.Conv2d(in_chans, embed_dim, 3, padding=1)
        self.before_RG = nn.Sequential(Tokens(), nn.LayerNorm(embed_dim))
        rates = np.linspace(0, drop_path_rate, sum(depth)).tolist()
        self.layers = nn.ModuleList([ResidualGroup(
            embed_dim, d, resi_connection, rates[sum(depth[:i]):sum(depth[:i + 1])], i,
            num_heads=num_heads[i], reso=img_size, split_size=split_size,
            expansion_factor=expansion_factor, qkv_bias=qkv_bias, qk_scale=qk_scale,
            drop=drop_rate, attn_drop=attn_drop_rate) for i, d in enumerate(depth)])
        self.norm = nn.LayerNorm(embed_dim)
        self.conv_after_body = _resi_conv(embed_dim, resi_connection)
        if self.upsampler == "pixelshuffle":
            self.conv_before_upsample = nn.Sequential(nn.Conv2d(embed_dim, _NUM_FEAT, 3, padding=1),
                                                      nn.LeakyReLU())  # torch's default slope 0.01
            self.upsample = PixelShuffleUpsampler(self.scale, _NUM_FEAT, name)
            self.conv_last = nn.Conv2d(_NUM_FEAT, in_chans, 3, padding=1)
        else:
            self.upsample = UpsampleOneStep(self.scale, embed_dim, in_chans)
        # the original's _init_weights: Linear weights ~ trunc_normal(std 0.02), biases 0; norms
        # ones / zeros (srgrad's defaults); convolutions torch's default
        trunc_normal_linears(self)

    def forward_features(self, x):
        h, w = x.shape[2:]
        x = self.before_RG(x)
        for layer in self.layers:
            x = layer(x, (h, w))
        return _image(self.norm(x), h, w)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"DAT: expected input (N, C, H, W), got shape {tuple(x.shape)}")
        mean = self.mean.astype(x.dtype, copy=False)
        x = self.conv_first((x - mean) * self.img_range)
        x = self.conv_after_body(self.forward_features(x)) + x
        if self.upsampler == "pixelshuffle":
            x = self.conv_last(self.upsample(self.conv_before_upsample(x)))
        else:
            x = self.upsample(x)
        return x / self.img_range + mean

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule, from shapes: in_chans, embed_dim from conv_first; per group its blocks
        (depth) and heads (a channel block's temperature; with one block, twice the spatial heads:
        an odd count would build the same model); expansion_factor from fc1; qkv_bias, upsampler
        (conv_last: "pixelshuffle"), resi_connection from which keys exist; scale from the
        upsampler; img_size from a stored mask (nW windows of N tokens: img_size^2 = nW N), else 64
        (or a multiple of both window sides: with no shifted block it changes nothing). split_size: the window
        has N = h w tokens and (2h - 1)(2w - 1) offsets (rpe_biases), which fix {h, w} but not their
        order (spandrel reads the values); every published DAT file has h <= w ((8, 32), (8, 16)),
        so that order is assumed (and said); a file with the other order is refused when loaded
        (DAT.load_state_dict compares the buffers). img_range is not in the weights: 1, as every
        published file and spandrel. The drop rates change nothing at inference: defaults."""
        need(shapes, "before_RG.1.weight")
        embed_dim, in_chans = need(shapes, "conv_first.weight", 4)[:2]
        layers = count(shapes, "layers", ".conv.weight") or count(shapes, "layers", ".conv.0.weight")
        if not layers:
            raise NoMatch("no residual group (layers.0.conv)")
        given = known.get("num_heads") if isinstance(known.get("num_heads"), (list, tuple)) else ()
        depth, heads, hidden, split, img_size = [], [], None, None, None
        for i in range(layers):
            prefix = f"layers.{i}.blocks"
            d = count(shapes, prefix, ".norm1.weight")
            depth.append(d)
            if d >= 2:
                heads.append(need(shapes, f"{prefix}.1.attn.temperature", 3)[0])
            elif d == 1:
                heads.append(2 * need(shapes, f"{prefix}.0.attn.attns.0.pos.pos3.2.weight", 2)[0])
            else:
                heads.append(given[i] if i < len(given) else 2)
            if not d:
                continue
            hidden = need(shapes, f"{prefix}.0.ffn.fc1.weight", 2)[0]
            split = window_split(shapes, f"{prefix}.0.attn.attns.0")
            if img_size is None:
                img_size = img_size_of_masks(shapes, prefix, d)
        if split is None:
            raise NoMatch("no DAT block")
        expansion = ratio_of(hidden, embed_dim)
        if "conv_after_body.weight" in shapes:
            resi = "1conv"
        elif "conv_after_body.4.weight" in shapes:
            resi = "3conv"
        else:
            raise NoMatch("no conv_after_body")
        if "conv_last.weight" in shapes:
            upsampler, scale = "pixelshuffle", PixelShuffleUpsampler.detect_scale(shapes, "upsample",
                                                                                 _NUM_FEAT)
        else:
            upsampler = "pixelshuffledirect"
            out = need(shapes, "upsample.0.weight", 4)[0]
            scale = math.isqrt(out // in_chans)
            if scale * scale * in_chans != out:
                raise NoMatch(f"upsample.0 has {out} outputs: not in_chans {in_chans} * scale^2")
        if img_size is None:  # no stored mask: any multiple of both sides builds the same weights
            img_size = 64 if 64 % split[0] == 0 == 64 % split[1] else math.lcm(*split)
        if split[0] != split[1]:
            split = Assumed(split, "the weights' shapes fix the window's sides, not their order; "
                                   "every published DAT file has the shorter first")
        return {"img_size": img_size, "in_chans": in_chans,
                "embed_dim": embed_dim, "split_size": split, "depth": tuple(depth),
                "num_heads": tuple(heads), "expansion_factor": expansion,
                "qkv_bias": "layers.0.blocks.0.attn.qkv.bias" in shapes, "scale": scale,
                "resi_connection": resi, "upsampler": upsampler}

    def load_state_dict(self, state_dict, strict: bool = True):
        """As Module's, after check_window_buffers: the file's window buffers must be this
        model's."""
        check_window_buffers(self, state_dict, "DAT")
        return super().load_state_dict(state_dict, strict)

    @staticmethod
    def card(spec: dict):
        """conv_first, the token norm, residual groups of DATBs (spatial blocks: qkv, proj, two
        dynamic position-bias MLPs of embed_dim // 32 features; channel blocks: qkv, proj, the
        temperatures; both: the interactions (a depthwise conv and two small convs with batch
        norms), the SGFN, two norms) with their conv, the reconstruction. The attention pads to
        the split windows inside; the channel attention's (heads, d, d) map does not grow with
        the image."""
        c, heads, (hs, ws) = spec["embed_dim"], list(spec["num_heads"]), spec["split_size"]
        hidden = int(c * spec["expansion_factor"])
        g = hidden // 2
        inter = (conv(c, c, 3, groups=c) + norm(c) + conv(c, c // 8, 1) + norm(c // 8)
                 + conv(c // 8, c, 1) + conv(c, c // 16, 1) + norm(c // 16) + conv(c // 16, 1, 1))
        common = 2 * norm(c) + linear(c, 3 * c, spec["qkv_bias"]) + linear(c, c) + inter + (
            linear(c, hidden) + norm(g) + conv(g, g, 3, groups=g) + linear(g, c))
        resi = resi_parameters(c, spec["resi_connection"])
        params = conv(spec["in_chans"], c) + 2 * norm(c) + resi
        for d, h in zip(spec["depth"], heads):
            spatial = common + position_bias_parameters(c, h)
            params += (d + 1) // 2 * spatial + d // 2 * (common + h) + resi
        up, up_act = reconstruction(spec)
        multiple = math.lcm(hs, ws)
        act = max([h // 2 * hs * ws for h in heads] + [3 * c, hidden, up_act,
                   -(-c * c // (min(heads) * multiple * multiple))])
        return swin_card(spec, params + up, act, multiple)
