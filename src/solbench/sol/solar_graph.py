"""The layer graph upstream SOLAR's memory model walks, recorded at the ``torch`` function level.

SOL-ExecBench's official ``sol_ms`` come from an early SOLAR pipeline (torchview trace -> einsum
graph -> per-layer analysis, ``solar/analysis/graph_analyzer.py`` as first published). Its memory
term is not "each distinct input read once + each output written once": it is a sum over the
traced *layers* (one per top-level torch function call on a traced tensor: ``F.linear``,
``Tensor.__mul__``, ``Tensor.view``, ``Tensor.to``, ``Tensor.__getitem__``, ...) of

* the layer's input elements, counted only when *none* of its operands is produced by another
  layer (a layer fed by one model input and one intermediate counts neither), once per operand
  occurrence (``x * x`` reads ``x`` twice, and two layers reading one input both count it); and
* the layer's output elements when no other layer reads them: every dead end, returned or not
  (a returned tensor that another layer also reads counts nothing).

Operand details reproduced here (each checked against the official figures, docs/sol-model.md):

* ``x[...]`` reads what it selects, not the whole of ``x``; so does ``F.embedding(ids, table)``
  (``table[ids]`` with the table second: n ids of a [V, D] table read n x D), while
  ``torch.gather`` reads its whole input (L2/011's official rows count it);
* ``F.linear`` reads only its activation: weight and bias are not traced operands (they were
  module parameters in the kernels the official table was computed from);
* a ``F.linear`` whose activation another layer produced reads that activation in full and its
  producer writes it once (an ``nn.Linear`` was a module node of upstream's graph, and nothing
  fuses across its boundary on the input side; its output may still feed a fused epilogue):
  L1/073's norm feeding two projections, L1/045's GRN feeding its second projection;
* a layer that only reshapes a model input (``.squeeze``, ``.view``, ``.reshape``, ...), whose
  result reaches only gathers (``t[idx]``, ``index_select``), through further reshapes or dtype
  casts, reads the gathered elements (the official table counts the gathered pages of a KV
  cache the reference squeezes and converts whole first); a dtype cast (``.to``, ``.float``)
  reading the model input itself reads all of it (L1/009's ``grad_output.to(float32)[idx]``);
* a tensor made inside the reference by one of the ``torch.*`` creators upstream's tracer
  (torchview) wraps -- ``torch.zeros``, ``ones``, ``empty``, ``rand``, ``randn``, ``randint``,
  ``linspace``, ``logspace``, ``range``, ``normal``, ``bernoulli``, ``multinomial``, ``poisson``
  and the ``*_like`` creators -- is traced like a model input (a layer reading it alone counts
  it); one made otherwise (``torch.tensor``; and ``torch.arange``, ``torch.full``, ``eye``,
  ``as_tensor``, ``randperm``, which torchview also wraps but no official row says either way:
  docs/sol-model.md, convention 1b) is not, and reading it is free. A wrapped creator given a
  traced tensor (``torch.zeros_like(x)``) is also a layer of its own, reading x, whose output
  nothing reads (written): torchview records the call, then its wrapper gives the result a new
  node (convention 1c). ``x[...] = v`` (no tensor returned) is no layer, so a result scattered
  into a buffer that way is a dead end (written) and the buffer is read by whatever reads it;
* ``F.scaled_dot_product_attention`` is expanded into QK^T (reads Q and K, unless any of Q, K, V
  comes from another layer) and PV (its other operand is the softmax, so V is never counted).

MACs (:meth:`SolarGraphMode._macs`) are those of the einsum each layer converts to: ``linear``,
``matmul``/``@``/``mm``/``bmm`` (each index size from the first operand that has it), conv
(output x in-channels per group x kernel), SDPA (QK^T + PV, causal in full) and ``_scaled_mm``
on the stored operands (a packed fp4 K counts one MAC per byte: half the real MACs).
``torch.einsum`` layers carry none (the official figures of the two dev problems built on
einsum equal their memory term); ops with no einsum handler (``addmm``, ``baddbmm``) neither.

:class:`SolarGraphMode` records the graph while the reference runs (fake or real tensors);
:meth:`SolarGraph.fused_elements` applies the rules; :mod:`solbench.sol.bound` prices the count
at one width per problem (upstream's ``bytes_per_element``), except that a fp8 problem reads its
GEMM weights (:meth:`SolarGraph.weight_root_elements`) at 2 B and a fp4 problem does not read its
packed GEMM weights and their block scales (``weight_root_elements(scales=True)``).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from .counts import SolarTotals


#: layers that only convert or reshape their input (see :meth:`SolarGraph.fused_elements`)
CAST_VIEW = {"to", "float", "half", "bfloat16", "type", "type_as", "squeeze", "unsqueeze", "view",
             "reshape", "contiguous", "flatten"}
#: of those, the ones that only reshape: a model input read by one of them, and then only
#: gathered from, counts the gathered elements (see :meth:`SolarGraph.fused_elements`)
RESHAPES = {"squeeze", "unsqueeze", "view", "reshape", "contiguous", "flatten"}
#: gathers: read the rows an index tensor selects
GATHERS = {"__getitem__", "index_select", "embedding", "gather", "take", "take_along_dim"}


@dataclass
class Layer:
    name: str
    #: element count of each traced tensor argument (repeated arguments repeated)
    in_elems: list[int] = field(default_factory=list)
    #: indices of the layers that produced this layer's traced inputs (model inputs: none)
    preds: set[int] = field(default_factory=set)
    out_elems: int = 0
    consumed: bool = False
    #: indices of the layers that read this layer's output
    consumers: list[int] = field(default_factory=list)
    #: indexing by a tensor (``x[idx]``, ``index_select``, ``embedding``): a gather
    gather: bool = False
    #: MACs upstream's einsum conversion assigns this layer (0 for non-einsum layers)
    macs: int = 0
    #: ``F.linear`` only: the layer that produced the activation (None: a model input or
    #: untraced), and the activation's element count (see :meth:`SolarGraph.fused_elements`)
    act_pred: int | None = None
    act_elems: int = 0
    #: matmuls only (``@``, ``matmul``, ``mm``, ``bmm``, ``_scaled_mm``): the layers that
    #: produced the first operand (the activation) and the second (the weight); None for a
    #: model input or an untraced tensor (see :meth:`SolarGraph.weight_root_elements`)
    a_src: int | None = None
    b_src: int | None = None
    #: ``_scaled_mm`` only: the layer that produced the weight's block scales (``scale_b``)
    b_scale_src: int | None = None


@dataclass
class SolarGraph:
    layers: list[Layer] = field(default_factory=list)

    def totals(self) -> SolarTotals:
        """The figures the solar model prices (:class:`SolarTotals`)."""
        return SolarTotals(macs=self.macs(), fused_elements=self.fused_elements(),
                           weight_root_elements=self.weight_root_elements(),
                           scaled_weight_root_elements=self.weight_root_elements(scales=True))

    def _gathered_only(self, i: int, depth: int = 0) -> int | None:
        """Elements gathered from layer ``i``'s output when every path from it ends in a gather
        (through casts and views only); None otherwise."""
        lay = self.layers[i]
        if not lay.consumers or depth > 8:
            return None
        total = 0
        for j in lay.consumers:
            c = self.layers[j]
            if c.gather:
                total += c.out_elems
            elif c.name in CAST_VIEW:
                got = self._gathered_only(j, depth + 1)
                if got is None:
                    return None
                total += got
            else:
                return None
        return total

    def fused_elements(self) -> int:
        """Upstream's fused element count (see module docstring)."""
        total = 0
        #: producer index -> elements of its output that linears read (written once, at most
        #: the whole output: two linears of one activation share its write, two chunks do not)
        materialised: dict[int, int] = {}
        for i, lay in enumerate(self.layers):
            if not lay.preds:
                n_in = sum(lay.in_elems)
                if lay.name in RESHAPES:
                    got = self._gathered_only(i)
                    if got is not None:
                        n_in = min(n_in, got)
                total += n_in
            elif lay.act_pred is not None:
                # a linear (a module node upstream) fed by another layer: the activation is
                # read by the linear and written once by its producer
                total += lay.act_elems
                materialised[lay.act_pred] = materialised.get(lay.act_pred, 0) + lay.act_elems
            if not lay.consumed:
                total += lay.out_elems
        return total + sum(min(n, self.layers[p].out_elems) for p, n in materialised.items())

    def _ancestors(self, i: int | None) -> set[int]:
        """Layer ``i`` and every layer it depends on (empty for None)."""
        seen: set[int] = set()
        stack = [i] if i is not None else []
        while stack:
            j = stack.pop()
            if j in seen:
                continue
            seen.add(j)
            stack.extend(self.layers[j].preds)
        return seen

    def weight_root_elements(self, scales: bool = False) -> int:
        """Model-input elements that reach a matmul only as its weight (second operand).

        The layers with no traced predecessor (they read model inputs) among the ancestors of a
        matmul's second operand and not of that matmul's first operand; each counted once, with
        the elements the walk reads in it. Upstream's fp8 kernels held such a weight as a
        16-bit module parameter and quantised it in ``forward``, so its read is priced at 2 B
        while the fp8 problem's other elements are priced at 1 B
        (:func:`solbench.sol.bound.bound_from_counts`; docs/sol-model.md, solar convention 2b).
        A weight passed to the matmul directly, with no layer in between, is not found here.

        ``scales=True`` also counts the weight's block scales (``_scaled_mm``'s ``scale_b``):
        a fp4 problem's packed weights and their scales were module buffers in the kernels
        upstream traced, so the solar model reads none of them (solar convention 2c)."""
        roots: set[int] = set()
        for lay in self.layers:
            srcs = [lay.b_src] + ([lay.b_scale_src] if scales else [])
            if any(s is not None for s in srcs):
                only_b = set().union(*(self._ancestors(s) for s in srcs)) - self._ancestors(lay.a_src)
                roots |= {j for j in only_b if not self.layers[j].preds}
        return sum(sum(self.layers[j].in_elems) for j in roots)

    def macs(self) -> int:
        return sum(lay.macs for lay in self.layers)

    def summary(self, limit: int = 40) -> list[str]:
        """One line per layer (for debugging and the agreement report)."""
        out = []
        for i, lay in enumerate(self.layers[:limit]):
            out.append(f"{i}:{lay.name} in={lay.in_elems} preds={sorted(lay.preds)} "
                       f"out={lay.out_elems}{'' if lay.consumed else ' (dead end)'} macs={lay.macs}")
        return out


def _numel(t: torch.Tensor) -> int:
    return int(t.numel())


def _matmul_macs(a: tuple, b: tuple) -> int:
    """MACs of ``a @ b`` as upstream counts them: the product of the distinct index sizes, each
    taken from the first operand that has it (so a broadcast size-1 batch dim of ``a`` counts 1)."""
    if len(a) == 1 and len(b) == 1:
        return a[0]
    if len(a) == 1:
        return math.prod(b)
    if len(b) == 1:
        return math.prod(a)
    nb = max(len(a), len(b)) - 2
    sizes = []
    for i in range(nb):
        ia = i - (nb - (len(a) - 2))
        ib = i - (nb - (len(b) - 2))
        sizes.append(a[ia] if ia >= 0 else b[ib])
    return math.prod(sizes) * a[-2] * a[-1] * b[-1]


flat_tensors = None  # counting.flat_tensors, bound on first use (circular import)

#: call name -> can :meth:`SolarGraphMode._macs` give it a nonzero count? (it returns 0 for
#: every name outside these); cached, since a run repeats a few names many times
_MAC_NAMES = {"linear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm",
              "scaled_dot_product_attention", "_scaled_mm"}
_MAY_HAVE_MACS: dict[str, bool] = {}
_NO_NAME = object()
#: call names whose operands are counted by a rule of their own (:meth:`SolarGraphMode._record`)
_OPERAND_RULES = {"linear", "__getitem__"}
#: two-operand matrix products: activation first, weight second (:attr:`Layer.b_src`)
_MATMUL_NAMES = {"matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "_scaled_mm"}
#: the ``torch.*`` tensor creators torchview's recorder wraps so that their result is traced
#: (a "temporary tensor" node); torchview (0.2.6, 0.2.7) also wraps ``arange``, ``full``,
#: ``eye``, ``as_tensor`` and ``randperm``, left out here (no dev problem's official rows say
#: either way; docs/sol-model.md, convention 1b); ``torch.tensor`` is not wrapped. One given a
#: traced tensor is also a layer of its own (convention 1c, :meth:`SolarGraphMode._record`)
_CREATION_OPS = frozenset(getattr(torch, n) for n in (
    "randn", "ones", "range", "linspace", "logspace", "zeros", "randint", "rand", "rand_like",
    "normal", "bernoulli", "multinomial", "poisson", "empty", "zeros_like", "ones_like",
    "empty_like", "full_like", "randn_like", "randint_like") if hasattr(torch, n))


def _may_have_macs(name: str) -> bool:
    got = _MAY_HAVE_MACS.get(name)
    if got is None:
        n = name.lower()
        got = n in _MAC_NAMES or n.startswith("conv")
        if len(_MAY_HAVE_MACS) < 1 << 12:
            _MAY_HAVE_MACS[name] = got
    return got


class SolarGraphMode(TorchFunctionMode):
    """Records :class:`SolarGraph` layers: every torch function call that takes at least one
    traced tensor and returns a tensor. Seed it with :meth:`add_input` for each model input."""

    def __init__(self):
        super().__init__()
        self.graph = SolarGraph()
        #: id(tensor) -> (weak reference to it, producing layer index or None for a model input);
        #: weak, so a real-tensor run does not keep every intermediate alive
        self._tracked: dict[int, tuple[weakref.ref, int | None]] = {}

    def add_input(self, t: torch.Tensor) -> None:
        self._tracked[id(t)] = (weakref.ref(t), None)

    def _lookup(self, t: torch.Tensor):
        hit = self._tracked.get(id(t))
        if hit is None or hit[0]() is not t:
            return None
        return hit

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            self._record(func, args, kwargs, out)
        except Exception:  # noqa: BLE001 - the graph is an estimate; never break the run
            pass
        return out

    def _record(self, func, args, kwargs, out) -> None:
        global flat_tensors
        if flat_tensors is None:  # counting imports this module: bind on first use
            from .counting import flat_tensors
        # a call returning no tensor (``.shape``, ``.item()``, ``__setitem__``) is no layer:
        # decided first, as it is the cheaper test
        if isinstance(out, torch.Tensor):
            flat_out = [out]
        else:
            flat_out = flat_tensors(out)
            if not flat_out:
                return
        tracked = self._tracked
        flat_in = flat_tensors(args, kwargs) if kwargs else flat_tensors(args)
        traced = []
        for t in flat_in:
            hit = tracked.get(id(t))
            if hit is not None and hit[0]() is t:
                traced.append((t, hit[1]))
        creator = func in _CREATION_OPS
        if creator:
            # torchview wraps these torch.* creators: their result is a traced temporary
            # tensor (a graph input of its own). One given a traced tensor (``zeros_like(x)``)
            # is first recorded as a function node of its own, reading x, whose output no
            # node reads (torchview's wrapper replaces the result's node after the call):
            # that layer is recorded below and its result then re-registered as a graph input
            if not traced:
                for o in flat_out:
                    tracked[id(o)] = (weakref.ref(o), None)
                return
        elif not traced:
            return
        name = getattr(func, "__name__", _NO_NAME)
        if name is _NO_NAME:
            name = str(func)
        layers = self.graph.layers
        idx = len(layers)
        out_elems = 0
        for o in flat_out:
            out_elems += int(o.numel())
        in_elems = []
        preds = set()
        special = name in _OPERAND_RULES
        first = flat_in[0]
        gather = name in GATHERS and any(
            isinstance(x, torch.Tensor) and x is not first and not x.dtype.is_floating_point
            for x in flat_in[1:])
        # F.embedding(ids, table) is table[ids] with the table second: it reads the rows its
        # ids select, as indexing does (Quant/008's official rows read none of its 1.2 G-element
        # table). torch.gather keeps reading its whole input (L2/011's official rows count it)
        embed = name == "embedding" and not first.dtype.is_floating_point
        if embed:
            gather = True
        for j, (t, prod) in enumerate(traced):
            n_el = int(t.numel())
            if special:
                if name == "linear" and t is not first:
                    # F.linear's weight and bias are not traced operands upstream (module
                    # parameters in the original kernels): only the activation is read
                    n_el = 0
                if name == "__getitem__" and j == 0 and t is first:
                    # indexing reads what it selects, not the whole tensor
                    n_el = min(n_el, out_elems)
            elif embed and t is not first:
                # n ids of a [V, D] table: n x D elements, never more than the table
                n_el = min(n_el, out_elems)
            in_elems.append(n_el)
            if prod is not None:
                preds.add(prod)
        may = _MAY_HAVE_MACS.get(name)
        if may is None:
            may = _may_have_macs(name)
        macs = self._macs(name, args, kwargs, flat_out) if may else 0
        lay = Layer(name, in_elems, preds, out_elems, False, [], gather, macs)
        if name == "linear" and traced[0][0] is first and traced[0][1] is not None:
            lay.act_pred, lay.act_elems = traced[0][1], int(first.numel())
        if name == "scaled_dot_product_attention":
            self._add_sdpa(lay, args, kwargs)
        if name in _MATMUL_NAMES and len(args) > 1:
            a, b = (args[1], args[0]) if name == "__rmatmul__" else (args[0], args[1])
            sb = (args[3] if len(args) > 3 else kwargs.get("scale_b")) if name == "_scaled_mm" else None
            for t, prod in traced:
                if t is a:
                    lay.a_src = prod
                if t is b:
                    lay.b_src = prod
                if t is sb:
                    lay.b_scale_src = prod
        for p in preds:
            layers[p].consumed = True
            layers[p].consumers.append(idx)
        layers.append(lay)
        for o in flat_out:
            tracked[id(o)] = (weakref.ref(o), None if creator else idx)

    @staticmethod
    def _add_sdpa(lay: Layer, args, kwargs) -> None:
        """QK^T reads Q and K (nothing if any of Q, K, V comes from a layer); PV reads the
        softmax (an intermediate), so V is never counted."""
        q = args[0] if args else kwargs.get("query")
        k = args[1] if len(args) > 1 else kwargs.get("key")
        lay.in_elems = [_numel(q), _numel(k)]

    @staticmethod
    def _macs(name: str, args, kwargs, flat_out) -> int:
        """MACs upstream's einsum conversion gives a layer named ``name`` (0 for all others)."""
        n = name.lower()
        try:
            if n == "linear":
                x, w = args[0], args[1] if len(args) > 1 else kwargs["weight"]
                return _numel(x) * int(w.shape[0])
            if n in ("matmul", "__matmul__", "__rmatmul__", "mm"):
                a, b = args[0], args[1]
                if n == "__rmatmul__":
                    a, b = b, a
                return _matmul_macs(tuple(a.shape), tuple(b.shape))
            if n == "bmm":
                a, b = args[0], args[1]
                return math.prod(a.shape) * int(b.shape[-1])
            if n.startswith("conv") and "transpose" not in n and n[4:5] in ("1", "2", "3"):
                w = args[1] if len(args) > 1 else kwargs["weight"]
                return _numel(flat_out[0]) * math.prod(w.shape[1:])
            if n == "scaled_dot_product_attention":
                q = args[0] if args else kwargs["query"]
                k = args[1] if len(args) > 1 else kwargs["key"]
                v = args[2] if len(args) > 2 else kwargs["value"]
                *bh, L, E = q.shape
                S, Ev = k.shape[-2], v.shape[-1]
                return math.prod(bh) * L * S * (E + Ev)
            if n == "_scaled_mm":
                # replaced by a plain matmul on the stored (packed) operands upstream: a packed
                # fp4 K counts one MAC per byte, i.e. half the real MACs
                a, b = args[0], args[1]
                return int(a.shape[0]) * int(a.shape[1]) * int(b.shape[1])
        except Exception:  # noqa: BLE001
            return 0
        return 0
