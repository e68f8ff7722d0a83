"""Plain-torch models for the workload profiler.

Used when the reference library is absent (ResNet-50 and ViT-B/16 fall back here when neither
timm nor torchvision imports) and always for the DiT block, DLRM and DCNv2, which have no
library constructor. Each follows its published architecture so that its kernels are the ones
the reference implementation launches:

- :class:`ResNet50`: He et al. 2015, torchvision's "v1.5" Bottleneck (stride on the 3x3),
  [3, 4, 6, 3] blocks; 25,557,032 parameters at 1000 classes (torchvision docs).
- :class:`VisionTransformer`: Dosovitskiy et al. 2020, ViT-B/16: 16x16 patch conv, class
  token, learned position embedding, 12 pre-LN blocks (qkv Linear, fused SDPA, GELU MLP x4),
  86,567,656 parameters at 1000 classes (torchvision/timm docs).
- :class:`DiTBlock`: Peebles & Xie 2023, adaLN-Zero block (SiLU -> Linear(d, 6d) modulation,
  LayerNorm without affine, SDPA attention, tanh-GELU MLP x4).
- :class:`DLRM`: Naumov et al. 2019 (facebookresearch/dlrm): per-table EmbeddingBag (sum),
  bottom MLP, dot-product interaction (bmm of the [B, F, D] features with themselves,
  strictly-lower-triangle gather, cat with the dense vector), top MLP, sigmoid. With
  ``interaction="dcn"`` the interaction is the low-rank DCNv2 cross network as in the MLPerf
  DLRMv2 reference (torchrec ``LowRankCrossNet``).
- :class:`DCNv2`: Wang et al. 2021, DCN-V2 "stacked" model: x0 = cat(dense, embeddings),
  low-rank cross layers x_{l+1} = x0 * (U (V x_l) + b) + x_l, then a deep MLP and a logit.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

# Annotations (torch.profiler record_function ranges, free when no profiler is active) name the
# model parts a DLRM-Bench problem replaces, so solbench.profile.amdahl's problem map can select
# them: "solbench::embedding_tables", "solbench::dot_interaction", "solbench::dcn_cross",
# "solbench::linear_relu_k{K}" (one MLP layer with input width K).


# ---------------------------------------------------------------- ResNet-50
class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    """ResNet-50 (v1.5). Input [B, 3, H, W] float; output logits [B, num_classes].

    ``width`` scales every channel count (64 at full size) and ``layers`` the block counts, so
    tiny CPU variants keep the same kernels.
    """

    def __init__(self, num_classes: int = 1000, width: int = 64, layers: Sequence[int] = (3, 4, 6, 3)):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages = []
        for i, n in enumerate(layers):
            stages.append(self._make_layer(width * 2**i, n, stride=1 if i == 0 else 2))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(width * 8 * 4, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(self, planes: int, blocks: int, stride: int) -> nn.Sequential:
        down = None
        if stride != 1 or self.inplanes != planes * 4:
            down = nn.Sequential(nn.Conv2d(self.inplanes, planes * 4, 1, stride=stride, bias=False),
                                 nn.BatchNorm2d(planes * 4))
        mods = [Bottleneck(self.inplanes, planes, stride, down)]
        self.inplanes = planes * 4
        mods += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*mods)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# ---------------------------------------------------------------- ViT
class Attention(nn.Module):
    """Multi-head self-attention with a fused qkv projection and F.scaled_dot_product_attention
    (timm's ``Attention`` with ``fused_attn``). Input/output [B, N, D]."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return self.proj(y.transpose(1, 2).reshape(b, n, d))


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int, approximate: str = "none"):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.approximate = approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate=self.approximate))


class ViTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    """ViT (B/16 at the defaults). Input [B, 3, image, image]; output logits [B, classes]."""

    def __init__(self, image: int = 224, patch: int = 16, dim: int = 768, depth: int = 12,
                 heads: int = 12, num_classes: int = 1000):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        n = (image // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[ViTBlock(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


# ---------------------------------------------------------------- DiT
def _modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class DiTBlock(nn.Module):
    """One DiT block with adaLN-Zero conditioning (DiT-XL/2: dim 1152, 16 heads).

    Inputs: x [B, N, D] tokens, c [B, D] conditioning (timestep + class embedding).
    Output [B, N, D].
    """

    def __init__(self, dim: int = 1152, heads: int = 16, mlp_ratio: float = 4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), approximate="tanh")
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        s_msa, sc_msa, g_msa, s_mlp, sc_mlp, g_mlp = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + g_msa.unsqueeze(1) * self.attn(_modulate(self.norm1(x), s_msa, sc_msa))
        return x + g_mlp.unsqueeze(1) * self.mlp(_modulate(self.norm2(x), s_mlp, sc_mlp))


class DiTStack(nn.Module):
    """``depth`` DiT blocks applied in turn (depth 1 = "a DiT block")."""

    def __init__(self, depth: int = 1, **kw):
        super().__init__()
        self.blocks = nn.ModuleList([DiTBlock(**kw) for _ in range(depth)])

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x, c)
        return x


# ---------------------------------------------------------------- recommenders
class LinearReLU(nn.Module):
    """relu(x W^T + b) (or without the ReLU), annotated ``solbench::linear_relu_k{K}`` with its
    input width K. Input [B, K]; output [B, N]."""

    def __init__(self, k: int, n: int, relu: bool = True):
        super().__init__()
        self.linear = nn.Linear(k, n)
        self.relu = relu
        self.tag = f"solbench::linear{'_relu' if relu else ''}_k{k}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with record_function(self.tag):
            y = self.linear(x)
            return F.relu(y) if self.relu else y


def mlp(sizes: Sequence[int], final_act: bool = True) -> nn.Sequential:
    """Linear+ReLU stack over ``sizes`` (e.g. [13, 512, 256, 64]); ReLU after the last layer
    unless ``final_act`` is False."""
    n = len(sizes) - 1
    return nn.Sequential(*[LinearReLU(sizes[i], sizes[i + 1], relu=final_act or i < n - 1) for i in range(n)])


class EmbeddingTables(nn.Module):
    """One ``nn.EmbeddingBag(mode="sum")`` per sparse feature (what eager DLRM launches: one
    embedding-bag kernel per table). Inputs: per table a flat int64 index tensor and int64
    offsets [B]; output [B, T, D]."""

    def __init__(self, rows: Sequence[int], dim: int, sparse: bool):
        super().__init__()
        self.tables = nn.ModuleList()
        for r in rows:
            t = nn.EmbeddingBag(r, dim, mode="sum", sparse=sparse)
            bound = 1.0 / math.sqrt(r)  # DLRM reference init: U(-1/sqrt(n), 1/sqrt(n))
            nn.init.uniform_(t.weight, -bound, bound)
            self.tables.append(t)

    def forward(self, indices: Sequence[torch.Tensor], offsets: Sequence[torch.Tensor]) -> torch.Tensor:
        with record_function("solbench::embedding_tables"):
            return torch.stack([t(i, o) for t, i, o in zip(self.tables, indices, offsets)], dim=1)


class LowRankCross(nn.Module):
    """DCNv2 low-rank cross network: x_{l+1} = x0 * (U_l (V_l x_l) + b_l) + x_l, ``layers``
    times (torchrec ``LowRankCrossNet``). Input/output [B, F]."""

    def __init__(self, dim: int, layers: int, rank: int):
        super().__init__()
        self.V = nn.ModuleList([nn.Linear(dim, rank, bias=False) for _ in range(layers)])
        self.U = nn.ModuleList([nn.Linear(rank, dim, bias=True) for _ in range(layers)])

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        x = x0
        for v, u in zip(self.V, self.U):
            with record_function("solbench::dcn_cross"):
                x = x0 * u(v(x)) + x
        return x


class DLRM(nn.Module):
    """DLRM. Inputs: dense [B, num_dense] float, indices/offsets per table. Output: click
    probability logits [B] (apply sigmoid for probabilities; training uses BCE-with-logits).

    ``interaction``: "dot" (DLRM paper, Criteo Kaggle/Terabyte configs) or "dcn" (MLPerf
    DLRMv2: low-rank cross net over cat(bottom-MLP output, embeddings)).
    """

    def __init__(self, rows: Sequence[int], dim: int, bottom: Sequence[int], top: Sequence[int],
                 interaction: str = "dot", cross_layers: int = 3, cross_rank: int = 512,
                 sparse: bool = True):
        super().__init__()
        if bottom[-1] != dim:
            raise ValueError(f"bottom MLP must end at the embedding dim {dim}, got {bottom[-1]}")
        self.emb = EmbeddingTables(rows, dim, sparse)
        self.bottom = mlp(bottom)
        self.interaction = interaction
        f = len(rows) + 1
        if interaction == "dot":
            li, lj = torch.tril_indices(f, f, offset=-1)
            self.register_buffer("li", li, persistent=False)
            self.register_buffer("lj", lj, persistent=False)
            top_in = dim + f * (f - 1) // 2
        elif interaction == "dcn":
            self.cross = LowRankCross(f * dim, cross_layers, cross_rank)
            top_in = f * dim
        else:
            raise ValueError(f"interaction must be 'dot' or 'dcn', got {interaction!r}")
        self.top = mlp([top_in, *top], final_act=False)

    def forward(self, dense: torch.Tensor, indices, offsets) -> torch.Tensor:
        x = self.bottom(dense)
        e = self.emb(indices, offsets)
        if self.interaction == "dot":
            with record_function("solbench::dot_interaction"):
                t = torch.cat([x.unsqueeze(1), e], dim=1)  # [B, F, D]
                z = torch.bmm(t, t.transpose(1, 2))
                r = torch.cat([x, z[:, self.li, self.lj]], dim=1)
        else:
            r = self.cross(torch.cat([x.unsqueeze(1), e], dim=1).flatten(1))
        return self.top(r).squeeze(1)


class DCNv2(nn.Module):
    """DCN-V2 (stacked): x0 = cat(dense [B, num_dense], embeddings [B, T*D]) -> low-rank cross
    network -> deep MLP -> logit [B]."""

    def __init__(self, rows: Sequence[int], dim: int, num_dense: int, cross_layers: int,
                 cross_rank: int, deep: Sequence[int], sparse: bool = True):
        super().__init__()
        self.emb = EmbeddingTables(rows, dim, sparse)
        d0 = num_dense + len(rows) * dim
        self.cross = LowRankCross(d0, cross_layers, cross_rank)
        self.deep = mlp([d0, *deep])
        self.logit = nn.Linear(deep[-1], 1)

    def forward(self, dense: torch.Tensor, indices, offsets) -> torch.Tensor:
        x0 = torch.cat([dense, self.emb(indices, offsets).flatten(1)], dim=1)
        return self.logit(self.deep(self.cross(x0))).squeeze(1)
