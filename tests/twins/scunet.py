"""PyTorch twin of SCUNet: spandrel 0.4.2's SCUNet.py (cszn/SCUNet models/network_scunet.py), with the
original's module structure, keys and forward; its einops rearranges written as the same reshapes
and permutes (einops is not a dependency here), its DropPath timm's. Around it spandrel's call: the
input padded to at least 40 pixels (its size requirement) before the network's own reflection to a
multiple of 64, the output cropped back."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import register
from ._spandrel import sized


class DropPath(nn.Module):
    def __init__(self, drop_prob=0.0):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        if self.drop_prob == 0.0 or not self.training:
            return x
        keep = 1 - self.drop_prob
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask / keep


class WMSA(nn.Module):
    def __init__(self, input_dim, output_dim, head_dim, window_size, type):  # noqa: A002
        super().__init__()
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.head_dim = head_dim
        self.scale = self.head_dim ** -0.5
        self.n_heads = input_dim // head_dim
        self.window_size = window_size
        self.type = type
        self.embedding_layer = nn.Linear(self.input_dim, 3 * self.input_dim, bias=True)
        self.relative_position_params = nn.Parameter(
            torch.zeros((2 * window_size - 1) * (2 * window_size - 1), self.n_heads))
        self.linear = nn.Linear(self.input_dim, self.output_dim)
        nn.init.trunc_normal_(self.relative_position_params, std=0.02)
        self.relative_position_params = torch.nn.Parameter(
            self.relative_position_params.view(2 * window_size - 1, 2 * window_size - 1, self.n_heads)
            .transpose(1, 2).transpose(0, 1).contiguous())

    def generate_mask(self, h, w, p, shift):
        attn_mask = torch.zeros(h, w, p, p, p, p, dtype=torch.bool,
                                device=self.relative_position_params.device)
        if self.type == "W":
            return attn_mask
        s = p - shift
        attn_mask[-1, :, :s, :, s:, :] = True
        attn_mask[-1, :, s:, :, :s, :] = True
        attn_mask[:, -1, :, :s, :, s:] = True
        attn_mask[:, -1, :, s:, :, :s] = True
        # "w1 w2 p1 p2 p3 p4 -> 1 1 (w1 w2) (p1 p2) (p3 p4)"
        return attn_mask.reshape(1, 1, h * w, p * p, p * p)

    def forward(self, x):
        if self.type != "W":
            x = torch.roll(x, shifts=(-(self.window_size // 2), -(self.window_size // 2)), dims=(1, 2))
        b, hh, ww, c = x.shape
        p = self.window_size
        h_windows, w_windows = hh // p, ww // p
        # "b (w1 p1) (w2 p2) c -> b (w1 w2) (p1 p2) c"
        x = x.reshape(b, h_windows, p, w_windows, p, c).permute(0, 1, 3, 2, 4, 5)
        x = x.reshape(b, h_windows * w_windows, p * p, c)
        qkv = self.embedding_layer(x)
        # "b nw np (threeh c) -> threeh b nw np c"
        qkv = qkv.reshape(b, h_windows * w_windows, p * p, 3 * self.n_heads, self.head_dim)
        q, k, v = qkv.permute(3, 0, 1, 2, 4).chunk(3, dim=0)
        sim = torch.einsum("hbwpc,hbwqc->hbwpq", q, k) * self.scale
        sim = sim + self.relative_embedding()[:, None, None]  # "h p q -> h 1 1 p q"
        if self.type != "W":
            attn_mask = self.generate_mask(h_windows, w_windows, self.window_size,
                                           shift=self.window_size // 2)
            sim = sim.masked_fill_(attn_mask, float("-inf"))
        probs = nn.functional.softmax(sim, dim=-1)
        output = torch.einsum("hbwij,hbwjc->hbwic", probs, v)
        # "h b w p c -> b w p (h c)"
        output = output.permute(1, 2, 3, 0, 4).reshape(b, h_windows * w_windows, p * p, -1)
        output = self.linear(output)
        # "b (w1 w2) (p1 p2) c -> b (w1 p1) (w2 p2) c"
        output = output.reshape(b, h_windows, w_windows, p, p, -1).permute(0, 1, 3, 2, 4, 5)
        output = output.reshape(b, hh, ww, -1)
        if self.type != "W":
            output = torch.roll(output, shifts=(self.window_size // 2, self.window_size // 2),
                                dims=(1, 2))
        return output

    def relative_embedding(self):
        cord = torch.tensor(np.array([[i, j] for i in range(self.window_size)
                                      for j in range(self.window_size)]))
        relation = cord[:, None, :] - cord[None, :, :] + self.window_size - 1
        return self.relative_position_params[:, relation[:, :, 0].long(), relation[:, :, 1].long()]


class Block(nn.Module):
    def __init__(self, input_dim, output_dim, head_dim, window_size, drop_path, type="W",  # noqa: A002
                 input_resolution=None):
        super().__init__()
        self.input_dim = input_dim
        self.output_dim = output_dim
        assert type in ["W", "SW"]
        self.type = type
        if input_resolution <= window_size:
            self.type = "W"
        self.ln1 = nn.LayerNorm(input_dim)
        self.msa = WMSA(input_dim, input_dim, head_dim, window_size, self.type)
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()
        self.ln2 = nn.LayerNorm(input_dim)
        self.mlp = nn.Sequential(nn.Linear(input_dim, 4 * input_dim), nn.GELU(),
                                 nn.Linear(4 * input_dim, output_dim))

    def forward(self, x):
        x = x + self.drop_path(self.msa(self.ln1(x)))
        return x + self.drop_path(self.mlp(self.ln2(x)))


class ConvTransBlock(nn.Module):
    def __init__(self, conv_dim, trans_dim, head_dim, window_size, drop_path, type="W",  # noqa: A002
                 input_resolution=None):
        super().__init__()
        self.conv_dim = conv_dim
        self.trans_dim = trans_dim
        self.trans_block = Block(trans_dim, trans_dim, head_dim, window_size, drop_path, type,
                                 input_resolution)
        self.conv1_1 = nn.Conv2d(conv_dim + trans_dim, conv_dim + trans_dim, 1, 1, 0, bias=True)
        self.conv1_2 = nn.Conv2d(conv_dim + trans_dim, conv_dim + trans_dim, 1, 1, 0, bias=True)
        self.conv_block = nn.Sequential(nn.Conv2d(conv_dim, conv_dim, 3, 1, 1, bias=False), nn.ReLU(True),
                                        nn.Conv2d(conv_dim, conv_dim, 3, 1, 1, bias=False))

    def forward(self, x):
        conv_x, trans_x = torch.split(self.conv1_1(x), (self.conv_dim, self.trans_dim), dim=1)
        conv_x = self.conv_block(conv_x) + conv_x
        trans_x = self.trans_block(trans_x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return x + self.conv1_2(torch.cat((conv_x, trans_x), dim=1))


class SCUNetNet(nn.Module):
    def __init__(self, *, in_nc=3, config=(4, 4, 4, 4, 4, 4, 4), dim=64, drop_path_rate=0.0,
                 input_resolution=256):
        super().__init__()
        self.config = config
        self.dim = dim
        self.head_dim = 32
        self.window_size = 8
        dpr = [x.item() for x in torch.linspace(0, drop_path_rate, sum(config))]

        def blocks(n, half, begin, res):
            return [ConvTransBlock(half, half, self.head_dim, self.window_size, dpr[i + begin],
                                   "W" if not i % 2 else "SW", res) for i in range(n)]
        b = np.cumsum([0] + list(config)).tolist()
        r = input_resolution
        self.m_head = nn.Sequential(nn.Conv2d(in_nc, dim, 3, 1, 1, bias=False))
        self.m_down1 = nn.Sequential(*blocks(config[0], dim // 2, b[0], r),
                                     nn.Conv2d(dim, 2 * dim, 2, 2, 0, bias=False))
        self.m_down2 = nn.Sequential(*blocks(config[1], dim, b[1], r // 2),
                                     nn.Conv2d(2 * dim, 4 * dim, 2, 2, 0, bias=False))
        self.m_down3 = nn.Sequential(*blocks(config[2], 2 * dim, b[2], r // 4),
                                     nn.Conv2d(4 * dim, 8 * dim, 2, 2, 0, bias=False))
        self.m_body = nn.Sequential(*blocks(config[3], 4 * dim, b[3], r // 8))
        self.m_up3 = nn.Sequential(nn.ConvTranspose2d(8 * dim, 4 * dim, 2, 2, 0, bias=False),
                                   *blocks(config[4], 2 * dim, b[4], r // 4))
        self.m_up2 = nn.Sequential(nn.ConvTranspose2d(4 * dim, 2 * dim, 2, 2, 0, bias=False),
                                   *blocks(config[5], dim, b[5], r // 2))
        self.m_up1 = nn.Sequential(nn.ConvTranspose2d(2 * dim, dim, 2, 2, 0, bias=False),
                                   *blocks(config[6], dim // 2, b[6], r))
        self.m_tail = nn.Sequential(nn.Conv2d(dim, in_nc, 3, 1, 1, bias=False))

    def check_image_size(self, x):
        _, _, h, w = x.size()
        pad_h, pad_w = (64 - h % 64) % 64, (64 - w % 64) % 64
        return F.pad(x, (0, pad_w, 0, pad_h), "reflect") if pad_h or pad_w else x

    def forward(self, x0):
        h, w = x0.size()[-2:]
        x0 = self.check_image_size(x0)
        x1 = self.m_head(x0)
        x2 = self.m_down1(x1)
        x3 = self.m_down2(x2)
        x4 = self.m_down3(x3)
        x = self.m_body(x4)
        x = self.m_up3(x + x4)
        x = self.m_up2(x + x3)
        x = self.m_up1(x + x2)
        x = self.m_tail(x + x1)
        return x[:, :, :h, :w]


@register
def SCUNet(in_nc=3, config=(4, 4, 4, 4, 4, 4, 4), dim=64, drop_path_rate=0.0, input_resolution=256,
           scale=1):
    assert scale == 1
    return sized(SCUNetNet, 40, 1, 1)(in_nc=in_nc, config=list(config), dim=dim,
                                      drop_path_rate=drop_path_rate, input_resolution=input_resolution)
