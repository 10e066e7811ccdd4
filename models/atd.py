"""ATD, the Adaptive Token Dictionary transformer (Zhang et al., "Transcending the Limit of Local
Window: Advanced Super-Resolution Transformer with Adaptive Token Dictionary", CVPR 2024;
LabShuHangGU/Adaptive-Token-Dictionary, as spandrel 0.4.2 and traiNNer-redux's `atd` / `atd_light`
read it): SwinIR's layout (mean shift -> conv_first -> residual groups on tokens -> norm ->
conv_after_body + long skip -> reconstruction -> mean shift back) whose block joins three
attentions on one shared qkv linear of the normed tokens:

- (shifted-)window self-attention with a relative-position bias (attn_win: SwinIR's, the table
  indexed by the model's relative_position_index_SA buffer, the shifted mask computed per size);
- token-dictionary cross-attention (TDCA, attn_atd): the tokens (queries wq, reduced to
  reducted_dim) attend to the group's learnt dictionary of num_tokens entries (keys wk, values wv),
  cosine similarity times 1 + clamp(scale, 0, 1) log(num_tokens) per entry, softmax;
- adaptive category attention (AC-MSA, attn_aca): each token's category is its most similar
  dictionary entry (the argmax of TDCA's attention); tokens sorted by category
  (framework.functional.sort.argsort, torch's CPU order among equal categories, as the original's
  torch.sort(stable=False) on a CPU), cut into groups of category_size (the last group padded with
  mirrored tokens: framework.functional.category), self-attention inside each group with the logit
  scale exp(min(logit_scale, log 100)) and no bias, scattered back, proj.

x + win + tdca + acmsa, then x + ConvFFN(norm2 x) (fc1, GELU, + depthwise conv + GELU, fc2). Every
block but a group's last refines the dictionary from the tokens: td = s td + (1 - s) softmax(
InstanceNorm(attn^T)) x, s = sigmoid(sigma).

ATD (210 features, 6 groups of 6 blocks, 6 heads, window 16, category_size 256, 128 tokens,
reducted_dim 20, ConvFFN kernel 5, MLP x2, pixelshuffle) and ATD-light (48, 4 x 6, 4 heads, window
16, category_size 128, 64 tokens, reducted_dim 8, kernel 7, MLP x1, pixelshuffledirect) are this
architecture at two sizes. Keys, order and shapes are the original's (relative_position_index_SA
on the model; `no_norm`, a zero buffer, when built with norm=False: no mean shift nor img_range).

Any input size runs: padded to at least 8 pixels (spandrel's call API: SizeRequirements(minimum=8),
reflect then replicate) and then, as the original, to a multiple of the window by a symmetric
reflection (torch.cat([x, x.flip(2)], 2)[:, :, :H]); the output cropped. A window wider than twice
that (never published) first pads to half the window, where the original fails.
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, linear, norm
from framework.check import choice, flag, int_arg, int_list, number, pair
from framework.detect import Assumed, NoMatch, count, need
from framework.functional.attention import relative_position_index, shift_mask
from framework.functional.category import category_group, category_ungroup
from framework.functional.sort import argsort
from framework.nn import init
from framework.registry import MODELS

from ._blocks import PixelShuffleUpsampler, trunc_normal_linears, upsampler_scale
from .swinir import PatchEmbed, PatchUnEmbed, _resi_conv, build_reconstruction, resi_parameters

_RGB_MEAN = (0.4488, 0.4371, 0.4040)
_NUM_FEAT = 64  # the reconstruction's features, fixed in the original
_UPSAMPLERS = ("pixelshuffle", "pixelshuffledirect", "nearest+conv", "")
_MIN_SIZE = 8  # spandrel's SizeRequirements(minimum=8)
_LOG_100 = float(np.float32(math.log(100.0)))  # the original's torch.log(torch.tensor(1 / 0.01))


class WindowAttention(nn.Module):
    """The window branch between the shared qkv linear and its proj: qkv windows (B nW, w^2, 3C)
    -> (B nW, w^2, C), scale head_dim^-0.5, the bias table indexed by the model's buffer."""

    def __init__(self, dim: int, window_size: int, num_heads: int):
        super().__init__()
        self.dim, self.window_size, self.num_heads = dim, window_size, num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.relative_position_bias_table = nn.Parameter(
            np.zeros(((2 * window_size - 1) ** 2, num_heads), np.float32))
        self.proj = nn.Linear(dim, dim)
        init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def forward(self, qkv, index, mask=None):
        n = self.window_size ** 2
        table = F.getitem(self.relative_position_bias_table, index.data.reshape(-1))
        bias = F.permute(F.reshape(table, (n, n, self.num_heads)), (2, 0, 1))
        return self.proj(F.window_attention(qkv, self.num_heads, self.scale, bias, mask))


def _normalize(x):
    """torch's F.normalize(x, dim=-1): x / max(||x||, 1e-12)."""
    return x / F.clamp(F.sqrt(F.sum(x * x, -1, keepdims=True)), min=1e-12)


class ATD_CA(nn.Module):
    """Token-dictionary cross-attention: x (B, N, C), td (B, M, C) -> (x (B, N, C), its
    attention (B, N, M))."""

    def __init__(self, dim: int, num_tokens: int, reducted_dim: int, qkv_bias: bool):
        super().__init__()
        self.num_tokens = num_tokens
        self.scale = nn.Parameter(np.full(num_tokens, 0.5, np.float32))
        self.wq = nn.Linear(dim, reducted_dim, bias=qkv_bias)
        self.wk = nn.Linear(dim, reducted_dim, bias=qkv_bias)
        self.wv = nn.Linear(dim, dim, bias=qkv_bias)

    def forward(self, x, td):
        q, k, v = self.wq(x), self.wk(td), self.wv(td)
        attn = F.matmul(_normalize(q), F.transpose(_normalize(k), -2, -1))  # (B, N, M)
        attn = attn * (F.clamp(self.scale, 0.0, 1.0) * float(np.log(self.num_tokens)) + 1.0)
        attn = F.softmax(attn, -1)
        return F.matmul(attn, v), attn


class AC_MSA(nn.Module):
    """Adaptive category attention: qkv (B, N, 3C), sim (B, N, M) -> (B, N, C) (module
    docstring)."""

    def __init__(self, dim: int, num_heads: int, category_size: int, qkv_bias: bool,
                 stable: bool = False):
        super().__init__()
        self.num_heads, self.category_size, self.stable = num_heads, category_size, stable
        self.logit_scale = nn.Parameter(np.full((1, 1), np.log(10.0), np.float32))
        self.proj = nn.Linear(dim, dim, bias=qkv_bias)

    def forward(self, qkv, sim):
        order = argsort(F.argmax(sim, -1), -1, stable=self.stable)  # torch.sort's CPU order
        groups = category_group(qkv, order, self.category_size)  # (B ng, gs, 3C)
        scale = F.exp(F.clamp(self.logit_scale, max=_LOG_100))
        scale = F.expand(F.reshape(scale, (1,)), (self.num_heads,))
        y = F.window_attention(groups, self.num_heads, scale)
        return self.proj(category_ungroup(y, order))


class ConvFFN(nn.Module):
    """fc1, GELU, x + dwconv(x) (a depthwise conv + GELU on the token grid), fc2 on (B, N, C)."""

    def __init__(self, dim: int, hidden: int, kernel_size: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.dwconv = nn.Module()
        self.dwconv.depthwise_conv = nn.Sequential(
            nn.Conv2d(hidden, hidden, kernel_size, padding=(kernel_size - 1) // 2, groups=hidden),
            nn.GELU())
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x, x_size):
        x = self.act(self.fc1(x))
        b, n, c = x.shape
        grid = F.reshape(F.transpose(x, 1, 2), (b, c, *x_size))
        y = F.transpose(F.flatten(self.dwconv.depthwise_conv(grid), 2), 1, 2)
        return self.fc2(x + y)


class InstanceNorm1d(nn.Module):
    """torch's InstanceNorm1d(num_features, affine=True) on (B, num_features, L)."""

    def __init__(self, num_features: int):
        super().__init__()
        self.weight = nn.Parameter(np.ones(num_features, np.float32))
        self.bias = nn.Parameter(np.zeros(num_features, np.float32))

    def forward(self, x):
        b, c, n = x.shape
        y = F.instance_norm(F.reshape(x, (b, c, n, 1)), weight=self.weight, bias=self.bias)
        return F.reshape(y, (b, c, n))


class ATDTransformerLayer(nn.Module):
    """One block on tokens (B, H*W, C) and the dictionary (B, M, C) -> both (module docstring)."""

    def __init__(self, dim, num_heads, window_size, shift_size, category_size, num_tokens,
                 reducted_dim, convffn_kernel_size, mlp_ratio, qkv_bias, is_last, stable):
        super().__init__()
        self.window_size, self.shift_size, self.is_last = window_size, shift_size, is_last
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        if not is_last:
            self.norm3 = InstanceNorm1d(num_tokens)
            self.sigma = nn.Parameter(np.zeros((num_tokens, 1), np.float32))
        self.wqkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.attn_win = WindowAttention(dim, window_size, num_heads)
        self.attn_atd = ATD_CA(dim, num_tokens, reducted_dim, qkv_bias)
        self.attn_aca = AC_MSA(dim, num_heads, category_size, qkv_bias, stable)
        self.convffn = ConvFFN(dim, int(dim * mlp_ratio), convffn_kernel_size)

    def forward(self, x, td, x_size, index):
        h, w = x_size
        b, n, c = x.shape
        ws, shift = self.window_size, self.shift_size
        y = self.norm1(x)
        qkv = self.wqkv(y)
        x_atd, sim = self.attn_atd(y, td)
        x_aca = self.attn_aca(qkv, sim)
        grid = F.reshape(qkv, (b, h, w, 3 * c))
        mask = None
        if shift:
            grid = F.roll(grid, (-shift, -shift), (1, 2))
            mask = shift_mask(h, w, ws, shift, x.dtype)
        win = F.window_reverse(self.attn_win(F.window_partition(grid, ws), index, mask), ws, h, w)
        if shift:
            win = F.roll(win, (shift, shift), (1, 2))
        x = x + F.reshape(win, (b, n, c)) + x_atd + x_aca
        x = x + self.convffn(self.norm2(x), x_size)
        if not self.is_last:  # adaptive refinement of the dictionary
            mask_soft = F.softmax(self.norm3(F.transpose(sim, -1, -2)), -1)  # (B, M, N)
            s = F.sigmoid(self.sigma)
            td = s * td + (1.0 - s) * F.matmul(mask_soft, x)
        return x, td


class BasicBlock(nn.Module):
    """`depth` blocks (the odd ones on windows shifted by half a window) sharing one learnt
    dictionary td (num_tokens, C), refined along the way."""

    def __init__(self, dim, depth, num_tokens, window_size, **layer_kw):
        super().__init__()
        self.td = nn.Parameter(np.zeros((num_tokens, dim), np.float32))
        init.normal_(self.td)  # torch.randn
        self.layers = nn.ModuleList([
            ATDTransformerLayer(dim, window_size=window_size,
                                shift_size=0 if i % 2 == 0 else window_size // 2,
                                num_tokens=num_tokens, is_last=i == depth - 1, **layer_kw)
            for i in range(depth)])

    def forward(self, x, x_size, index):
        td = F.unsqueeze(self.td, 0)  # (1, M, C): broadcast over the batch (no size in the graph)
        for layer in self.layers:
            x, td = layer(x, td, x_size, index)
        return x


class ATDB(nn.Module):
    """Residual group: tokens x -> embed(conv(unembed(blocks(x)))) + x; conv '1conv' or '3conv'."""

    def __init__(self, dim, resi_connection, **block_kw):
        super().__init__()
        self.patch_embed = PatchEmbed(dim, norm=False)
        self.patch_unembed = PatchUnEmbed()
        self.residual_group = BasicBlock(dim, **block_kw)
        self.conv = _resi_conv(dim, resi_connection)

    def forward(self, x, x_size, index):
        y = self.patch_unembed(self.residual_group(x, x_size, index), x_size)
        return self.patch_embed(self.conv(y)) + x


@MODELS.register()
class ATD(nn.Module):
    """ATD: (N, in_chans, h, w) in [0, 1] -> (N, in_chans, h*scale, w*scale), any h, w.

    Args (the original's names and defaults but two: `scale` is its `upscale`, and with the
    upsampler it defaults to the x2 pixel shuffle):
        img_size: training patch side (int or (H, W)), default 64: only the absolute position
            embedding's size (ape); the shifted-window mask is computed for every input size.
        patch_size: default 1.
        in_chans: image channels, default 3 (the output has as many).
        embed_dim: token features, default 90 (ATD 210, ATD-light 48).
        depths: blocks per group, default (6, 6, 6, 6) (ATD 6 x 6, ATD-light 4 x 6).
        num_heads: heads per group (each divides embed_dim), default (6, 6, 6, 6) (ATD-light 4).
        window_size: attention window side, default 8 (published: 16).
        category_size: tokens per AC-MSA group, default 256 (ATD-light 128).
        num_tokens: entries of each group's token dictionary, default 64 (ATD 128).
        reducted_dim: TDCA's query / key width, default 4 (ATD 20, ATD-light 8).
        convffn_kernel_size: the ConvFFN's depthwise kernel (odd), default 5 (ATD-light 7).
        mlp_ratio: ConvFFN hidden features / embed_dim, default 2 (ATD-light 1).
        qkv_bias: biases on qkv, wq / wk / wv and AC-MSA's proj, default True.
        ape: a learnt absolute position embedding (the padded input must then be img_size),
            default False.
        patch_norm: LayerNorm after the patch embedding, default True.
        scale: upscaling factor, default 2: "pixelshuffle" 2^n or 3, "pixelshuffledirect" any,
            "nearest+conv" 4 (the original's only one), "" 1.
        img_range: images are multiplied by this after the mean shift, default 1.
        upsampler: "pixelshuffle" (default; ATD), "pixelshuffledirect" (ATD-light),
            "nearest+conv" (real-world x4), "" (x1 restoration: x + conv_last(features)).
        resi_connection: the conv closing each group and the body, "1conv" (default) or "3conv".
        norm: the mean shift and img_range, default True; False registers the original's
            `no_norm` buffer and feeds the image as it is.
        category_order: the order of the tokens of one category when AC-MSA sorts them, which
            decides the groups where a category spans two: "torch_cpu" (default: the original's
            torch.sort(stable=False) on a CPU, spandrel's image there) or "stable" (image order:
            what an ONNX graph computes; export with it). Changes no weight.
    """

    def __init__(self, img_size=64, patch_size=1, in_chans: int = 3, embed_dim: int = 90,
                 depths=(6, 6, 6, 6), num_heads=(6, 6, 6, 6), window_size: int = 8,
                 category_size: int = 256, num_tokens: int = 64, reducted_dim: int = 4,
                 convffn_kernel_size: int = 5, mlp_ratio: float = 2.0, qkv_bias: bool = True,
                 ape: bool = False, patch_norm: bool = True, scale: int = 2,
                 img_range: float = 1.0, upsampler: str = "pixelshuffle",
                 resi_connection: str = "1conv", norm: bool = True,
                 category_order: str = "torch_cpu"):
        super().__init__()
        name = "ATD"
        img_size = pair(name, "img_size", img_size, minimum=1)
        patch_size = pair(name, "patch_size", patch_size, minimum=1)
        in_chans = int_arg(name, "in_chans", in_chans)
        embed_dim = int_arg(name, "embed_dim", embed_dim)
        depths = int_list(name, "depths", depths, minimum=1)
        num_heads = int_list(name, "num_heads", num_heads, length=len(depths))
        bad = [h for h in num_heads if embed_dim % h]
        if bad:
            raise ValueError(f"{name}: num_heads must divide embed_dim {embed_dim}, got {bad[0]}")
        self.window_size = int_arg(name, "window_size", window_size, 2)
        category_size = int_arg(name, "category_size", category_size)
        num_tokens = int_arg(name, "num_tokens", num_tokens)
        reducted_dim = int_arg(name, "reducted_dim", reducted_dim)
        kernel = int_arg(name, "convffn_kernel_size", convffn_kernel_size)
        if kernel % 2 == 0:
            raise ValueError(f"{name}: convffn_kernel_size must be odd (a 'same' depthwise conv), "
                             f"got {kernel}")
        mlp_ratio = number(name, "mlp_ratio", mlp_ratio, low=0, low_open=True)
        if int(embed_dim * mlp_ratio) < 1:
            raise ValueError(f"{name}: mlp_ratio {mlp_ratio} leaves the ConvFFN no hidden feature "
                             f"(int(embed_dim * mlp_ratio) = 0)")
        qkv_bias = flag(name, "qkv_bias", qkv_bias)
        self.ape = flag(name, "ape", ape)
        patch_norm = flag(name, "patch_norm", patch_norm)
        self.img_range = number(name, "img_range", img_range, low=0, low_open=True)
        self.upsampler = choice(name, "upsampler", upsampler, _UPSAMPLERS)
        resi_connection = choice(name, "resi_connection", resi_connection, ("1conv", "3conv"))
        if resi_connection == "3conv" and embed_dim < 4:
            raise ValueError(f"{name}: resi_connection '3conv' needs embed_dim >= 4 (it narrows to "
                             f"embed_dim // 4), got {embed_dim}")
        self.scale = self._check_scale(name, scale)
        self.norm_input = flag(name, "norm", norm)
        self.category_order = choice(name, "category_order", category_order,
                                     ("torch_cpu", "stable"))
        resolution = (img_size[0] // patch_size[0], img_size[1] // patch_size[1])
        if min(resolution) < 1:
            raise ValueError(f"{name}: img_size {img_size} is smaller than patch_size {patch_size}")
        self.patches_resolution = resolution
        self.mean = (np.float32(_RGB_MEAN) if in_chans == 3
                     else np.zeros(1, np.float32)).reshape(1, -1, 1, 1)

        # the original's order: its own parameter and buffers first, then the modules
        if self.ape:
            self.absolute_pos_embed = nn.Parameter(
                np.zeros((1, resolution[0] * resolution[1], embed_dim), np.float32))
            init.trunc_normal_(self.absolute_pos_embed, std=0.02)
        if not self.norm_input:
            self.register_buffer("no_norm", np.zeros(1, np.float32))
        self.register_buffer("relative_position_index_SA",
                             relative_position_index(self.window_size, self.window_size))
        self.conv_first = nn.Conv2d(in_chans, embed_dim, 3, padding=1)
        self.patch_embed = PatchEmbed(embed_dim, patch_norm)
        self.patch_unembed = PatchUnEmbed()
        self.layers = nn.ModuleList([ATDB(
            embed_dim, resi_connection, depth=d, num_heads=num_heads[i],
            window_size=self.window_size, category_size=category_size, num_tokens=num_tokens,
            reducted_dim=reducted_dim, convffn_kernel_size=kernel, mlp_ratio=mlp_ratio,
            qkv_bias=qkv_bias, stable=self.category_order == "stable")
            for i, d in enumerate(depths)])
        self.norm = nn.LayerNorm(embed_dim)
        self.conv_after_body = _resi_conv(embed_dim, resi_connection)
        self._reconstruction(embed_dim, in_chans)
        trunc_normal_linears(self)  # the original's: Linear trunc_normal(0.02), LayerNorm 1 / 0

    def _check_scale(self, name, scale):
        if self.upsampler == "pixelshuffle":
            return upsampler_scale(name, scale)
        scale = int_arg(name, "scale", scale)
        if self.upsampler == "nearest+conv" and scale != 4:
            raise ValueError(f"{name}: upsampler 'nearest+conv' upsamples x4 only (the original's "
                             f"conv_up1, conv_up2), got scale {scale}")
        if self.upsampler == "" and scale != 1:
            raise ValueError(f"{name}: upsampler '' does not upsample (restoration): scale must be "
                             f"1, got {scale}")
        return scale

    def _reconstruction(self, embed_dim, out_ch):  # SwinIR's tail (nearest+conv: x4 only here)
        build_reconstruction(self, embed_dim, out_ch, "ATD")

    def forward_features(self, x):
        """(N, embed_dim, H, W) -> same: tokens through every group, then the norm."""
        x_size = (x.shape[2], x.shape[3])
        x = self.patch_embed(x)
        if self.ape:
            if x.shape[1] != self.absolute_pos_embed.shape[1]:
                raise ValueError(f"ATD: with ape=True the (padded) input must be img_size "
                                 f"{self.patches_resolution}, got {x_size}")
            x = x + self.absolute_pos_embed
        for layer in self.layers:
            x = layer(x, x_size, self.relative_position_index_SA)
        return self.patch_unembed(self.norm(x), x_size)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"ATD: expected input (N, C, H, W), got shape {tuple(x.shape)}")
        image = x
        x = F.pad_to_requirement(x, max(_MIN_SIZE, -(-self.window_size // 2)))
        x = F.pad_to_multiple(x, self.window_size, mode="symmetric")  # the original's flip padding
        mean = self.mean.astype(x.dtype, copy=False)
        if self.norm_input:
            x = (x - mean) * self.img_range
        if self.upsampler == "":
            feat = self.conv_first(x)
            out = x + self.conv_last(self.conv_after_body(self.forward_features(feat)) + feat)
        else:
            feat = self.conv_first(x)
            feat = self.conv_after_body(self.forward_features(feat)) + feat
            if self.upsampler == "pixelshuffle":
                out = self.conv_last(self.upsample(self.conv_before_upsample(feat)))
            elif self.upsampler == "pixelshuffledirect":
                out = self.upsample(feat)
            else:
                feat = self.conv_before_upsample(feat)
                for up in (self.conv_up1, self.conv_up2):
                    feat = self.lrelu(up(F.interpolate(feat, scale_factor=2, mode="nearest")))
                out = self.conv_last(self.lrelu(self.conv_hr(feat)))
        if self.norm_input:
            out = out / self.img_range + mean
        return F.crop_to(out, image, self.scale)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: in_chans, embed_dim from conv_first; window_size from
        relative_position_index_SA (w^2 rows); per group its blocks (depths) and heads (attn_win's
        table columns); num_tokens from attn_atd.scale, reducted_dim from wq, convffn_kernel_size
        and mlp_ratio from the ConvFFN; qkv_bias, ape, patch_norm, resi_connection, norm
        (no_norm) from which keys exist; upsampler and scale from the reconstruction's keys.
        category_size changes no weight: spandrel's rule, 128 for ATD-light's layout
        (pixelshuffledirect at 48 features) and 256 otherwise (the two published values), said
        as an assumption unless given. img_range: 1, every published file's, unless given;
        img_size only sizes the absolute position embedding (read from it when present)."""
        embed_dim, in_chans = need(shapes, "conv_first.weight", 4)[:2]
        sa = need(shapes, "relative_position_index_SA", 2)[0]
        window = math.isqrt(sa)
        if window * window != sa or window < 2:
            raise NoMatch(f"relative_position_index_SA has {sa} rows: not w^2 for a window w >= 2")
        layers = count(shapes, "layers", ".residual_group.td")
        if not layers:
            raise NoMatch("no layers.0.residual_group.td (a group's token dictionary)")
        depths = [count(shapes, f"layers.{i}.residual_group.layers", ".norm1.weight")
                  for i in range(layers)]
        heads = [need(shapes, f"layers.{i}.residual_group.layers.0.attn_win."
                              f"relative_position_bias_table", 2)[1] for i in range(layers)]
        first = "layers.0.residual_group.layers.0"
        num_tokens = need(shapes, f"{first}.attn_atd.scale", 1)[0]
        reducted_dim = need(shapes, f"{first}.attn_atd.wq.weight", 2)[0]
        kernel = need(shapes, f"{first}.convffn.dwconv.depthwise_conv.0.weight", 4)[2]
        hidden = need(shapes, f"{first}.convffn.fc1.weight", 2)[0]
        mlp_ratio = hidden / embed_dim
        if int(embed_dim * mlp_ratio) < hidden:  # 7 / 3 * 3 = 6.999...: the next float up
            mlp_ratio = float(np.nextafter(mlp_ratio, np.inf))
        if "conv_after_body.weight" in shapes:
            resi = "1conv"
        elif "conv_after_body.0.weight" in shapes:
            resi = "3conv"
        else:
            raise NoMatch("no conv_after_body")
        if "conv_up1.weight" in shapes:
            upsampler, scale = "nearest+conv", 4
        elif "conv_before_upsample.0.weight" in shapes:
            upsampler = "pixelshuffle"
            scale = PixelShuffleUpsampler.detect_scale(shapes, "upsample", _NUM_FEAT)
        elif "conv_last.weight" in shapes:
            upsampler, scale = "", 1
        else:
            upsampler = "pixelshuffledirect"
            out = need(shapes, "upsample.0.weight", 4)[0]
            scale = math.isqrt(out // in_chans)
            if scale < 1 or scale * scale * in_chans != out:
                raise NoMatch(f"upsample.0 has {out} outputs: not in_chans {in_chans} * scale^2")
        light = upsampler == "pixelshuffledirect" and embed_dim == 48
        category = Assumed(128 if light else 256,
                           "the weights do not fix it; spandrel's rule: 128 for ATD-light's layout "
                           "(pixelshuffledirect, 48 features), else 256 (ATD's)")
        img_size = 64
        if "absolute_pos_embed" in shapes:
            side = math.isqrt(need(shapes, "absolute_pos_embed", 3)[1])
            patch = known.get("patch_size") if isinstance(known.get("patch_size"), int) else 1
            img_size = side * patch
        return {"img_size": img_size, "in_chans": in_chans, "embed_dim": embed_dim,
                "depths": tuple(depths), "num_heads": tuple(heads), "window_size": window,
                "category_size": category, "num_tokens": num_tokens,
                "reducted_dim": reducted_dim, "convffn_kernel_size": kernel,
                "mlp_ratio": mlp_ratio, "qkv_bias": f"{first}.wqkv.bias" in shapes,
                "ape": "absolute_pos_embed" in shapes,
                "patch_norm": "patch_embed.norm.weight" in shapes, "scale": scale,
                "upsampler": upsampler, "resi_connection": resi, "norm": "no_norm" not in shapes}

    @staticmethod
    def card(spec: dict):
        """conv_first, the patch norm, the groups (a dictionary each; per block two norms, the
        dictionary refinement's norm3 and sigma but in the last, wqkv, the window's bias table and
        proj, TDCA's wq / wk / wv and scale, AC-MSA's logit scale and proj, the ConvFFN), the
        norm, conv_after_body, the reconstruction. The largest arrays: TDCA's attention (M per
        token), an AC-MSA group's (heads x category_size per token), a window's (heads x w^2)."""
        c, w, m = spec["embed_dim"], spec["window_size"], spec["num_tokens"]
        rc, s, f, k = spec["reducted_dim"], spec["scale"], _NUM_FEAT, spec["convffn_kernel_size"]
        bias, out = spec["qkv_bias"], spec["in_chans"]
        cat = spec["category_size"] if isinstance(spec["category_size"], int) else 256
        hidden = int(c * spec["mlp_ratio"])
        img, patch = spec["img_size"], spec.get("patch_size", 1)
        img = tuple(img) if isinstance(img, (list, tuple)) else (img, img)
        patch = tuple(patch) if isinstance(patch, (list, tuple)) else (patch, patch)
        params = conv(out, c) + (norm(c) if spec["patch_norm"] else 0) + norm(c)
        params += (img[0] // patch[0]) * (img[1] // patch[1]) * c if spec["ape"] else 0
        resi = resi_parameters(c, spec["resi_connection"])
        params += resi
        act = [3 * c, hidden, m]
        for depth, heads in zip(spec["depths"], spec["num_heads"]):
            block = (2 * norm(c) + linear(c, 3 * c, bias) + (2 * w - 1) ** 2 * heads + linear(c, c)
                     + m + 2 * linear(c, rc, bias) + linear(c, c, bias) + 1 + linear(c, c, bias)
                     + linear(c, hidden) + conv(hidden, hidden, k, groups=hidden)
                     + linear(hidden, c))
            params += m * c + depth * block + (depth - 1) * (norm(m) + m) + resi
            act += [heads * w * w, heads * cat]
        kind = spec["upsampler"]
        if kind == "pixelshuffle":
            params += conv(c, f) + PixelShuffleUpsampler.parameters(s, f) + conv(f, out)
            act.append(f * s * s)
        elif kind == "pixelshuffledirect":
            params += conv(c, out * s * s)
            act.append(out * s * s)
        elif kind == "nearest+conv":
            params += conv(c, f) + 3 * conv(f, f) + conv(f, out)
            act.append(f * s * s)
        else:
            params += conv(c, out)
        return image_card(s, out, out, params, max(act), pads_to=w,
                          pad_minimum=max(_MIN_SIZE, -(-w // 2)), channel_keys=("in_chans",))
