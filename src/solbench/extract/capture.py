"""Choosing regions and capturing their calls.

A *region* is a submodule whose class is one of the kinds kernel writers work at
(:data:`RULES`, matched on the class name, first rule wins): attention, MLP, norm, rotary
embedding, embedding, MoE block, routing, experts, residual block (a decoder/encoder layer).
Regions nest: a decoder layer is a region and so are its attention, MLP and norms, as
SOL-ExecBench has both single-op (L1) and fused-block (L2) problems.

Each region's first call is recorded with forward hooks (its arguments, keyword arguments and
output, by value) on one or two probe forward passes of the whole model.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils import _pytree as pytree

from .sources import PROBES, ModelSource

#: (kind, class-name pattern), first match wins. A ``Sequential`` whose children are all MLP
#: regions is an MLP region too (a stack of Linear+activation layers).
RULES: tuple[tuple[str, str], ...] = (
    ("rotary", r"Rotary|RoPE"),
    ("routing", r"Router|TopK|Gate$"),
    ("experts", r"Experts$"),
    ("norm", r"RMSNorm|LayerNorm|GroupNorm|BatchNorm|Norm$"),
    ("attention", r"Attention$|SelfAttention$|Attn$"),
    ("embedding", r"^Embedding$|^EmbeddingBag$|Embeddings?$|EmbeddingTables$"),
    ("mlp", r"MLP$|Mlp$|FeedForward|FFN$|Intermediate$|LinearReLU$"),
    # after norm/attention/mlp: "Qwen2MoeMLP" is an MLP, "Qwen2MoeSparseMoeBlock" the MoE block
    ("moe", r"SparseMoe|MoeBlock|MoEBlock|MoE$|Moe$|MixtureOf"),
    ("block", r"DecoderLayer$|EncoderLayer$|Layer$|Block$"),
)
_COMPILED = tuple((k, re.compile(p)) for k, p in RULES)


def region_kind(mod: nn.Module) -> str | None:
    """The kind of ``mod`` under :data:`RULES`, or None when it is not a region."""
    name = type(mod).__name__
    for kind, pat in _COMPILED:
        if pat.search(name):
            return kind
    if isinstance(mod, nn.Sequential) and len(mod) > 1 and all(region_kind(c) == "mlp" for c in mod):
        return "mlp"
    return None


@dataclass
class Leaf:
    """One flattened argument or output of a region call."""

    name: str
    value: Any  # a tensor (cloned) or a constant (None, bool, int, float, str)

    @property
    def is_tensor(self) -> bool:
        return isinstance(self.value, torch.Tensor)


@dataclass
class Call:
    """A recorded region call: ``spec`` rebuilds (args, kwargs) from the leaf values."""

    leaves: list[Leaf]
    spec: Any
    outputs: list[Leaf]


@dataclass
class Region:
    """A region and its calls at the probe sizes (one per probe)."""

    path: str
    kind: str
    module: nn.Module
    calls: list[Call] = field(default_factory=list)

    @property
    def cls(self) -> str:
        return type(self.module).__name__


def _sanitize(s: str) -> str:
    s = re.sub(r"[^0-9a-zA-Z_]+", "_", s).strip("_")
    return s if s and not s[0].isdigit() else f"x_{s}"


def _path_name(prefix: str, path) -> str:
    parts = [prefix] + [str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path]
    return _sanitize("_".join(p for p in parts if p != ""))


def _clone(v):
    return v.detach().clone() if isinstance(v, torch.Tensor) else v


def flatten_call(mod: nn.Module, args: tuple, kwargs: dict) -> tuple[list[Leaf], Any]:
    """Leaves of a call named after the forward's parameters (``hidden_states``,
    ``position_embeddings_0``), and the spec that rebuilds (args, kwargs) from them."""
    try:
        params = list(inspect.signature(mod.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                        inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), "arg")
    leaves_p, spec = pytree.tree_flatten_with_path((args, kwargs))
    leaves = []
    for path, v in leaves_p:
        top, key, rest = path[0].idx, path[1], path[2:]
        if top == 0:
            i = key.idx
            head = positional[i] if i < len(positional) else f"{star}_{i - len(positional)}"
        else:
            head = str(key.key)
        leaves.append(Leaf(_path_name(head, rest), _clone(v)))
    return leaves, spec


def output_leaves(out) -> list[Leaf]:
    """Tensor leaves of a region's output, named ``output`` (one) or by their path."""
    flat = [(p, v) for p, v in pytree.tree_flatten_with_path(out)[0] if isinstance(v, torch.Tensor)]
    if len(flat) == 1:
        return [Leaf("output", _clone(flat[0][1]))]
    return [Leaf(_path_name("output", p), _clone(v)) for p, v in flat]


def find_regions(model: nn.Module) -> list[Region]:
    """Every region of ``model`` in module order (the model itself is not one)."""
    return [Region(path, kind, mod) for path, mod in model.named_modules()
            if path and (kind := region_kind(mod)) is not None]


@torch.no_grad()
def capture(source: ModelSource, regions: list[Region]) -> None:
    """Run the model on its probe calls (or its one fixed call) and record each region's first
    call per probe into ``region.calls``. Regions never called stay without calls."""
    calls = [source.probe(b, s) for b, s in PROBES] if source.probe else [source.fixed]
    for args, kwargs in calls:
        hooks = []
        done: set[int] = set()
        for r in regions:
            def hook(mod, a, k, out, r=r):
                if id(r) in done:
                    return
                done.add(id(r))
                leaves, spec = flatten_call(mod, a, k)
                r.calls.append(Call(leaves, spec, output_leaves(out)))
            hooks.append(r.module.register_forward_hook(hook, with_kwargs=True))
        try:
            source.module(*args, **kwargs)
        finally:
            for h in hooks:
                h.remove()


def dynamic_dims(source: ModelSource, region: Region) -> list[dict[int, str]]:
    """Per tensor input leaf of ``region``, dimension index -> axis name for the dimensions that
    vary with the model's inputs: ``batch_size``, ``seq_len`` or ``num_tokens`` (batch x seq).

    With two probes, a dimension varies when its values differ, and its axis is the one whose
    probe values it matches; a dimension that varies otherwise is named ``dyn<i>``. With one
    call, dimension 0 of a non-parameter input equal to the source's batch size is the batch.
    """
    out: list[dict[int, str]] = []
    first = region.calls[0]
    if len(region.calls) > 1:
        (b1, s1), (b2, s2) = PROBES
        known = {(b1, b2): "batch_size", (b1 * s1, b2 * s2): "num_tokens"}
        if source.has_seq:
            known[(s1, s2)] = "seq_len"
        second = region.calls[1]
        for la, lb in zip(first.leaves, second.leaves):
            if not la.is_tensor:
                continue
            dims: dict[int, str] = {}
            for i, (x, y) in enumerate(zip(la.value.shape, lb.value.shape)):
                if x != y:
                    dims[i] = known.get((x, y), f"dyn{i}")
            out.append(dims)
        return out
    for leaf in first.leaves:
        if not leaf.is_tensor:
            continue
        t = leaf.value
        dims = {0: "batch_size"} if t.dim() and source.fixed_batch and t.shape[0] == source.fixed_batch else {}
        out.append(dims)
    return out
