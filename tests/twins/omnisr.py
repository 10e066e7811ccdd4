"""PyTorch twin of OmniSR: spandrel 0.4.2's OmniSR (Francis0625/Omni-SR: OmniSR.py, OSAG.py, OSA.py,
esa.py, layernorm.py, pixelshuffle.py) with the original's module structure, keys and forward; the
einops rearrangements written as the reshape/permute pairs they mean, and LayerNorm2d's hand-written
backward left to autograd (the same derivative). spandrel's call-API size requirement (16 pixels)
wraps the forward, as srgrad's model applies it inside. srgrad's `scale` is the original's up_scale."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import register
from ._spandrel import sized


class LayerNorm2d(nn.Module):
    def __init__(self, channels, eps=1e-6):
        super().__init__()
        self.register_parameter("weight", nn.Parameter(torch.ones(channels)))
        self.register_parameter("bias", nn.Parameter(torch.zeros(channels)))
        self.eps = eps

    def forward(self, x):
        n, c, h, w = x.size()
        mu = x.mean(1, keepdim=True)
        var = (x - mu).pow(2).mean(1, keepdim=True)
        y = (x - mu) / (var + self.eps).sqrt()
        return self.weight.view(1, c, 1, 1) * y + self.bias.view(1, c, 1, 1)


class PreNormResidual(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.norm(x)) + x


class Conv_PreNormResidual(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.norm = LayerNorm2d(dim)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.norm(x)) + x


class Gated_Conv_FeedForward(nn.Module):
    def __init__(self, dim, mult=1, bias=False, dropout=0.0):
        super().__init__()
        hidden_features = int(dim * mult)
        self.project_in = nn.Conv2d(dim, hidden_features * 2, kernel_size=1, bias=bias)
        self.dwconv = nn.Conv2d(hidden_features * 2, hidden_features * 2, kernel_size=3, stride=1,
                                padding=1, groups=hidden_features * 2, bias=bias)
        self.project_out = nn.Conv2d(hidden_features, dim, kernel_size=1, bias=bias)

    def forward(self, x):
        x = self.project_in(x)
        x1, x2 = self.dwconv(x).chunk(2, dim=1)
        return self.project_out(F.gelu(x1) * x2)


class Reduce(nn.Module):  # einops Reduce("b c h w -> b c", "mean")
    def forward(self, x):
        return x.mean(dim=(2, 3))


class ToImage(nn.Module):  # einops Rearrange("b c -> b c 1 1")
    def forward(self, x):
        return x[:, :, None, None]


class SqueezeExcitation(nn.Module):
    def __init__(self, dim, shrinkage_rate=0.25):
        super().__init__()
        hidden_dim = int(dim * shrinkage_rate)
        self.gate = nn.Sequential(Reduce(), nn.Linear(dim, hidden_dim, bias=False), nn.SiLU(),
                                  nn.Linear(hidden_dim, dim, bias=False), nn.Sigmoid(), ToImage())

    def forward(self, x):
        return x * self.gate(x)


class MBConvResidual(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x) + x


def MBConv(dim_in, dim_out, *, downsample, expansion_rate=4, shrinkage_rate=0.25):
    hidden_dim = int(expansion_rate * dim_out)
    stride = 2 if downsample else 1
    net = nn.Sequential(
        nn.Conv2d(dim_in, hidden_dim, 1), nn.GELU(),
        nn.Conv2d(hidden_dim, hidden_dim, 3, stride=stride, padding=1, groups=hidden_dim), nn.GELU(),
        SqueezeExcitation(hidden_dim, shrinkage_rate=shrinkage_rate), nn.Conv2d(hidden_dim, dim_out, 1))
    if dim_in == dim_out and not downsample:
        net = MBConvResidual(net)
    return net


class Attention(nn.Module):
    def __init__(self, dim, dim_head=32, dropout=0.0, window_size=7, with_pe=True):
        super().__init__()
        assert (dim % dim_head) == 0
        self.heads = dim // dim_head
        self.scale = dim_head**-0.5
        self.with_pe = with_pe
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.attend = nn.Sequential(nn.Softmax(dim=-1), nn.Dropout(dropout))
        self.to_out = nn.Sequential(nn.Linear(dim, dim, bias=False), nn.Dropout(dropout))
        if self.with_pe:
            self.rel_pos_bias = nn.Embedding((2 * window_size - 1) ** 2, self.heads)
            pos = torch.arange(window_size)
            grid = torch.stack(torch.meshgrid(pos, pos, indexing="ij"))  # "c i j"
            grid = grid.reshape(2, -1).t()  # "c i j -> (i j) c"
            rel_pos = grid[:, None, :] - grid[None, :, :]
            rel_pos += window_size - 1
            rel_pos_indices = (rel_pos * torch.tensor([2 * window_size - 1, 1])).sum(dim=-1)
            self.register_buffer("rel_pos_indices", rel_pos_indices, persistent=False)

    def forward(self, x):
        batch, height, width, window_height, window_width, _ = x.shape
        h = self.heads
        x = x.reshape(batch * height * width, window_height * window_width, -1)
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(t.shape[0], t.shape[1], h, -1).transpose(1, 2) for t in (q, k, v))
        q = q * self.scale
        sim = torch.einsum("b h i d, b h j d -> b h i j", q, k)
        if self.with_pe:
            bias = self.rel_pos_bias(self.rel_pos_indices)
            sim = sim + bias.permute(2, 0, 1)  # "i j h -> h i j"
        attn = self.attend(sim)
        out = torch.einsum("b h i j, b h j d -> b h i d", attn, v)
        out = out.transpose(1, 2).reshape(out.shape[0], window_height, window_width, -1)
        out = self.to_out(out)
        return out.reshape(batch, height, width, *out.shape[1:])  # "(b x y) ... -> b x y ..."


def _split(t, heads, ps, grid):
    """"b (head d) (h ph) (w pw) -> b (h w) head d (ph pw)" (grid: "-> b (ph pw) head d (h w)")."""
    b, c, H, W = t.shape
    t = t.reshape(b, heads, c // heads, H // ps, ps, W // ps, ps)
    if grid:
        return t.permute(0, 4, 6, 1, 2, 3, 5).reshape(b, ps * ps, heads, c // heads, -1)
    return t.permute(0, 3, 5, 1, 2, 4, 6).reshape(b, -1, heads, c // heads, ps * ps)


def _merge(t, H, W, ps, grid):
    """The inverse of _split."""
    b, _, heads, d, _ = t.shape
    if grid:
        t = t.reshape(b, ps, ps, heads, d, H // ps, W // ps).permute(0, 3, 4, 5, 1, 6, 2)
    else:
        t = t.reshape(b, H // ps, W // ps, heads, d, ps, ps).permute(0, 3, 4, 1, 5, 2, 6)
    return t.reshape(b, heads * d, H, W)


class Channel_Attention(nn.Module):
    grid = False

    def __init__(self, dim, heads, bias=False, dropout=0.0, window_size=7):
        super().__init__()
        self.heads = heads
        self.temperature = nn.Parameter(torch.ones(heads, 1, 1))
        self.ps = window_size
        self.qkv = nn.Conv2d(dim, dim * 3, kernel_size=1, bias=bias)
        self.qkv_dwconv = nn.Conv2d(dim * 3, dim * 3, kernel_size=3, stride=1, padding=1,
                                    groups=dim * 3, bias=bias)
        self.project_out = nn.Conv2d(dim, dim, kernel_size=1, bias=bias)

    def forward(self, x):
        b, c, h, w = x.shape
        qkv = self.qkv_dwconv(self.qkv(x)).chunk(3, dim=1)
        q, k, v = (_split(t, self.heads, self.ps, self.grid) for t in qkv)
        q = F.normalize(q, dim=-1)
        k = F.normalize(k, dim=-1)
        attn = (q @ k.transpose(-2, -1)) * self.temperature
        out = attn.softmax(dim=-1) @ v
        return self.project_out(_merge(out, h, w, self.ps, self.grid))


class Channel_Attention_grid(Channel_Attention):
    grid = True


class BlockPartition(nn.Module):  # "b d (x w1) (y w2) -> b x y w1 w2 d" ((w1 x) for the grid)
    def __init__(self, w, grid):
        super().__init__()
        self.w, self.grid = w, grid

    def forward(self, x):
        b, d, H, W = x.shape
        w = self.w
        if self.grid:
            return x.reshape(b, d, w, H // w, w, W // w).permute(0, 3, 5, 2, 4, 1)
        return x.reshape(b, d, H // w, w, W // w, w).permute(0, 2, 4, 3, 5, 1)


class BlockMerge(nn.Module):  # the inverse
    def __init__(self, grid):
        super().__init__()
        self.grid = grid

    def forward(self, x):
        b, X, Y, w1, w2, d = x.shape
        dims = (0, 5, 3, 1, 4, 2) if self.grid else (0, 5, 1, 3, 2, 4)
        return x.permute(*dims).reshape(b, d, X * w1, Y * w2)


class OSA_Block(nn.Module):
    def __init__(self, channel_num=64, window_size=8, with_pe=False, dropout=0.0):
        super().__init__()
        w = window_size
        self.layer = nn.Sequential(
            MBConv(channel_num, channel_num, downsample=False, expansion_rate=1, shrinkage_rate=0.25),
            BlockPartition(w, False),
            PreNormResidual(channel_num, Attention(dim=channel_num, dim_head=channel_num // 4,
                                                   dropout=dropout, window_size=window_size,
                                                   with_pe=with_pe)),
            BlockMerge(False),
            Conv_PreNormResidual(channel_num, Gated_Conv_FeedForward(dim=channel_num, dropout=dropout)),
            Conv_PreNormResidual(channel_num, Channel_Attention(dim=channel_num, heads=4, dropout=dropout,
                                                                window_size=window_size)),
            Conv_PreNormResidual(channel_num, Gated_Conv_FeedForward(dim=channel_num, dropout=dropout)),
            BlockPartition(w, True),
            PreNormResidual(channel_num, Attention(dim=channel_num, dim_head=channel_num // 4,
                                                   dropout=dropout, window_size=window_size,
                                                   with_pe=with_pe)),
            BlockMerge(True),
            Conv_PreNormResidual(channel_num, Gated_Conv_FeedForward(dim=channel_num, dropout=dropout)),
            Conv_PreNormResidual(channel_num, Channel_Attention_grid(dim=channel_num, heads=4,
                                                                     dropout=dropout,
                                                                     window_size=window_size)),
            Conv_PreNormResidual(channel_num, Gated_Conv_FeedForward(dim=channel_num, dropout=dropout)),
        )

    def forward(self, x):
        return self.layer(x)


class ESA(nn.Module):
    def __init__(self, esa_channels, n_feats, conv=nn.Conv2d):
        super().__init__()
        f = esa_channels
        self.conv1 = conv(n_feats, f, kernel_size=1)
        self.conv_f = conv(f, f, kernel_size=1)
        self.conv2 = conv(f, f, kernel_size=3, stride=2, padding=0)
        self.conv3 = conv(f, f, kernel_size=3, padding=1)
        self.conv4 = conv(f, n_feats, kernel_size=1)
        self.sigmoid = nn.Sigmoid()
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        c1_ = self.conv1(x)
        c1 = self.conv2(c1_)
        v_max = F.max_pool2d(c1, kernel_size=7, stride=3)
        c3 = self.conv3(v_max)
        c3 = F.interpolate(c3, (x.size(2), x.size(3)), mode="bilinear", align_corners=False)
        cf = self.conv_f(c1_)
        c4 = self.conv4(c3 + cf)
        return x * self.sigmoid(c4)


class OSAG(nn.Module):
    def __init__(self, channel_num=64, bias=True, block_num=4, window_size=0, pe=False):
        super().__init__()
        group_list = [OSA_Block(channel_num, window_size=window_size, with_pe=pe) for _ in range(block_num)]
        group_list.append(nn.Conv2d(channel_num, channel_num, 1, 1, 0, bias=bias))
        self.residual_layer = nn.Sequential(*group_list)
        self.esa = ESA(max(channel_num // 4, 16), channel_num)

    def forward(self, x):
        return self.esa(self.residual_layer(x) + x)


class OmniSRNet(nn.Module):
    def __init__(self, *, num_in_ch=3, num_out_ch=3, num_feat=64, block_num=1, pe=True,
                 window_size=8, res_num=1, up_scale=4, bias=True):
        super().__init__()
        self.up_scale, self.window_size = up_scale, window_size
        self.residual_layer = nn.Sequential(*[OSAG(channel_num=num_feat, bias=bias, block_num=block_num,
                                                   window_size=window_size, pe=pe)
                                              for _ in range(res_num)])
        self.input = nn.Conv2d(num_in_ch, num_feat, 3, 1, 1, bias=bias)
        self.output = nn.Conv2d(num_feat, num_feat, 3, 1, 1, bias=bias)
        self.up = nn.Sequential(nn.Conv2d(num_feat, num_out_ch * up_scale**2, 3, padding=1, bias=bias),
                                nn.PixelShuffle(up_scale))

    def forward(self, x):
        H, W = x.shape[2:]
        m = self.window_size
        x = F.pad(x, (0, (m - W % m) % m, 0, (m - H % m) % m), "constant", 0)
        residual = self.input(x)
        out = self.residual_layer(residual)
        out = torch.add(self.output(out), residual)
        out = self.up(out)
        return out[:, :, : H * self.up_scale, : W * self.up_scale]


@register
def OmniSR(num_in_ch=3, num_out_ch=3, num_feat=64, block_num=1, pe=True, window_size=8, res_num=1,
           scale=4, bias=True):
    return sized(OmniSRNet, 16, 1, scale)(num_in_ch=num_in_ch, num_out_ch=num_out_ch, num_feat=num_feat,
                                          block_num=block_num, pe=pe, window_size=window_size,
                                          res_num=res_num, up_scale=scale, bias=bias)
