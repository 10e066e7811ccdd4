"""PyTorch twin of CRAFT, written from AVC2-UESTC/CRAFT-SR's network as spandrel 0.4.2 ships it
(spandrel/architectures/CRAFT/__arch/CRAFT.py): the same modules, buffers, keys and forward (`scale`
for `upscale`; einops written as reshapes). The position-bias MLP is DAT's twin's (the original's
DynamicPosBias line for line); the offsets and index buffers are the model's, as the original's.
Around the original's forward it pads to a multiple of 16 as spandrel's call API does (reflect,
then replicate) and crops the output."""
from __future__ import annotations

import torch
import torch.nn.functional as tf
from torch import nn

from . import register
from ._spandrel import pad_tensor
from .dat import DynamicPosBias, img2windows, windows2img
from .swinir import SwinIR


def _offsets(h_sp, w_sp):
    bh, bw = torch.arange(1 - h_sp, h_sp), torch.arange(1 - w_sp, w_sp)
    biases = torch.stack(torch.meshgrid([bh, bw], indexing="ij")).flatten(1).transpose(0, 1)
    coords = torch.stack(torch.meshgrid([torch.arange(h_sp), torch.arange(w_sp)], indexing="ij"))
    flat = torch.flatten(coords, 1)
    rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += h_sp - 1
    rel[:, :, 1] += w_sp - 1
    rel[:, :, 0] *= 2 * w_sp - 1
    return biases.contiguous().float(), rel.sum(-1)


class Attention_regular(nn.Module):
    def __init__(self, dim, idx, split_size, num_heads, qk_scale=None):
        super().__init__()
        self.num_heads = num_heads
        self.scale = qk_scale or (dim // num_heads) ** -0.5
        self.H_sp, self.W_sp = split_size if idx == 0 else split_size[::-1]
        self.pos = DynamicPosBias(dim // 4, num_heads)

    def im2win(self, x, h, w):
        b, _, c = x.shape
        x = img2windows(x.transpose(-2, -1).contiguous().view(b, c, h, w), self.H_sp, self.W_sp)
        return x.reshape(-1, self.H_sp * self.W_sp, self.num_heads, c // self.num_heads).permute(
            0, 2, 1, 3).contiguous()

    def forward(self, qkv, h, w, rpi, rpe_biases):
        q, k, v = qkv[0], qkv[1], qkv[2]
        c = q.shape[2]
        q, k, v = (self.im2win(t, h, w) for t in (q, k, v))
        attn = (q * self.scale) @ k.transpose(-2, -1)
        n = self.H_sp * self.W_sp
        bias = self.pos(rpe_biases)[rpi.view(-1)].view(n, n, -1).permute(2, 0, 1).contiguous()
        attn = (attn + bias.unsqueeze(0)).softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(-1, n, c)
        return windows2img(x, self.H_sp, self.W_sp, h, w)


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class SRWAB(nn.Module):
    def __init__(self, dim, num_heads, split_size, shift_size, mlp_ratio, qkv_bias, qk_scale):
        super().__init__()
        self.shift_size = shift_size
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.get_v = nn.Conv2d(dim, dim, 3, 1, 1, groups=dim)
        self.attns = nn.ModuleList([Attention_regular(dim // 2, i, split_size, num_heads // 2, qk_scale)
                                    for i in range(2)])
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x, x_size, params):
        h, w = x_size
        b, _, c = x.shape
        shortcut = x
        qkv = self.qkv(self.norm1(x)).reshape(b, -1, 3, c).permute(2, 0, 1, 3)
        v = qkv[2].transpose(-2, -1).contiguous().view(b, c, h, w)
        hargs = (params["rpi_sa_h"], params["biases_h"])
        vargs = (params["rpi_sa_v"], params["biases_v"])
        if self.shift_size[0] > 0 or self.shift_size[1] > 0:
            t0, t1 = self.shift_size
            qkv = qkv.view(3, b, h, w, c)
            qkv_0 = torch.roll(qkv[..., :c // 2], shifts=(-t0, -t1), dims=(2, 3)).view(3, b, h * w, c // 2)
            qkv_1 = torch.roll(qkv[..., c // 2:], shifts=(-t1, -t0), dims=(2, 3)).view(3, b, h * w, c // 2)
            x1 = torch.roll(self.attns[0](qkv_0, h, w, *hargs), shifts=(t0, t1), dims=(1, 2))
            x2 = torch.roll(self.attns[1](qkv_1, h, w, *vargs), shifts=(t1, t0), dims=(1, 2))
        else:
            x1 = self.attns[0](qkv[:, :, :, :c // 2], h, w, *hargs)
            x2 = self.attns[1](qkv[:, :, :, c // 2:], h, w, *vargs)
        y = torch.cat([x1, x2], dim=-1).view(b, -1, c).contiguous()
        y = y + self.get_v(v).permute(0, 2, 3, 1).contiguous().view(b, -1, c)
        x = shortcut + self.proj(y)
        return x + self.mlp(self.norm2(x))


class HFERB(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.mid_dim = dim // 2
        self.act = nn.GELU()
        self.last_fc = nn.Conv2d(dim, dim, 1)
        self.fc = nn.Conv2d(self.mid_dim, self.mid_dim, 1)
        self.max_pool = nn.MaxPool2d(3, 1, 1)
        self.conv = nn.Conv2d(self.mid_dim, self.mid_dim, 3, 1, 1)

    def forward(self, x):
        lfe = self.act(self.conv(x[:, :self.mid_dim]))
        hfe = self.act(self.fc(self.max_pool(x[:, self.mid_dim:])))
        return x + self.last_fc(torch.cat([lfe, hfe], dim=1))


class WithBias_LayerNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        sigma = x.var(-1, keepdim=True, unbiased=False)
        return (x - mu) / torch.sqrt(sigma + 1e-5) * self.weight + self.bias


class LayerNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.body = WithBias_LayerNorm(dim)

    def forward(self, x):
        b, c, h, w = x.shape
        return self.body(x.flatten(2).transpose(1, 2)).transpose(1, 2).reshape(b, c, h, w)


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))
        self.q = nn.Conv2d(dim, dim, 1, bias=False)
        self.q_dwconv = nn.Conv2d(dim, dim, 3, 1, 1, groups=dim, bias=False)
        self.kv = nn.Conv2d(dim, dim * 2, 1, bias=False)
        self.kv_dwconv = nn.Conv2d(dim * 2, dim * 2, 3, 1, 1, groups=dim * 2, bias=False)
        self.project_out = nn.Conv2d(dim, dim, 1, bias=False)

    def forward(self, low, high):
        b, c, h, w = low.shape
        q = self.q_dwconv(self.q(high))
        k, v = self.kv_dwconv(self.kv(low)).chunk(2, dim=1)
        q, k, v = (t.reshape(b, self.num_heads, c // self.num_heads, h * w) for t in (q, k, v))
        q, k = tf.normalize(q, dim=-1), tf.normalize(k, dim=-1)
        attn = ((q @ k.transpose(-2, -1)) * self.temperature).softmax(dim=-1)
        return self.project_out((attn @ v).reshape(b, c, h, w))


class FeedForward(nn.Module):
    def __init__(self, dim, ffn_expansion_factor):
        super().__init__()
        hidden = int(dim * ffn_expansion_factor)
        self.project_in = nn.Conv2d(dim, hidden * 2, 1, bias=False)
        self.dwconv = nn.Conv2d(hidden * 2, hidden * 2, 3, 1, 1, groups=hidden * 2, bias=False)
        self.project_out = nn.Conv2d(hidden, dim, 1, bias=False)

    def forward(self, x):
        x1, x2 = self.dwconv(self.project_in(x)).chunk(2, dim=1)
        return self.project_out(tf.gelu(x1) * x2)


class HFB(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.norm1 = LayerNorm(dim)
        self.attn = Attention(dim, num_heads)
        self.norm2 = LayerNorm(dim)
        self.ffn = FeedForward(dim, 2.66)

    def forward(self, low, high):
        x = low + self.attn(self.norm1(low), high)
        return x + self.ffn(self.norm2(x))


class CRFB(nn.Module):
    def __init__(self, dim, depth, num_heads, split, mlp_ratio, qkv_bias, qk_scale):
        super().__init__()
        self.depth = depth
        self.srwa_blocks = nn.ModuleList([SRWAB(
            dim, num_heads, list(split), [0, 0] if i % 2 == 0 else [split[0] // 2, split[1] // 2],
            mlp_ratio, qkv_bias, qk_scale) for i in range(2 * depth)])
        self.hfer_blocks = nn.ModuleList([HFERB(dim) for _ in range(depth)])
        self.hf_blocks = nn.ModuleList([HFB(dim, num_heads) for _ in range(depth)])

    def forward(self, x, x_size, params):
        b, c, h, w = x.shape
        for i in range(self.depth):
            low = x.permute(0, 2, 3, 1).reshape(b, h * w, c)
            low = self.srwa_blocks[2 * i + 1](self.srwa_blocks[2 * i](low, x_size, params), x_size, params)
            low = low.reshape(b, h, w, c).permute(0, 3, 1, 2)
            x = self.hf_blocks[i](low, self.hfer_blocks[i](x))
        return x


class RCRFG(nn.Module):
    def __init__(self, dim, depth, num_heads, split, mlp_ratio, qkv_bias, qk_scale):
        super().__init__()
        self.residual_group = CRFB(dim, depth, num_heads, split, mlp_ratio, qkv_bias, qk_scale)
        self.conv = nn.Conv2d(dim, dim, 3, 1, 1)

    def forward(self, x, x_size, params):
        return self.conv(self.residual_group(x, x_size, params)) + x


@register
class CRAFT(nn.Module):
    def __init__(self, in_chans=3, window_size=16, embed_dim=48, depths=(2, 2, 2, 2),
                 num_heads=(6, 6, 6, 6), split_size_0=4, split_size_1=16, mlp_ratio=2.0,
                 qkv_bias=True, qk_scale=None, scale=4, img_range=1.0, resi_connection="1conv"):
        super().__init__()
        self.window_size, self.img_range, self.upscale = window_size, img_range, scale
        mean = (0.4488, 0.4371, 0.4040) if in_chans == 3 else (0.0,)
        self.mean = torch.Tensor(mean).view(1, -1, 1, 1)
        split = (split_size_0, split_size_1)
        biases_h, index_h = _offsets(*split)
        biases_v, index_v = _offsets(*split[::-1])
        self.register_buffer("relative_position_index_h", index_h)
        self.register_buffer("relative_position_index_v", index_v)
        self.register_buffer("biases_v", biases_v)
        self.register_buffer("biases_h", biases_h)
        self.conv_first = nn.Conv2d(in_chans, embed_dim, 3, 1, 1)
        self.layers = nn.ModuleList([RCRFG(embed_dim, d, num_heads[i], split, mlp_ratio, qkv_bias,
                                           qk_scale) for i, d in enumerate(depths)])
        self.norm = LayerNorm(embed_dim)
        self.conv_after_body = (nn.Conv2d(embed_dim, embed_dim, 3, 1, 1) if resi_connection == "1conv"
                                else nn.Identity())
        self.upsample = nn.Sequential(nn.Conv2d(embed_dim, scale * scale * in_chans, 3, 1, 1),
                                      nn.PixelShuffle(scale))
        self.apply(self._init_weights)

    _init_weights = staticmethod(SwinIR._init_weights)  # the original's, line for line SwinIR's

    def forward(self, x):
        h0, w0 = x.shape[-2:]
        x, _ = pad_tensor(x, 16, 16)
        _, _, h_old, w_old = x.size()
        ws = self.window_size
        h_pad = (h_old // ws + 1) * ws - h_old
        w_pad = (w_old // ws + 1) * ws - w_old
        x = torch.cat([x, torch.flip(x, [2])], 2)[:, :, : h_old + h_pad, :]
        x = torch.cat([x, torch.flip(x, [3])], 3)[:, :, :, : w_old + w_pad]
        mean = self.mean.type_as(x)
        x = (x - mean) * self.img_range
        x = self.conv_first(x)
        params = {"rpi_sa_h": self.relative_position_index_h, "rpi_sa_v": self.relative_position_index_v,
                  "biases_v": self.biases_v, "biases_h": self.biases_h}
        y = x
        for layer in self.layers:
            y = layer(y, x.shape[2:], params)
        x = self.conv_after_body(self.norm(y)) + x
        x = self.upsample(x) / self.img_range + mean
        return x[..., : h0 * self.upscale, : w0 * self.upscale]
