"""A region's standalone functional reference, from ``torch.export``.

The region's module is exported on its recorded call with the varying dimensions marked
dynamic (``torch.export.Dim`` named after the axis), decomposed to functional ATen
(``run_decompositions({})``: in-place ops become out-of-place, composite ops such as
``linear`` and ``scaled_dot_product_attention`` are kept), and its graph printed as Python:
``_graph(...)`` calls ``torch.ops.aten.*`` only, and ``run(...)`` takes every activation
and every parameter as an input (weights as inputs). Buffers of up to
:data:`MAX_EMBEDDED` elements (rotary ``inv_freq``, index tables) are written into the source
as literals, exactly (every float32/bfloat16/float16 value is a Python float). Larger buffers
become inputs.

What cannot be captured ends the region with a reason (:class:`RegionError`): an export
failure (data-dependent control flow, an op export cannot trace such as a custom CUDA op
without a fake kernel), a buffer or input mutated in place (state), a data-dependent output
size, a dimension that varies with the inputs in a way not named by an axis.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.export import Dim
from torch.utils import _pytree as pytree

from ..spec.dtypes import DTYPES
from .capture import Call, Region, _sanitize

#: buffers with at most this many elements are written into the reference as literals
MAX_EMBEDDED = 1 << 16

_DROP = {
    torch.ops.aten._assert_tensor_metadata.default, torch.ops.aten._assert_scalar.default,
    torch.ops.aten.sym_constrain_range_for_size.default,
}


class RegionError(Exception):
    """A region that cannot become a problem; the message is the reason reported."""


@dataclass
class Tensor:
    """One input or output of the extracted reference.

    Attributes:
        name: the argument / output name.
        kind: ``activation`` | ``parameter`` | ``buffer`` | ``output``.
        value: its value at the first probe (inputs: what the module saw; outputs: what it returned).
        shape: list of axis names and int literals.
        origin: the module attribute it came from (parameters and buffers) or the argument.
        role: the input role (``Definition.input_roles``) or None.
    """

    name: str
    kind: str
    value: torch.Tensor
    shape: list[str | int]
    origin: str
    role: str | None = None


@dataclass
class Extracted:
    """A region's reference and its signature."""

    graph_source: str
    inputs: list[Tensor]
    outputs: list[Tensor]
    axes: dict[str, dict[str, Any]]
    constants: dict[str, torch.Tensor]
    graph_args: list[str]  # per _graph placeholder: an input name or "_C:<constant name>"
    custom_lines: list[str] = field(default_factory=list)


def dtype_name(dt: torch.dtype) -> str:
    for k, v in DTYPES.items():
        if v == dt and k != "float4_e2m1":
            return k
    raise RegionError(f"dtype {dt} has no name in the definition format")


class _Wrapper(nn.Module):
    """Calls the region with its recorded constants and the tensors given; returns the output's
    tensor leaves as a tuple."""

    def __init__(self, mod: nn.Module, call: Call):
        super().__init__()
        self.mod = mod
        self._is_t = [leaf.is_tensor for leaf in call.leaves]
        self._consts = [None if leaf.is_tensor else leaf.value for leaf in call.leaves]
        self._spec = call.spec

    def forward(self, *ts):
        it = iter(ts)
        leaves = [next(it) if t else c for t, c in zip(self._is_t, self._consts)]
        args, kwargs = pytree.tree_unflatten(leaves, self._spec)
        out = self.mod(*args, **kwargs)
        return tuple(v for v in pytree.tree_leaves(out) if isinstance(v, torch.Tensor))


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def export_region(region: Region, dyn: list[dict[int, str]]) -> Any:
    """``torch.export`` of the region on its first call, with ``dyn`` (per tensor input,
    dim -> axis name) marked dynamic; decomposed to functional ATen.

    Raises:
        RegionError: export fails (the reason is its first line).
    """
    call = region.calls[0]
    tensors = tuple(leaf.value for leaf in call.leaves if leaf.is_tensor)
    dims: dict[str, Dim] = {}
    shapes = []
    for d in dyn:
        shapes.append({i: dims.setdefault(n, Dim(n, min=1)) for i, n in d.items()} or None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.export(_Wrapper(region.module, call), tensors,
                                     dynamic_shapes=(tuple(shapes),), strict=False)
            ep = ep.run_decompositions({})
    except Exception as e:  # noqa: BLE001 - every export failure is a reason, reported
        raise RegionError(f"torch.export failed: {_first_line(e)}") from None
    return ep


def _float_literal(t: torch.Tensor) -> str:
    vals = t.detach().cpu().to(torch.float64 if t.is_floating_point() else torch.int64).reshape(-1).tolist()
    body = ", ".join(repr(v) if not (isinstance(v, float) and not math.isfinite(v)) else f"float('{v}')"
                     for v in vals)
    return (f"torch.tensor([{body}], dtype=torch.{str(t.dtype).split('.')[-1]})"
            f".reshape({tuple(t.shape)!r})")


def build_reference(region: Region, ep, dyn: list[dict[int, str]], names: dict[int, str]) -> Extracted:
    """The reference of an exported region (module doc).

    Args:
        region: the region (its first call gives the input values).
        ep: its exported program (:func:`export_region`).
        dyn: the dynamic dimensions given to the export.
        names: int value -> axis name for constant dimensions (config names).

    Raises:
        RegionError: state mutated in place, a data-dependent or unnamed dynamic size, an
            unsupported global in the printed graph.
    """
    sig = ep.graph_signature
    if sig.buffers_to_mutate:
        raise RegionError(f"mutates module state in place: {sorted(sig.buffers_to_mutate.values())}")
    if sig.user_inputs_to_mutate:
        raise RegionError("mutates its own inputs in place")
    gm = ep.graph_module
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in _DROP and not node.users:
            graph.erase_node(node)
    call = region.calls[0]
    act_leaves = [leaf for leaf in call.leaves if leaf.is_tensor]
    state = dict(ep.state_dict)
    state.update(ep.constants)
    params = dict(region.module.named_parameters())
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(sig.input_specs):
        raise RegionError("exported graph placeholders do not match its signature")

    # symbol -> axis name, from the user inputs' dynamic dimensions
    sym_axis: dict[Any, str] = {}
    user_idx = 0
    for node, spec in zip(placeholders, sig.input_specs):
        if spec.kind.name == "USER_INPUT":
            val = node.meta.get("val")
            for i, axis in dyn[user_idx].items():
                s = val.shape[i]
                if isinstance(s, torch.SymInt):
                    expr = s.node.expr
                    if expr.is_Symbol:
                        sym_axis.setdefault(expr, axis)
            user_idx += 1

    axes: dict[str, dict[str, Any]] = {}

    def dim_name(d) -> str | int:
        if isinstance(d, torch.SymInt):
            expr = d.node.expr
            if expr.free_symbols and any(str(s).startswith("u") for s in expr.free_symbols):
                raise RegionError(f"data-dependent size {expr} (the output size depends on tensor values)")
            if expr in sym_axis:
                axis = sym_axis[expr]
                axes.setdefault(axis, {"type": "var"})
                return axis
            if expr.is_Integer:
                return _const(int(expr))
            text = str(expr)
            for s, a in sym_axis.items():
                text = re.sub(rf"\b{s}\b", a, text)
            if text.replace(" ", "") in ("batch_size*seq_len", "seq_len*batch_size"):
                axes.setdefault("batch_size", {"type": "var"})
                axes.setdefault("seq_len", {"type": "var"})
                axes["num_tokens"] = {"type": "expr", "expression": "batch_size * seq_len"}
                return "num_tokens"
            raise RegionError(f"a size varies as {text}, which no axis names")
        return _const(int(d))

    def _const(v: int) -> str | int:
        n = names.get(v)
        if n is None:
            return v
        axes.setdefault(n, {"type": "const", "value": v})
        return n if axes[n].get("value") == v else v

    inputs: list[Tensor] = []
    constants: dict[str, torch.Tensor] = {}
    graph_args: list[str] = []
    # names of the graph's own nodes stay theirs: an input never shadows an intermediate
    taken: set[str] = {n.name for n in graph.nodes if n.op not in ("placeholder", "output")} | {"run", "out", "math", "torch"}

    def unique(n: str) -> str:
        n = _sanitize(n)
        base, k = n, 1
        while n in taken:
            k += 1
            n = f"{base}_{k}"
        taken.add(n)
        return n

    user_idx = 0
    for node, spec in zip(placeholders, sig.input_specs):
        kind = spec.kind.name
        if kind == "USER_INPUT":
            leaf = act_leaves[user_idx]
            user_idx += 1
            if not node.users:
                graph.erase_node(node)
                continue
            name = unique(leaf.name)
            node.name = node.target = name
            shape = [dim_name(d) for d in node.meta["val"].shape]
            inputs.append(Tensor(name, "activation", leaf.value, shape, f"argument {leaf.name}"))
            graph_args.append(name)
            continue
        target = spec.target
        local = target[len("mod."):] if target.startswith("mod.") else target
        if kind == "PARAMETER":
            value = params.get(local, state.get(target))
        else:
            value = state.get(target)
        if value is None or not isinstance(value, torch.Tensor):
            raise RegionError(f"cannot resolve {kind.lower()} {local}")
        if not node.users:
            graph.erase_node(node)
            continue
        if kind != "PARAMETER" and value.numel() <= MAX_EMBEDDED:
            cname = unique(local)
            node.name = node.target = f"c_{cname}"
            constants[cname] = value.detach().clone()
            graph_args.append(f"_C:{cname}")
            continue
        name = unique(local)
        node.name = node.target = name
        shape = [dim_name(d) for d in value.shape]
        inputs.append(Tensor(name, "parameter" if kind == "PARAMETER" else "buffer", value.detach(), shape,
                             f"{'parameter' if kind == 'PARAMETER' else 'buffer'} {local}"))
        graph_args.append(name)

    out_node = next(n for n in graph.nodes if n.op == "output")
    out_vals = out_node.args[0]
    outputs: list[Tensor] = []
    for leaf, node in zip(call.outputs, out_vals):
        val = node.meta.get("val") if hasattr(node, "meta") else None
        if val is None:
            raise RegionError(f"output {leaf.name} has no traced shape")
        shape = [dim_name(d) for d in val.shape]
        outputs.append(Tensor(unique(leaf.name), "output", leaf.value, shape, f"output {leaf.name}"))
    if len(outputs) != len(call.outputs) or not outputs:
        raise RegionError("the region returns no tensor" if not outputs else "outputs do not match the trace")

    graph.lint()
    gm.recompile()
    py = graph.python_code(root_module="self")
    allowed = {"torch", "inf", "nan", "device", "math"}
    src = py.src
    extra = sorted(k for k in set(py.globals) - allowed if re.search(rf"\b{re.escape(k)}\b", src))
    if extra:
        raise RegionError(f"the printed graph needs names the reference cannot import: {extra}")
    src = re.sub(r"device\(type='[a-z]+'(, index=\d+)?\)", "_dev", src)
    src = src.replace("def forward(self, ", "def _graph(_dev, ", 1).replace("def forward(self)", "def _graph(_dev)", 1)
    if "device(" in src:
        raise RegionError("the graph names a device the reference cannot rewrite")
    # activations first, then the weights (the order of the SOL-ExecBench references)
    inputs.sort(key=lambda t: t.kind != "activation")
    return Extracted(src, inputs, outputs, axes, constants, graph_args)


def reference_source(ex: Extracted, doc: str, backward: bool = False) -> str:
    """The text of the reference module (imports torch and math only)."""
    lines = [f'"""{doc}"""', "", "import math", "", "import torch", "", "inf = math.inf", "nan = math.nan", ""]
    if ex.constants:
        lines.append("# buffers of the module (exact values), moved to the inputs' device on use")
        lines.append("_CONSTANTS = {")
        for k, v in ex.constants.items():
            lines.append(f"    {k!r}: {_float_literal(v)},")
        lines.append("}")
        lines.append("")
    lines.append(ex.graph_source.strip("\n"))
    lines.append("")
    lines.append("")
    names = [t.name for t in ex.inputs]
    call_args = ", ".join(f"_CONSTANTS[{a[3:]!r}].to(_dev)" if a.startswith("_C:") else a for a in ex.graph_args)
    first = names[0] if names else None
    dev = f"{first}.device" if first else "torch.device('cpu')"
    if not backward:
        lines += ["@torch.no_grad()", f"def run({', '.join(names)}):", f"    _dev = {dev}",
                  f"    out = _graph(_dev{', ' if call_args else ''}{call_args})",
                  "    return out[0]" if len(ex.outputs) == 1 else "    return tuple(out)"]
    else:
        grads = [f"grad_{o.name}" for o in ex.outputs]
        wrt = [t.name for t in ex.inputs if t.value.is_floating_point()]
        lines += [f"def run({', '.join(names + grads)}):",
                  f"    _dev = {dev}",
                  "    with torch.enable_grad():"]
        for n in wrt:
            lines.append(f"        {n} = {n}.detach().requires_grad_(True)")
        lines += [f"        out = _graph(_dev{', ' if call_args else ''}{call_args})",
                  f"        grads = torch.autograd.grad(out, ({', '.join(wrt)},), ({', '.join(grads)},), allow_unused=True)",
                  f"    zero = [torch.zeros_like(t) for t in ({', '.join(wrt)},)]",
                  "    grads = [z if g is None else g for g, z in zip(grads, zero)]",
                  "    return grads[0]" if len(wrt) == 1 else "    return tuple(grads)"]
    if ex.custom_lines:
        lines += ["", ""] + ex.custom_lines
    return "\n".join(lines) + "\n"
