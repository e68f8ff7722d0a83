"""Counting the work of a workload: run the reference under a TorchDispatchMode and tally,
per aten op, FLOPs by execution unit and bytes moved.

How the reference is run (recorded in :attr:`Counts.mode`):

1. ``fake``: inputs are FakeTensors built from the definition's declared shapes and dtypes
   (custom-input workloads call the problem's entrypoint under FakeTensorMode); nothing is
   computed. This works for every reference whose control flow does not read tensor values.
2. ``real``: when the fake run fails on a data-dependent operation (``.item()``, data-dependent
   shapes, Python branches on values), the reference runs on real CPU tensors at the workload's
   sizes, with every tensor-core op (matmul, conv, attention) short-circuited to a random
   output of the right shape, so no large GEMM is computed. ``Counts.real_tensors`` is True.
   Large floating-point tensors (>= 64 MiB: inputs, and results of any op) are *stand-ins*:
   one value broadcast to the shape (all strides 0), so a reference that dequantises a 4 GB
   weight or loops over 8 GB of experts runs in little memory; in-place writes into a
   stand-in are skipped. Values of large float tensors do not steer the references' control
   flow (index and mask tensors, which stay real, do).

Safetensors inputs whose blobs are absent are synthesised (index pointers spread evenly;
recorded in ``Counts.synthesized``).

Alongside the aten-level counts, a :class:`~solbench.sol.solar_graph.SolarGraphMode` records the
torch-function-level layer graph upstream SOLAR's memory model walks (``Counts.solar_graph``),
and ``Counts.source_quant`` keeps the quantised dtypes the reference source names: the solar
model prices those (:mod:`solbench.sol.bound`).

Tensor-core work uses ``torch.utils.flop_counter``'s formulas (FLOP = 2 per MAC). SDPA calls
are caught at the ``torch.nn.functional`` level (a TorchFunctionMode) so their causal flag and
GQA grouping are known: the attention FLOPs are then 2*B*Hq*(L*S_eff)*(E + Ev), with S_eff the
number of unmasked key positions (top-left causal: sum_i min(i+1, S)); the full count is kept for
the solar model, which does not halve causal attention (docs/sol-model.md).
"""

from __future__ import annotations

import math
import re
import weakref
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.flop_counter import flop_registry

from . import ops as optab
from .counts import FILLED_NOTE, MASKS_NOTE, CountingError, Counts
from .solar_graph import SolarGraph, SolarGraphMode

aten = torch.ops.aten

#: dtype -> operand class name used in the bound
DTYPE_CLASS = {
    torch.float64: "fp64", torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
    torch.float8_e4m3fn: "fp8", torch.float8_e5m2: "fp8", torch.float4_e2m1fn_x2: "fp4",
    torch.int8: "int8", torch.uint8: "int8",
}
for _n in ("float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"):
    if hasattr(torch, _n):
        DTYPE_CLASS[getattr(torch, _n)] = "fp8"

#: precision rank of a tensor's values (refined model, docs/sol-model.md, R2): the
#: narrowest format that carries the information a value derives from. 0 = exact small values
#: (bool masks, integer indices, constants built from Python literals); uint8 ranks with fp4
#: because a uint8 input may hold packed fp4 codes (a lower rank can only lower the bound)
PREC_NAME = {0: "exact", 1: "fp4", 2: "fp8", 4: "bf16", 5: "fp32", 6: "fp64"}
_DTYPE_RANK = {torch.float64: 6, torch.float32: 5, torch.float16: 4, torch.bfloat16: 4,
               torch.float8_e4m3fn: 2, torch.float8_e5m2: 2, torch.float4_e2m1fn_x2: 1,
               torch.int8: 2, torch.uint8: 1, torch.complex64: 5, torch.complex128: 6}
for _n in ("float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"):
    if hasattr(torch, _n):
        _DTYPE_RANK[getattr(torch, _n)] = 2


def dtype_rank(dt: torch.dtype) -> int:
    """Precision rank of a dtype (bool and wide integers: 0, exact small values)."""
    return _DTYPE_RANK.get(dt, 0)


def mma_precision(ra: int, rb: int) -> str:
    """Precision class of a product of operands of ranks ``ra``, ``rb``: the wider operand
    decides (``fp32xbf16`` when a genuinely fp32 operand meets a 16-bit-or-narrower one)."""
    hi, lo = max(ra, rb), min(ra, rb)
    if hi == 5 and lo <= 4:
        return "fp32xbf16"
    if hi == 3:
        hi = 4
    return PREC_NAME[hi]


#: ops that write a region of their destination without reading it (the destination is
#: argument 0); a write into an input, or into a copy of one, is a changed region
_PURE_WRITES = {"copy", "fill", "zero", "index_put", "_index_put_impl", "index_copy", "scatter",
                "masked_fill", "masked_scatter", "slice_scatter", "select_scatter",
                "index_fill", "diagonal_scatter", "as_strided_scatter"}
#: ops whose result is a full copy of argument 0 (same dtype and shape)
_COPIES = {"clone", "copy", "_to_copy", "contiguous", "alias_copy", "detach_copy", "lift_fresh_copy"}
#: gathers: the index tensor's values do not carry precision into the result
_GATHER_SRC = {"embedding": 0, "index_select": 0, "index": 0, "gather": 0, "_unsafe_index": 0,
               "take": 0, "embedding_bag": 0, "_embedding_bag": 0, "_embedding_bag_forward_only": 0}

_MMA_PACKETS = {
    "mm", "bmm", "addmm", "baddbmm", "_scaled_mm", "convolution", "_convolution",
    "convolution_overrideable", "cudnn_convolution", "_slow_conv2d_forward",
    "convolution_backward", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_flash_attention_forward",
    "_efficient_attention_forward", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention_backward", "_flash_attention_backward",
    "_efficient_attention_backward", "_scaled_dot_product_cudnn_attention_backward",
    "_int_mm", "_scaled_grouped_mm", "_grouped_mm", "dot", "vdot", "mv", "addmv", "outer",
    "addr", "_scaled_dot_product_flash_attention_for_cpu_backward",
}


_SEQUENCES = (tuple, list, type({}.values()))


def flat_tensors(*trees) -> list:
    """The tensors in ``trees`` (args tuples, kwargs dicts, outputs), in order: one or two
    levels of tuple/list/dict, as aten schemas allow (Tensor[] arguments, tuple results);
    anything deeper goes through pytree. Much cheaper than ``tree_flatten`` per op."""
    out = []
    Tensor = torch.Tensor
    for tree in trees:
        if isinstance(tree, Tensor):
            out.append(tree)
            continue
        items = tree.values() if isinstance(tree, dict) else tree
        if not isinstance(items, _SEQUENCES):
            continue
        for x in items:
            if isinstance(x, Tensor):
                out.append(x)
            elif isinstance(x, (tuple, list)):
                for y in x:
                    if isinstance(y, Tensor):
                        out.append(y)
                    elif isinstance(y, (tuple, list, dict)):
                        out.extend(t for t in tree_flatten(y)[0] if isinstance(t, Tensor))
            elif isinstance(x, dict):
                out.extend(t for t in tree_flatten(x)[0] if isinstance(t, Tensor))
    return out


def map_tree(fn, tree):
    """``tree`` with ``fn`` applied to every leaf: the containers of aten arguments and results
    (plain tuples, lists, dicts) are rebuilt, every other value is a leaf (``torch.Size``
    included), as ``torch.utils._pytree.tree_map`` treats them; several times cheaper per op."""
    tp = type(tree)
    if tp is tuple:
        return tuple([map_tree(fn, x) for x in tree])
    if tp is list:
        return [map_tree(fn, x) for x in tree]
    if tp is dict:
        return {k: map_tree(fn, v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list, dict)):  # namedtuples, OrderedDicts, ...: as pytree does
        return tree_map(fn, tree)
    return fn(tree)


def _shape_of(x):
    """``torch.utils.flop_counter.get_shape``: a tensor's shape, anything else itself."""
    return x.shape if isinstance(x, torch.Tensor) else x


def _elem_bytes(t: torch.Tensor) -> float:
    return float(t.element_size())


def _tensor_bytes(t: torch.Tensor) -> float:
    return float(t.numel()) * _elem_bytes(t)


class _OpInfo:
    """What the counting modes look up about an op on every call, computed once per op: its
    packet name (:func:`_packet`), the positions of the arguments it writes (None: no schema),
    whether it writes argument 0, whether it is short-circuited (:data:`_MMA_PACKETS`), counted
    as tensor-core work, a view, a move or an elementwise op (:mod:`solbench.sol.ops`), and its
    torch tags. All of it comes from the op's schema, tags and fixed tables."""

    __slots__ = ("func", "name", "written", "written_names", "writes0", "short", "mma", "view",
                 "move", "elem", "tags", "pointwise", "skippable", "returns_alias", "inplace_view")

    def __init__(self, func):
        self.func = func  # held: the cache is keyed by id(func), so the id stays this op's
        name = func._overloadpacket.__name__ if hasattr(func, "_overloadpacket") else str(func)
        if name.endswith("_") and not name.startswith("__"):
            name = name[:-1]
        self.name = name
        schema = getattr(func, "_schema", None)
        self.written = None if schema is None else [i for i, a in enumerate(schema.arguments)
                                                    if a.alias_info is not None and a.alias_info.is_write]
        #: the names of those arguments (a keyword-only ``out=`` is passed by name)
        self.written_names = [] if schema is None else [schema.arguments[i].name for i in self.written]
        #: does a result alias an operand without writing it (a view: ``expand``, ``t``)?
        #: (``_unsafe_view`` declares a fresh result and returns a view: reshape's copy path)
        self.returns_alias = name == "_unsafe_view" or (schema is not None and any(
            r.alias_info is not None and not r.alias_info.is_write for r in schema.returns))
        #: an in-place view op (``unsqueeze_``, ``t_``, ``as_strided_``): it changes its
        #: operand's shape and strides, not its values
        self.inplace_view = hasattr(func, "tags") and torch.Tag.inplace_view in func.tags
        a0 = schema.arguments[0] if schema is not None and schema.arguments else None
        self.writes0 = bool(a0 is not None and a0.alias_info is not None and a0.alias_info.is_write)
        self.short = name in _MMA_PACKETS
        self.mma = getattr(func, "_overloadpacket", None) in flop_registry or name in _MMA_PACKETS
        self.view = name in optab.VIEW_OPS
        self.move = name in optab.MOVE_OPS
        self.elem = optab.ELEMENTWISE.get(name)
        self.tags = tuple(func.tags) if hasattr(func, "tags") else ()
        self.pointwise = torch.Tag.pointwise in self.tags
        #: may :func:`_skip_unread` leave it uncomputed? An out-of-place pointwise op that draws
        #: no random numbers, or an in-place masked write (``index_put_``)
        self.skippable = (self.pointwise and self.written == [] and not self.short
                          and torch.Tag.nondeterministic_seeded not in self.tags) \
            or (name in ("index_put", "_index_put_impl") and self.writes0)


#: id(func) -> its :class:`_OpInfo` (which holds func, so no other op can take the id); an
#: int key hashes in C, while an OpOverload's ``__hash__`` is a Python method
_OP_INFO: dict[int, _OpInfo] = {}


def _op_info(func) -> _OpInfo:
    info = _OP_INFO.get(id(func))
    if info is None or info.func is not func:
        info = _OpInfo(func)
        _OP_INFO[id(func)] = info
    return info


def _packet(func) -> str:
    """aten packet name with the in-place suffix dropped (``add_`` -> ``add``)."""
    return _op_info(func).name


# ---------------------------------------------------------------------------------------
# the dispatch mode

class _SdpaFunctionMode(TorchFunctionMode):
    """Catches F.scaled_dot_product_attention to count it analytically (causal, GQA)."""

    def __init__(self, counter: "_CountingMode"):
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # the aten op called directly (an exported graph's reference) takes the same arguments;
        # below this level it decomposes into full matmuls (meta) or a fused kernel
        if (func is torch.nn.functional.scaled_dot_product_attention or func is _ATEN_SDPA) \
                and self.counter.depth == 0:
            self.counter.record_sdpa(args, kwargs)
            self.counter.depth += 1
            try:
                return func(*args, **kwargs)
            finally:
                self.counter.depth -= 1
        return func(*args, **kwargs)


_SDPA = torch.nn.functional.scaled_dot_product_attention
_ATEN_SDPA = torch.ops.aten.scaled_dot_product_attention.default


def _causal_share(func, args, kwargs) -> float:
    """The share of a fused attention op's query-key pairs a causal mask keeps (1.0 when the
    op is not causal, or has no ``is_causal`` argument): the FLOPs of the masked pairs need not
    be done, so the refined count leaves them out (the full count keeps them, for solar). The
    flag and the query and key are found by name in the op's schema (forward and backward
    fused SDPA ops of every backend name them ``is_causal``, ``query``, ``key``)."""
    names = [a.name for a in func._schema.arguments]
    if "is_causal" not in names:
        return 1.0

    def arg(name):
        i = names.index(name)
        return kwargs[name] if name in kwargs else args[i] if i < len(args) else None

    if not arg("is_causal"):
        return 1.0
    q, k = arg("query"), arg("key")
    if not isinstance(q, torch.Tensor) or not isinstance(k, torch.Tensor):
        return 1.0
    L, S = q.shape[-2], k.shape[-2]
    return _causal_pairs(L, S) / (L * S) if L * S else 1.0
_CONTIGUOUS = torch.Tensor.contiguous


class _CountingFunctionMode(SolarGraphMode):
    """One torch-function mode doing the work of ``_SdpaFunctionMode`` entered inside a
    ``SolarGraphMode`` (the SDPA count first, then the layer), at the cost of one mode per
    call instead of two: a reference looping over small ops pays this per call."""

    def __init__(self, counter: "_CountingMode"):
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        counter = self.counter
        if counter.taint:
            _check_function_read(counter.taint, func, args, kwargs)
        if func is _CONTIGUOUS and counter.twins and args:
            # a view of a stand-in is never contiguous (strides 0): the real tensor it stands
            # for may be, and then .contiguous() returns it without a copy
            tw = counter.twin(args[0])
            fmt = args[1] if len(args) > 1 else kwargs.get("memory_format", torch.contiguous_format)
            if tw is not None and tw.is_contiguous(memory_format=fmt):
                out = args[0]
                try:
                    self._record(func, args, kwargs, out)
                except Exception:  # noqa: BLE001 - as below
                    pass
                return out
        if (func is _SDPA or func is _ATEN_SDPA) and counter.depth == 0:
            counter.record_sdpa(args, kwargs)
            counter.depth += 1
            try:
                out = func(*args, **kwargs)
            finally:
                counter.depth -= 1
        else:
            out = func(*args, **kwargs)
        try:
            self._record(func, args, kwargs, out)
        except Exception:  # noqa: BLE001 - the graph is an estimate; never break the run
            pass
        return out


def _causal_pairs(L: int, S: int) -> int:
    """Query-key pairs kept by a top-left causal mask (query i sees keys j <= i)."""
    if L <= S:
        return L * (L + 1) // 2
    return S * (S + 1) // 2 + (L - S) * S


#: what made a tensor's values differ from those of the run that computes everything (the
#: bits of a :attr:`_CountingMode.taint` entry): an unfilled short-circuit output (``lazy_fill``),
#: a skipped mask computation or masked write (``lazy_masks``, :func:`_skip_unread`)
TAINT_FILL, TAINT_MASK = 1, 2


class ValuesObserved(Exception):
    """A lazy run (:class:`_CountingMode` with ``lazy_fill`` or ``lazy_masks``) reached a point
    where a value derived from an unfilled short-circuit output or a skipped mask computation
    could steer control flow or a count: the run is void and is repeated without the laziness
    named by ``kinds`` (bits :data:`TAINT_FILL`, :data:`TAINT_MASK`)."""

    #: (message, kinds) of every ValuesObserved made in this process, oldest first (cleared by
    #: :func:`_run_once`; not the exceptions, whose tracebacks would keep the run's frames):
    #: a reference may catch the exception (its own ``except Exception``) or wrap it (as
    #: ``torch.testing.assert_close`` does), so a lazy run that ends is void when one was made
    #: during it, caught or not
    made: list = []

    def __init__(self, message: str, kinds: int = TAINT_FILL | TAINT_MASK):
        super().__init__(message)
        self.kinds = kinds or (TAINT_FILL | TAINT_MASK)
        ValuesObserved.made.append((message, self.kinds))


#: functions that build a tensor from Python data: given tensors inside lists, they read their
#: values below the dispatcher (``torch.tensor([t[0], t[1]])`` dispatches no read op)
_FROM_DATA = {torch.tensor, torch.as_tensor, torch.asarray, torch.Tensor.new_tensor}


def _check_function_read(taint: dict, func, args, kwargs) -> None:
    """Raise :class:`ValuesObserved` when a torch-function-level call reads tainted values
    without dispatching an aten op: a Tensor method of :data:`_VALUE_READ_METHODS`, or a
    function of :data:`_FROM_DATA` given a tainted tensor anywhere in its arguments."""
    if getattr(func, "__name__", None) in _VALUE_READ_METHODS:
        kinds = _taint_kinds(taint, flat_tensors(args, kwargs))
    elif func in _FROM_DATA:
        kinds = _taint_kinds(taint, [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)])
    else:
        return
    if kinds:
        raise ValuesObserved(f"{getattr(func, '__name__', func)} reads values derived from an unfilled output", kinds)


def _taint_kinds(taint: dict, tensors) -> int:
    """The taint bits of ``tensors`` together (0: none is tainted)."""
    kinds = 0
    for t in tensors:
        kinds |= _taint_of(taint, t)
    return kinds


#: view-like ops (no arithmetic, ops.VIEW_OPS) that read the values of their operand's elements
_ELEMENT_READS = {"_local_scalar_dense", "is_nonzero"}

#: ops whose result is a Python scalar read from a tensor's values, or is computed from
#: values in a way that is not a tensor of a known shape (besides the torch tags below)
_VALUE_READS = {"_local_scalar_dense", "is_nonzero", "item", "equal", "allclose", "is_same_size",
                "_assert_async", "_assert_scalar", "_assert_tensor_metadata",
                # a sparse layout's size (nnz) is the count of nonzero values
                "_to_sparse", "to_sparse", "_to_sparse_csr", "_to_sparse_csc", "_to_sparse_bsr",
                "_to_sparse_bsc", "_nnz",
                # raises when the source holds fewer elements than the mask's true count
                "masked_scatter"}
#: ops that take integer index tensors (an out-of-range index raises)
_INDEXING_OPS = {"index", "_unsafe_index", "index_select", "gather", "scatter", "scatter_add",
                 "scatter_reduce", "index_put", "_index_put_impl", "_unsafe_index_put", "index_add",
                 "index_copy", "index_fill", "index_reduce", "embedding", "embedding_bag",
                 "_embedding_bag", "_embedding_bag_forward_only", "take", "put", "one_hot",
                 "take_along_dim", "_unsafe_masked_index", "_unsafe_masked_index_put_accumulate"}
#: Tensor methods that read values without dispatching an aten op (seen at torch-function level)
_VALUE_READ_METHODS = {"tolist", "numpy", "__array__", "data_ptr", "__dlpack__", "untyped_storage",
                       "storage", "_typed_storage", "__reduce_ex__", "__getstate__", "__setstate__",
                       # copies the storage, and formats values, with the dispatch modes off
                       "__deepcopy__", "__repr__", "__str__", "__format__",
                       # a legacy constructor (torch.LongTensor([t])) reads t through it
                       "__index__",
                       # calls a Python function on every element's value, below the dispatcher
                       "apply_", "map_", "map2_"}


#: gathers whose argument 0 is read only at the rows the result holds (:meth:`_CountingMode.note_reads`)
_GATHER_READS = {"embedding": 0, "embedding_bag": 0, "_embedding_bag": 0, "_embedding_bag_forward_only": 0,
                 "index_select": 0, "index": 0, "gather": 0, "_unsafe_index": 0}


class _CountingMode(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # nothing is compiled under a counting mode: an unwrapped __torch_dispatch__ spares the
        # per-op dynamo guard and the import of torch._dynamo (~1.6 s of CPU per process)
        return False

    def __init__(self, counts: Counts, short_circuit: bool = False, lazy_fill: bool = False,
                 lazy_masks: bool = False):
        super().__init__()
        self.c = counts
        self.depth = 0  # > 0 while inside an analytically counted SDPA call
        self.short_circuit = short_circuit
        #: short-circuit outputs are filled with random values (never from the global
        #: generator: the reference's own random draws are the same either way), or, with
        #: ``lazy_fill`` and LAZY_FILL_MIN_ELEMS or more, left uninitialised and *tainted*: ``taint`` holds the storage keys of
        #: every tensor whose values derive from an unfilled output. A tainted value reaching
        #: a value read (``.item()``, a data-dependent shape, ``.tolist()``, an op that raises)
        #: raises :class:`ValuesObserved`; a run that ends without one counted exactly what a
        #: filled run counts, since counts depend on values only through those reads
        self.lazy_fill = lazy_fill
        #: with ``lazy_masks``, large boolean results of pointwise ops and masked writes are not
        #: computed (:func:`_skip_unread`) and their results are tainted the same way
        self.lazy_masks = lazy_masks
        #: storage key -> (taint bits (:data:`TAINT_FILL`, :data:`TAINT_MASK`), weak reference
        #: to the storage: the entry dies with it, :func:`_taint_of`)
        self.taint: dict = {}
        #: fills made so far: fill k draws from a generator seeded k, so it holds the same
        #: values whether or not earlier outputs were left unfilled
        self.fills = 0
        #: storage key -> input name, and per input: read in full? bytes gathered
        self.input_storages: dict = {}
        self.full_read: set[str] = set()
        self.gathered: dict[str, float] = defaultdict(float)
        #: per input: distinct views read (offset, shape, stride) -> bytes of their elements
        self.view_reads: dict[str, dict] = defaultdict(dict)
        #: per input: elements (numel) and dtype, to recognise a full view or a full copy
        self.input_meta: dict[str, tuple[int, torch.dtype]] = {}
        #: storage key -> elements replaced so far (an input updated in place, or a copy of
        #: an input with regions replaced: see :meth:`track_alias`)
        self.changed: dict = defaultdict(float)
        #: inputs that are stand-ins (real runs: one value broadcast, all strides 0): a view of
        #: one without a twin is measured by numel, not by distinct storage elements
        self.stand_in_inputs: set[str] = set()
        #: id(tensor) -> (weak reference, meta twin): a stand-in input (or a stand-in copy of
        #: one) and every view of it carry a meta tensor with the geometry (offset, strides)
        #: the view would have over a real input, since the stand-in's own is all zeros: two
        #: halves of a chunk, or two rows of a cache, would otherwise be one view (same offset,
        #: shape, strides) and one element
        self.twins: dict[int, tuple] = {}
        #: precision rank of every tensor the run produced (:func:`dtype_rank` otherwise):
        #: id(tensor) -> (weak reference, rank); the reference tells a live entry from one
        #: whose id a later tensor reuses (cheaper per op than a WeakIdKeyDictionary)
        self.prec: dict[int, tuple] = {}
        #: tensors registered in input_storages after the run began (copies of inputs): held
        #: for the run, so no later tensor gets their storage's address and passes for an input
        self._keep_alive: list = []
        #: signature (:func:`_sig_key`, no offsets) of the short-circuited call being recorded,
        #: set by :meth:`_fake_output`: its FLOPs are memoised under it (:data:`_MMA_FLOPS`)
        self._sc_key = None

    # -- precision provenance -------------------------------------------------------------
    def rank(self, t: torch.Tensor) -> int:
        hit = self.prec.get(id(t))
        if hit is None or hit[0]() is not t:
            return dtype_rank(t.dtype)
        return hit[1]

    def set_rank(self, t: torch.Tensor, r: int) -> None:
        try:
            self.prec[id(t)] = (weakref.ref(t), min(r, dtype_rank(t.dtype)) if dtype_rank(t.dtype) else 0)
        except TypeError:  # noqa: PERF203 - a tensor type without weak references
            pass

    def propagate(self, name: str, args, flat_in: list, flat_out: list) -> None:
        """Precision of each result = the widest precision its value derives from, capped at
        the result's dtype (docs/sol-model.md, refined convention 2). A gather's index does not
        carry precision; in mul/div a broadcast factor (a scale: fewer elements than the
        result) does not either, when a full-size operand is present."""
        if not flat_out:
            return
        if name in _GATHER_SRC and args and isinstance(args[0], torch.Tensor):
            srcs = [args[0]]
        elif name == "copy" and len(args) > 1 and isinstance(args[1], torch.Tensor):
            srcs = [args[1]]
        elif name in ("mul", "div") and len(flat_in) > 1:
            n = max(o.numel() for o in flat_out)
            full = [t for t in flat_in if t.numel() >= n]
            srcs = full or flat_in
        else:
            srcs = flat_in
        # rank() and set_rank() inlined: this runs on every op of a run
        prec = self.prec
        r = 0
        for t in srcs:
            hit = prec.get(id(t))
            rt = _DTYPE_RANK.get(t.dtype, 0) if hit is None or hit[0]() is not t else hit[1]
            if rt > r:
                r = rt
        for o in flat_out:
            cap = _DTYPE_RANK.get(o.dtype, 0)
            try:
                prec[id(o)] = (weakref.ref(o), (r if r < cap else cap) if cap else 0)
            except TypeError:  # noqa: PERF203 - a tensor type without weak references
                pass

    def writes_arg0(self, func) -> bool:
        """Does ``func`` write into its first argument (an in-place or out= op)?"""
        return _op_info(func).writes0

    # -- outputs that alias inputs ----------------------------------------------------------
    def track_alias(self, func, name: str, args, kwargs, out, outs=None, info=None) -> set[int]:
        """Follow inputs updated in place and copies of inputs with regions replaced.

        A write into an input (or a copy of one) adds the written region to ``changed``; a
        full copy of an input (``clone``, a same-dtype ``.to``, ``copy_`` into a fresh tensor)
        and a functional scatter into one (``index_put``, ``slice_scatter``, ``index_copy``,
        ...) are registered as that input (an implementation may return the input itself,
        updated in place). Returns the positions (in the flattened tensor arguments) that are
        not reads: the destination of a pure write, the source of such a copy. ``outs``: the
        tensors of ``out`` (:func:`flat_tensors`) when the caller has them."""
        skip: set[int] = set()
        if not args or not isinstance(args[0], torch.Tensor) or not self.input_storages:
            return skip
        dst = args[0]
        dkey = _skey(dst)
        if outs is None:
            outs = flat_tensors(out)
        if name == "copy" and len(args) > 1 and isinstance(args[1], torch.Tensor):
            src = args[1]
            skey_ = _skey(src)
            xname = self.input_of(src)
            if dkey not in self.input_storages and xname is not None and self._is_full(src, xname) \
                    and dst.dtype == src.dtype and dst.numel() == src.numel():
                self.input_storages[dkey] = xname
                self._keep_alive.append(dst)
                self._twin_copy(dst)
                self.changed[dkey] = self.changed.get(skey_, 0.0)
                return {1}
        if (info or _op_info(func)).writes0:
            if self.input_of(dst) is not None:
                self.changed[dkey] += _region(name, args, kwargs, self.geometry(dst))
                if name in _PURE_WRITES and not _accumulates(name, args, kwargs):
                    skip.add(0)
            return skip
        if not outs:
            return skip
        xname = self.input_of(dst)
        if xname is None:
            return skip
        o = outs[0]
        okey = _skey(o)
        if okey == dkey:
            return skip
        if name in _PURE_WRITES and not _accumulates(name, args, kwargs) and self._is_full(dst, xname) \
                and o.dtype == dst.dtype and o.numel() == dst.numel():
            self.input_storages[okey] = xname
            self._keep_alive.append(o)
            self._twin_copy(o, func, args, kwargs)
            self.changed[okey] = self.changed.get(dkey, 0.0) + _region(name, args, kwargs, self.geometry(dst))
            skip.add(0)
        elif name in _COPIES and self._is_full(dst, xname) and o.dtype == dst.dtype \
                and o.numel() == dst.numel():
            # a copy of a view that covers the whole input (a transpose, a broadcast): an
            # implementation may return that view itself (the harness takes any plain tensor
            # of the output's shape and dtype and copies it out after the clock)
            self.input_storages[okey] = xname
            self._keep_alive.append(o)
            self._twin_copy(o, func, args, kwargs)
            self.changed[okey] = self.changed.get(dkey, 0.0)
            skip.add(0)
        return skip

    def input_of(self, t: torch.Tensor):
        """The input whose storage ``t`` views (or a copy registered as one), or None."""
        return self.input_storages.get(_skey(t))

    def on_twins(self, func, args, kwargs):
        """``func`` run on the meta device with each tensor operand replaced by its twin (a meta
        copy when it has none). Raises what the meta kernel raises."""
        def sub(x):
            if isinstance(x, torch.Tensor):
                tw = self.twin(x)
                return tw if tw is not None else x.to("meta")
            return x
        return func(*map_tree(sub, args), **map_tree(sub, kwargs))

    def meta_result(self, func, args, kwargs, shape):
        """The first result of ``func`` on the operands' twins (:meth:`on_twins`), if it has
        ``shape``: the layout the real tensor's result would have (``clone`` keeps a dense
        source's strides, ``memory_format`` chooses another)."""
        try:
            r = self.on_twins(func, args, kwargs)
        except Exception:  # noqa: BLE001 - no meta kernel
            return None
        r = r if isinstance(r, torch.Tensor) else next(iter(flat_tensors(r)), None)
        return r if r is not None and tuple(r.shape) == tuple(shape) else None

    def _twin_copy(self, t: torch.Tensor, func=None, args=(), kwargs=None) -> None:
        """A stand-in copy of an input gets a twin with the layout of the real copy
        (:meth:`meta_result` of the copying op), contiguous when that is not known."""
        if _is_stand_in(t):
            tw = self.meta_result(func, args, kwargs or {}, t.shape) if func is not None else None
            self.set_twin(t, tw if tw is not None else _dense_twin(t))

    def elems(self, t: torch.Tensor, xname: str) -> int:
        """Elements of input ``xname`` that the view ``t`` covers."""
        tw = self.twin(t) if self.twins else None
        if tw is not None:
            return _unique_elems(tw)
        return t.numel() if xname in self.stand_in_inputs else _unique_elems(t)

    def _is_full(self, t: torch.Tensor, xname: str) -> bool:
        n, dt = self.input_meta.get(xname, (None, None))
        return n is not None and self.elems(t, xname) >= n and t.dtype == dt

    def twin(self, t):
        """``t``'s meta twin (see :attr:`twins`), or None."""
        hit = self.twins.get(id(t))
        if hit is None or hit[0]() is not t or hit[1].shape != t.shape:
            # (a shape that moved: an in-place view op such as unsqueeze_ changed t itself)
            return None
        return hit[1]

    def set_twin(self, t: torch.Tensor, tw: torch.Tensor) -> None:
        try:
            self.twins[id(t)] = (weakref.ref(t), tw)
        except TypeError:  # a tensor type without weak references: measured by numel
            pass

    def geometry(self, t: torch.Tensor) -> torch.Tensor:
        """The tensor whose offset, shape and strides say which input elements ``t`` covers:
        its twin when it has one, else itself."""
        tw = self.twin(t) if self.twins else None
        return t if tw is None else tw

    def twin_views(self, func, args, kwargs, flat_out, info=None):
        """After a view op: give its results the twins the same op gives on the operands' twins.
        An in-place view op (``t_``) is applied to the operand's twin too. Returns the copy
        that replaces a view the twin cannot take (:meth:`_reshape_copied`), else None."""
        for x in flat_tensors(args, kwargs):
            # a stand-in result of another op (a product, a pointwise op) gets its twin when a
            # view is first taken of it: contiguous, as such a result is on real tensors, so
            # its views (the chunks of a product) stay apart
            if _is_stand_in(x) and self.twin(x) is None:
                self.set_twin(x, _dense_twin(x))
        if info is not None and info.inplace_view:
            t = args[0] if args and isinstance(args[0], torch.Tensor) else None
            hit = self.twins.get(id(t)) if t is not None else None
            if hit is None or hit[0]() is not t:
                return
            tw = hit[1]
            try:
                # t has moved already (its twin() no longer matches): the twin is passed as is
                self.on_twins(func, (tw, *args[1:]), kwargs)
            except Exception:  # noqa: BLE001 - no meta kernel: t is measured by numel from now on
                self.twins.pop(id(t), None)
                return
            if tw.shape != t.shape:
                self.twins.pop(id(t), None)
            return
        if not any(self.twin(x) is not None for x in flat_tensors(args, kwargs)):
            return
        try:
            tw_out = self.on_twins(func, args, kwargs)
        except Exception:  # noqa: BLE001 - a view the twin cannot take
            return self._reshape_copied(func, args, flat_out)
        tw_flat = [tw_out] if isinstance(tw_out, torch.Tensor) else flat_tensors(tw_out)
        if len(tw_flat) == len(flat_out):
            for o, tw in zip(flat_out, tw_flat):
                if tuple(o.shape) == tuple(tw.shape):
                    self.set_twin(o, tw)

    def _reshape_copied(self, func, args, flat_out):
        """A view of a stand-in that its twin cannot take (a flatten of a transpose, a
        ``repeat_kv`` reshape of an expanded cache slice): a real tensor's reshape copies there,
        which the stand-in's all-zero strides hid. Returns that copy, a fresh stand-in with a
        contiguous twin, counted as the shape-only run counts it (a ``clone`` of the operand,
        registered as a copy of an input it covers whole); None when ``func`` is no such view."""
        src = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if src is None or len(flat_out) != 1 or _packet(func) not in ("view", "_reshape_alias", "_unsafe_view"):
            return None
        o = flat_out[0]
        fresh = stand_in_value(o.shape, o.dtype, o.reshape(-1)[0].clone())
        self.set_twin(fresh, _dense_twin(o))
        if self.depth == 0:
            clone = torch.ops.aten.clone.default
            try:
                self._record(clone, "clone", (src,), {}, fresh, [src], [fresh], _op_info(clone))
            except Exception as e:  # noqa: BLE001 - as _record's own failures
                self.c.notes.append(f"clone: counting failed ({type(e).__name__}: {e})")
        return fresh

    def note_reads(self, name: str, tensors, out, skip: set[int] = frozenset()) -> None:
        """Mark which declared inputs an op reads: in full, by gathering rows, or by a view
        (its distinct elements). ``skip``: positions that are not reads (:meth:`track_alias`)."""
        storages = self.input_storages
        if not storages:
            return
        src_pos = _GATHER_READS.get(name)
        for i, t in enumerate(tensors):
            if skip and i in skip:
                continue
            inp = self.input_of(t)
            if inp is None:
                continue
            if not (src_pos is not None and i == src_pos) and inp in self.input_meta \
                    and self.elems(t, inp) < self.input_meta[inp][0]:
                g = self.geometry(t)
                try:
                    vk = (g.storage_offset(), tuple(g.shape), tuple(g.stride()))
                except Exception:  # noqa: BLE001 - no strides (sparse, nested): a full read
                    self.full_read.add(inp)
                    continue
                self.view_reads[inp][vk] = float(self.elems(t, inp)) * t.element_size()
                continue
            if src_pos is not None and i == src_pos:
                if name.startswith("embedding_bag") or name.startswith("_embedding_bag"):
                    idx = tensors[1]
                    self.gathered[inp] += float(idx.numel()) * t.shape[-1] * t.element_size()
                else:
                    o = tree_flatten(out)[0][0]
                    self.gathered[inp] += float(o.numel()) * o.element_size()
            else:
                self.full_read.add(inp)

    # -- SDPA ---------------------------------------------------------------------------
    def record_sdpa(self, args, kwargs) -> None:
        names = ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"]
        a = dict(zip(names, args))
        a.update(kwargs)
        q, k, v = a["query"], a["key"], a["value"]
        *bq, L, E = q.shape
        S, Ev = k.shape[-2], v.shape[-1]
        batch_heads = math.prod(bq) if bq else 1
        full_pairs = L * S
        causal = bool(a.get("is_causal", False))
        pairs = _causal_pairs(L, S) if causal else full_pairs
        cls = DTYPE_CLASS.get(q.dtype, "fp32")
        per_pair = 2 * (E + Ev)
        rqk = max(self.rank(q), self.rank(k))
        self.c.mma_by_precision[mma_precision(rqk, max(rqk, self.rank(v)))] += batch_heads * pairs * per_pair
        self.c.cuda_by_precision[_prec_cuda_class("fp32", rqk)] += 5 * batch_heads * pairs
        self.c.mma_flops[cls] += batch_heads * pairs * per_pair
        self.c.mma_flops_full[cls] += batch_heads * full_pairs * per_pair
        # softmax on the kept scores: max, sub, sum, div, scale (5 FLOP) + 1 exp each
        self.c.cuda_flops["fp32"] += 5 * batch_heads * pairs
        self.c.sfu_ops += batch_heads * pairs
        out_bytes = batch_heads * L * Ev * q.element_size()
        mask = a.get("attn_mask")
        in_bytes = sum(_tensor_bytes(t) for t in (q, k, v, mask) if isinstance(t, torch.Tensor))
        self.c.bytes_unfused += in_bytes + out_bytes
        self.c.op_counts["scaled_dot_product_attention"] += 1
        self.note_reads("sdpa", [t for t in (q, k, v, mask) if isinstance(t, torch.Tensor)], None)
        self.c.attention_calls.append({
            "batch_heads": batch_heads, "L": L, "S": S, "E": E, "Ev": Ev, "causal": causal,
            "gqa": bool(a.get("enable_gqa", False)), "masked": isinstance(mask, torch.Tensor),
            "dtype": cls,
        })

    # -- every aten op ------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        info = _OP_INFO.get(id(func))
        if info is None or info.func is not func:
            info = _op_info(func)
        name = info.name
        flat_in = flat_tensors(args, kwargs) if kwargs else flat_tensors(args)
        taint = self.taint
        tainted_in = 0  # the taint bits of the operands
        if taint:
            tainted_in = _taint_kinds(taint, flat_in)
            if tainted_in:
                self._check_values_unread(func, name, args, kwargs, flat_in, tainted_in)
        fresh = None
        unfilled = ()
        self._sc_key = None
        if self.short_circuit and info.short:
            # the outputs' values depend on no operand: only those left unfilled are tainted
            out, unfilled = self._fake_output(func, args, kwargs)
            tainted_out = False
        elif self.short_circuit:
            fresh = {}
            out = _stand_in(func, args, kwargs, flat_in, fresh, info)
            # a fresh stand-in holds a new value, not one computed from the operands
            tainted_out = 0 if fresh else tainted_in
            # a pointwise op of tainted operands is left uncomputed whatever its result (the
            # result is tainted either way): the laziness of its operands, not of masks
            if out is None and info.skippable and (self.lazy_masks or (tainted_in and info.pointwise)):
                for t in flat_in:  # a skipped op has an operand of LAZY_FILL_MIN_ELEMS or more
                    if t.numel() >= LAZY_FILL_MIN_ELEMS:
                        out = _skip_unread(func, info, args, kwargs, flat_in, tainted=bool(tainted_in))
                        # a skipped mask or masked write is the masks' laziness; a floating
                        # result of tainted operands only carries theirs (a read of it voids
                        # their laziness alone: the quantisers' masks stay skipped)
                        if out is not None and self.lazy_masks and (
                                not tainted_in or not info.pointwise or out.dtype == torch.bool):
                            tainted_out |= TAINT_MASK
                        break
            if out is None:
                try:
                    out = self._run_op(func, args, kwargs, tainted_in)
                except ValuesObserved:
                    raise
                except Exception:
                    # a CPU kernel that refuses a stand-in's layout (group_norm wants a
                    # contiguous input): the op's shapes hold, its values are a stand-in's
                    out = _stand_in_layout_fallback(func, info, args, kwargs, flat_in)
                    if out is None:
                        raise
                    tainted_out = 0
                    if info.returns_alias and args and isinstance(args[0], torch.Tensor):
                        # a view the stand-in cannot take (view_as_complex, as_strided, a
                        # view as another dtype): its fresh result still views the operand's
                        # elements, through the twin it gets below
                        name_in = self.input_of(args[0])
                        if name_in is not None and self.twin(args[0]) is not None:
                            for o in ([out] if isinstance(out, torch.Tensor) else flat_tensors(out)):
                                self.input_storages[_skey(o)] = name_in
                                self._keep_alive.append(o)
        else:
            out = self._run_op(func, args, kwargs, tainted_in)
            tainted_out = tainted_in
        flat_out = [out] if isinstance(out, torch.Tensor) else flat_tensors(out)
        if (info.returns_alias or info.inplace_view) and (self.twins or (
                self.short_circuit and args and _is_stand_in(args[0]))):
            copied = self.twin_views(func, args, kwargs, flat_out, info)
            if copied is not None:
                out, flat_out = copied, [copied]
        _update_taint(taint, tainted_out, flat_out, args, info, kwargs)
        for t in unfilled:
            _add_taint(taint, t, TAINT_FILL)
        try:
            self.propagate(name, args, flat_in, flat_out)
        except Exception as e:  # noqa: BLE001 - provenance is best effort; the dtype rank stands
            self.c.notes.append(f"{name}: precision provenance failed ({type(e).__name__}: {e})")
        if self.depth == 0:
            try:
                self._record(func, name, args, kwargs, out, flat_in, flat_out, info)
            except Exception as e:  # noqa: BLE001 - never lose the run over one formula
                self.c.notes.append(f"{name}: counting failed ({type(e).__name__}: {e})")
                self.c.unknown_ops[name] += 1
        return out

    def _run_op(self, func, args, kwargs, tainted_in: int):
        if not tainted_in:
            return func(*args, **kwargs)
        try:
            return func(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the op rejected values that a fill would give
            raise ValuesObserved(f"{_packet(func)} raised on unfilled values: {type(e).__name__}",
                                 tainted_in) from None

    def _check_values_unread(self, func, name, args, kwargs, flat_in, kinds: int = 0) -> None:
        """Raise :class:`ValuesObserved` (with the operands' taint bits ``kinds``) when ``func``
        reads tainted values into something other than a tensor of a value-independent shape."""
        tags = _op_info(func).tags
        if name in _VALUE_READS or torch.Tag.data_dependent_output in tags:
            raise ValuesObserved(f"{name} reads values derived from an unfilled output", kinds)
        taint = self.taint
        if torch.Tag.dynamic_output_shape in tags:
            # indexing a tainted source by clean indices has a fixed shape (a tainted index is
            # a read: a boolean one decides the shape, an integer one whether it is in range)
            if name in ("index", "_unsafe_index") and args and all(
                    not _taint_of(taint, t) for t in flat_tensors(args[1:], kwargs)):
                return
            raise ValuesObserved(f"{name}: an output shape depends on values derived from an unfilled output", kinds)
        # index_put's destination and values are written, not indices: only its index list
        idx_in = flat_tensors(args[1]) if name in ("index_put", "_index_put_impl") and len(args) > 1 \
            else flat_in
        if name in _INDEXING_OPS and any(_taint_of(taint, t) and not t.dtype.is_floating_point
                                         and t.dtype != torch.bool for t in idx_in):
            # whether an index is in range (the op raises, or not) is a read of its value
            raise ValuesObserved(f"{name}: an index derived from an unfilled output", kinds)
        if name in ("index_put", "_index_put_impl", "masked_fill"):
            # _constant_mask_write reads one element of a stand-in mask
            if any(_is_stand_in(t) and t.dtype == torch.bool and _taint_of(taint, t) for t in flat_in):
                raise ValuesObserved(f"{name}: a mask derived from an unfilled output", kinds)

    def _fake_output(self, func, args, kwargs):
        """Output of ``func`` computed on meta tensors, then materialised: floating outputs of
        16-bit or wider as random data (fill k from a generator seeded k), others as zeros.
        With ``lazy_fill``, a floating output of LAZY_FILL_MIN_ELEMS or more is left
        uninitialised instead. Returns (output, the outputs left unfilled: the caller taints them)."""
        # only the shapes and dtypes of the meta outputs are read below, and those of a
        # product, convolution or attention do not depend on where a view starts in its
        # storage (per-head slices of one cache differ only in their offsets)
        key = _sig_key(func, args, kwargs, offsets=False)
        self._sc_key = key
        meta_out = _META_OUT.get(key) if key is not None else None
        if meta_out is None:
            def to_meta(x):
                return x.to("meta") if isinstance(x, torch.Tensor) else x
            meta_out = func(*map_tree(to_meta, args), **map_tree(to_meta, kwargs))
            if key is not None:
                _memo_put(_META_OUT, key, meta_out)
        lazy = getattr(self, "lazy_fill", False)
        unfilled = []

        def mat(x):
            if not isinstance(x, torch.Tensor):
                return x
            if x.dtype.is_floating_point and x.element_size() >= 2:
                k = self.fills
                self.fills += 1
                if x.numel() * x.element_size() >= STAND_IN_BYTES:
                    # a large result of any op is a stand-in (module docstring); its value
                    # comes from fill k's generator, so no other fill or draw moves
                    gen = torch.Generator().manual_seed(k)
                    return stand_in_value(x.shape, x.dtype, torch.rand(1, generator=gen) + 0.5)
                if lazy and x.numel() >= LAZY_FILL_MIN_ELEMS:
                    # uninitialised: zeroing it cost more than the product it stands for
                    # (an unfilled value is never read: a read voids the run)
                    z = torch.empty(x.shape, dtype=x.dtype)
                    unfilled.append(z)
                    return z
                gen = torch.Generator().manual_seed(k)
                return torch.randn(x.shape, dtype=x.dtype, generator=gen).mul_(0.1)  # in place: same values
            return torch.zeros(x.shape, dtype=x.dtype)
        return map_tree(mat, meta_out), unfilled

    def _record(self, func, name, args, kwargs, out, flat_in, flat_out, info=None) -> None:
        if info is None:
            info = _op_info(func)
        c = self.c
        c.op_counts[name] += 1
        if info.view:
            if name in _ELEMENT_READS and self.input_storages:
                # a value read (.item(), a truth test) reads its elements of an input: what the
                # reference's control flow depends on, an implementation must read too
                self.note_reads(name, flat_in, out)
            return
        storages = self.input_storages
        if storages:
            # both act only on an op with an operand in an input's storage (track_alias's
            # destination and copy source are operands too): most ops of a loop over
            # intermediates have none
            for t in flat_in:
                if _skey(t) in storages and self.input_of(t) is not None:
                    skip = self.track_alias(func, name, args, kwargs, out, flat_out, info)
                    self.note_reads(name, flat_in, out, skip)
                    break
        moved = 0.0
        for t in flat_in:
            moved += float(t.numel()) * float(t.element_size())
        out_bytes = 0.0
        for t in flat_out:
            cls_ = DTYPE_CLASS.get(t.dtype)
            if cls_:
                c.dtypes_seen.add(cls_)
            out_bytes += float(t.numel()) * float(t.element_size())
        c.bytes_unfused += moved + out_bytes
        if info.mma:
            self._record_mma(func, name, args, kwargs, out, flat_in)
            return
        if info.move:
            return
        if info.elem is not None:
            cuda, sfu, basis = info.elem
            ref = flat_in[0] if basis == "in" and flat_in else (flat_out[0] if flat_out else None)
            if ref is None:
                return
            n = float(ref.numel())
            if name == "pow":
                expo = args[1] if len(args) > 1 else kwargs.get("exponent")
                if isinstance(expo, torch.Tensor) or (isinstance(expo, float) and not float(expo).is_integer()):
                    sfu, cuda = 2.0, 1.0  # x**y = exp2(y * log2(x))
                elif isinstance(expo, (int, float)):
                    e = int(abs(expo))  # square-and-multiply: floor(log2 e) + popcount(e) - 1
                    cuda = max(1.0, float(e.bit_length() - 1 + bin(e).count("1") - 1)) if e > 1 else 1.0
            if name == "embedding_bag" or name.startswith("_embedding_bag"):
                # weight[indices] summed per bag: one add per gathered element
                w, idx = args[0], args[1]
                n = float(idx.numel() * w.shape[-1])
                cuda = 1.0
            out_dtype = (flat_out[0].dtype if flat_out else ref.dtype)
            cls = _cuda_class(out_dtype, ref.dtype)
            if cuda:
                c.cuda_flops[cls] += cuda * n
                r = max((self.rank(t) for t in flat_in), default=5) if flat_in else 5
                c.cuda_by_precision[_prec_cuda_class(cls, r)] += cuda * n
            if sfu:
                c.sfu_ops += sfu * n
            return
        c.unknown_ops[name] += 1

    def _record_mma(self, func, name, args, kwargs, out, flat_in) -> None:
        c = self.c
        a = flat_in[0] if flat_in else None
        if name in ("addmm", "baddbmm", "addmv", "addr") and len(flat_in) >= 3:
            a = flat_in[1]
        cls = DTYPE_CLASS.get(a.dtype, "fp32") if a is not None else "fp32"
        if name == "_scaled_mm":
            m, kk = args[0].shape
            n = args[1].shape[1]
            if args[0].dtype == torch.float4_e2m1fn_x2:
                kk *= 2  # packed: two e2m1 values per stored element
            flops = 2 * m * n * kk
        elif name in ("_scaled_dot_product_flash_attention_for_cpu",):
            q, k, v = args[0], args[1], args[2]
            *bq, L, E = q.shape
            flops = 2 * math.prod(bq) * L * k.shape[-2] * (E + v.shape[-1])
        elif name in ("dot", "vdot"):
            flops = 2 * args[0].numel()
        elif name in ("mv", "addmv"):
            mat = flat_in[-2]
            flops = 2 * mat.numel()
        elif name in ("outer", "addr"):
            flops = 2 * flat_in[-2].numel() * flat_in[-1].numel()
        elif name == "_int_mm":
            flops = 2 * args[0].shape[0] * args[0].shape[1] * args[1].shape[1]
        else:
            key = self._sc_key
            flops = _MMA_FLOPS.get(key) if key is not None else None
            if flops is None:
                fn = flop_registry.get(func._overloadpacket)
                if fn is None:
                    c.unknown_ops[name] += 1
                    return
                raw = getattr(fn, "__wrapped__", None)  # the formula inside flop_counter.shape_wrapper
                if raw is not None:
                    flops = raw(*map_tree(_shape_of, args), out_shape=map_tree(_shape_of, out),
                                **map_tree(_shape_of, kwargs))
                else:
                    flops = fn(*args, **kwargs, out_val=out)
                if key is not None:
                    _memo_put(_MMA_FLOPS, key, flops)
        c.mma_flops_full[cls] += flops
        if "attention" in name:
            flops *= _causal_share(func, args, kwargs)
        c.mma_flops[cls] += flops
        ops_ = flat_in[1:3] if name in ("addmm", "baddbmm", "addmv", "addr") and len(flat_in) >= 3 \
            else flat_in[:2]
        if name == "_scaled_mm":
            ops_ = [args[0], args[1]]
        elif "attention" in name and len(flat_in) >= 3:
            rqk = max(self.rank(flat_in[0]), self.rank(flat_in[1]))
            c.mma_by_precision[mma_precision(rqk, max(rqk, self.rank(flat_in[2])))] += flops
            ops_ = None
        if ops_ is not None:
            ranks = [self.rank(t) for t in ops_] or [5]
            if len(ranks) == 1:
                ranks.append(ranks[0])
            c.mma_by_precision[mma_precision(ranks[0], ranks[1])] += flops
        if name in ("addmm", "baddbmm", "addmv", "addr"):
            o = tree_flatten(out)[0][0]
            c.cuda_flops[_cuda_class(o.dtype, o.dtype)] += o.numel()  # the bias add
            c.cuda_by_precision[_prec_cuda_class(_cuda_class(o.dtype, o.dtype), self.rank(o))] += o.numel()


def _taint_of(taint: dict, t) -> int:
    """The taint bits of tensor ``t`` (0: untainted). An entry whose storage has been freed is
    dead: its key (the storage's address) may now be a new storage's, holding new values."""
    hit = taint.get(_skey(t))
    if hit is None or hit[1]() is None:
        return 0
    return hit[0]


def _always():
    return True


def _add_taint(taint: dict, t, kinds: int) -> None:
    """Mark ``t``'s storage with ``kinds`` (kept with a weak reference to the storage, so that
    the entry dies with it: see :func:`_taint_of`)."""
    try:
        st = t.untyped_storage()
        k = st._cdata
        ref = weakref.ref(st)
    except Exception:  # noqa: BLE001 - no storage or no weak reference: an entry that never dies
        k, ref = _skey(t), _always
    hit = taint.get(k)
    old = hit[0] if hit is not None and hit[1]() is not None else 0
    taint[k] = (old | kinds, ref)


def _update_taint(taint: dict, kinds: int, flat_out, args, info, kwargs=None) -> None:
    """After an op: its outputs and the arguments it wrote carry ``kinds`` (the taint bits of
    its operands, and :data:`TAINT_MASK` when it was skipped); with ``kinds`` 0, its outputs
    hold what the full run holds, so a tainted key they carry is that of a freed storage whose
    address was reused, and is cleared."""
    if kinds:
        for t in flat_out:
            _add_taint(taint, t, kinds)
        for i, name in zip(info.written or (), info.written_names or ()):
            # a written argument may be a list of tensors (``_foreach_add_``) or passed by
            # keyword (``out=[a, b]`` of an op that returns nothing)
            a = args[i] if i < len(args) else (kwargs or {}).get(name)
            for t in ([a] if isinstance(a, torch.Tensor) else flat_tensors(a) if a is not None else ()):
                if not _torch_owned(t):
                    # memory torch did not allocate (torch.from_numpy, DLPack): its other
                    # owners read what is written there without a torch call
                    raise ValuesObserved(f"{info.name} writes values derived from an unfilled output "
                                         "into memory shared outside torch", kinds)
                _add_taint(taint, t, kinds)
    elif taint:
        for t in flat_out:
            taint.pop(_skey(t), None)


class _ShortCircuitMode(TorchDispatchMode):
    """The real run's generation of custom inputs: matmul-class ops get random outputs and
    large floating results are stand-ins, exactly as under a non-lazy :class:`_CountingMode`
    (same functions, same random draws), with nothing counted. With ``lazy_masks``, large
    masks and masked writes are skipped and tainted as under a counting mode with
    ``lazy_masks`` (:func:`_skip_unread`); ``taint`` then goes on to the counting run, and a
    read of a tainted value here raises :class:`ValuesObserved` as it would there (enter
    :meth:`guard` too: it catches the reads that dispatch no aten op)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as _CountingMode: nothing is compiled here

    def __init__(self, lazy_masks: bool = False):
        super().__init__()
        self.fills = 0
        self.lazy_fill = False
        self.lazy_masks = lazy_masks
        self.taint: dict = {}

    def guard(self) -> "_ValueReadGuard":
        return _ValueReadGuard(self)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        info = _op_info(func)
        if info.short:
            return _CountingMode._fake_output(self, func, args, kwargs)[0]
        taint = self.taint
        if not self.lazy_masks and not taint:
            out = _stand_in(func, args, kwargs)
            return func(*args, **kwargs) if out is None else out
        flat_in = flat_tensors(args, kwargs)
        kinds = _taint_kinds(taint, flat_in) if taint else 0
        if kinds:
            _CountingMode._check_values_unread(self, func, info.name, args, kwargs, flat_in, kinds)
        fresh = {}
        out = _stand_in(func, args, kwargs, flat_in, fresh, info)
        if fresh:
            kinds = 0
        if out is None and self.lazy_masks and info.skippable:
            out = _skip_unread(func, info, args, kwargs, flat_in)
            if out is not None:
                kinds |= TAINT_MASK
        if out is None:
            out = _CountingMode._run_op(self, func, args, kwargs, kinds)
        _update_taint(taint, kinds, [out] if isinstance(out, torch.Tensor) else flat_tensors(out), args, info, kwargs)
        return out


class _ValueReadGuard(TorchFunctionMode):
    """Raises :class:`ValuesObserved` when a Tensor method that reads values without
    dispatching an aten op (``.tolist()``, ``.numpy()``, ...) meets a tainted tensor of
    ``owner.taint``."""

    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.owner.taint:
            _check_function_read(self.owner.taint, func, args, kwargs)
        return func(*args, **kwargs)


class _FakeDeepcopy(TorchFunctionMode):
    """``copy.deepcopy`` of a FakeTensor returns a clone in the same FakeTensorMode; a
    shallow copy or pickle of one raises.

    ``Tensor.__deepcopy__`` also deep-copies the tensor's ``__dict__``, and a FakeTensor's
    holds its ``FakeTensorMode`` (with its caches and converters of real tensors): after a
    masked write (``r[mask] = 1``) that copy corrupts the C heap (glibc "corrupted
    double-linked list" or SIGSEGV in a later real-tensor run or at exit; about half of the
    processes with torch 2.13 CPU). A deep copy of a tensor is its values in new memory, which
    is what ``clone`` gives, and the fake run reads no values.

    ``Tensor.__reduce_ex__`` of a FakeTensor (``copy.copy``, ``pickle``) reads its storage's
    bytes, which a fake storage does not have: after a masked write ``copy.copy`` ended the
    process with SIGSEGV (8 of 8). It raises instead, so the fake run fails and the count is
    made on real tensors."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.__reduce_ex__ and args and _is_fake(args[0]):
            raise RuntimeError("copy.copy or pickling of a FakeTensor (its storage holds no "
                               "values): not in a fake run")
        if func is torch.Tensor.__deepcopy__ and args and _is_fake(args[0]):
            t = args[0]
            memo = args[1] if len(args) > 1 else kwargs.get("memo")
            if memo is not None and id(t) in memo:
                return memo[id(t)]
            with torch.no_grad():
                new = t.clone()
            if t.requires_grad:
                new.requires_grad_()
            if memo is not None:
                memo[id(t)] = new
            return new
        return func(*args, **kwargs)


def _is_fake(t) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def _skip_unread(func, info: _OpInfo, args, kwargs, flat, tainted: bool = False):
    """In a lazy run (``lazy_masks``), the result of an op left uncomputed, to be tainted
    (:data:`TAINT_MASK`); None when the op must run. Two kinds of op, each at
    LAZY_FILL_MIN_ELEMS elements or more, on CPU tensors:

    * an out-of-place pointwise op (no random draws) with a boolean result (a mask:
      ``x >= 0.25``, ``m1 & m2``) and contiguous floating-point or boolean operands: its
      result is zeros of the meta kernel's shape, strides and dtype (contiguous). Such an op
      raises only on shapes and dtypes: the meta kernel checks the shapes alike, and only
      dtypes whose CPU kernels exist for every such op are skipped (:data:`_SKIP_DTYPES`; integer
      operands, whose division by zero raises on values, never are); the result has the meta
      kernel's strides;
    * ``index_put_(dst, [mask], value)`` with a boolean mask of ``dst``'s shape, a one-element
      value of ``dst``'s dtype, no accumulation, a contiguous ``dst`` sharing no storage with
      the mask or the value: nothing is written (``dst`` is returned). Such a write raises on
      no value (every mask element indexes ``dst``).

    Exact because nothing reads a tainted value undetected (:class:`ValuesObserved` voids the
    run, which is repeated computing them): counts depend on values only through such reads.
    The nvfp4 quantisers' sixteen masked assignments (two comparisons, an ``&`` and a write,
    each over the whole tensor) are the work this skips; their packed codes only feed a
    short-circuited ``_scaled_mm``.

    ``tainted``: an operand is already tainted (its values derive from an unfilled output or a
    skipped mask), so the result would be tainted whatever it is: a pointwise op of any result
    dtype is left uncomputed (a floating result is left uninitialised, not zeroed; the caller
    keeps the operands' taint bits). An SwiGLU over an unfilled expert projection, or the
    scaling and clamping of an unfilled product, no longer runs on the CPU."""
    if info.pointwise:
        big = False
        for x in flat:
            if x.dtype not in _SKIP_DTYPES or x.device.type != "cpu" or not x.is_contiguous():
                return None
            if x.numel() >= LAZY_FILL_MIN_ELEMS:
                big = True
        if not big:
            return None
        key = _sig_key(func, args, kwargs)
        meta = _SKIP_META.get(key, None) if key is not None else None
        if meta is None:
            def to_meta(x):
                return x.to("meta") if isinstance(x, torch.Tensor) else x
            try:
                meta = func(*map_tree(to_meta, args), **map_tree(to_meta, kwargs))
            except Exception:  # noqa: BLE001 - let the real op run (and raise)
                return None
            if key is not None:
                _memo_put(_SKIP_META, key, meta)
        if not isinstance(meta, torch.Tensor) or not (meta.dtype == torch.bool or tainted) \
                or meta.dtype not in _SKIP_DTYPES or not meta.is_contiguous() \
                or meta.numel() < LAZY_FILL_MIN_ELEMS:
            return None
        # strides: the CPU kernel lays a result out as its full-shape operands are laid out,
        # which differs from torch.zeros's (and from the meta kernel's) on a size-1 dimension;
        # skipped only when such operands exist and agree
        strides = {tuple(x.stride()) for x in flat if x.shape == meta.shape}
        if len(strides) != 1:
            return None
        out = torch.empty_strided(meta.shape, strides.pop(), dtype=meta.dtype)
        # a mask's bytes must be valid booleans for the ops that still run on it; a floating
        # result's bytes are never read (any read of a tainted value voids the run)
        return out.zero_() if meta.dtype == torch.bool else out
    # index_put_ / _index_put_impl_
    if len(args) < 3 or kwargs:
        return None
    dst, idx, val = args[0], args[1], args[2]
    acc = args[3] if len(args) > 3 else False
    if acc or not isinstance(dst, torch.Tensor) or not isinstance(val, torch.Tensor) \
            or not isinstance(idx, (list, tuple)) or len(idx) != 1:
        return None
    m = idx[0]
    if not isinstance(m, torch.Tensor) or m.dtype != torch.bool or tuple(m.shape) != tuple(dst.shape) \
            or val.numel() != 1 or val.dtype != dst.dtype or dst.dtype not in _SKIP_DST_DTYPES \
            or dst.numel() < LAZY_FILL_MIN_ELEMS \
            or not dst.is_contiguous() or dst.device.type != "cpu" or m.device.type != "cpu" \
            or val.device.type != "cpu":
        return None
    kd = _skey(dst)
    if _skey(m) == kd or _skey(val) == kd:
        return None
    if not _torch_owned(dst):
        # memory torch did not allocate (torch.from_numpy, DLPack): other objects may read it
        # without a torch call
        return None
    return dst


def _dense_twin(t: torch.Tensor) -> torch.Tensor:
    """A contiguous meta tensor of ``t``'s shape and dtype: the twin of a stand-in that stands
    for a freshly allocated tensor (an input, a result)."""
    return torch.empty(t.shape, dtype=t.dtype, device="meta")


def _stand_in_layout_fallback(func, info: _OpInfo, args, kwargs, flat):
    """The results of an out-of-place op whose CPU kernel raised on operands that include a
    stand-in (strides all 0, which kernels that want a dense layout refuse), when the meta
    kernel accepts the same shapes and dtypes: floating results as stand-ins of the meta
    shapes, others as zeros; None otherwise (the op's error stands). Values of large floating
    tensors do not steer the references (:func:`stand_in`), so no count depends on these."""
    if info.written != [] or not any(_is_stand_in(x) for x in flat):
        return None
    # (a view op too: its results are fresh stand-ins, which the caller ties to the operand)

    def to_meta(x):
        return x.to("meta") if isinstance(x, torch.Tensor) else x
    try:
        meta = func(*map_tree(to_meta, args), **map_tree(to_meta, kwargs))
    except Exception:  # noqa: BLE001 - the shapes are wrong too: the error is the reference's
        return None

    def make(x):
        if not isinstance(x, torch.Tensor):
            return x
        if x.dtype.is_floating_point and x.dtype.itemsize >= 1 and x.dtype != torch.float4_e2m1fn_x2 \
                and x.numel() > 1:
            return stand_in(x.shape, x.dtype)
        return torch.zeros(x.shape, dtype=x.dtype)
    try:
        return map_tree(make, meta)
    except Exception:  # noqa: BLE001 - a dtype without a cast: the error stands
        return None


def _torch_owned(t) -> bool:
    """Is ``t``'s memory torch's own? Storages over foreign memory (``torch.from_numpy``,
    DLPack) cannot be resized; those torch allocated can."""
    try:
        return bool(t.untyped_storage().resizable())
    except Exception:  # noqa: BLE001 - no plain storage (sparse, nested): not known to be torch's
        return False


#: operand and destination dtypes :func:`_skip_unread` may skip an op on: the CPU kernels take
#: them for every comparison, logical op and masked fill (the meta kernels do not check that:
#: a float8 comparison passes on meta and raises NotImplementedError on the CPU)
_SKIP_DTYPES = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool})
#: destination dtypes of a skipped masked write: those and the integer types with CPU
#: masked-fill kernels (not float8, nor uint16/uint32/uint64, which have none)
_SKIP_DST_DTYPES = _SKIP_DTYPES | {torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64}

#: signature (:func:`_sig_key`) -> the meta output of a pointwise op :func:`_skip_unread` met
_SKIP_META: dict = {}


#: lazy fills leave short-circuit outputs of at least this many elements unfilled; smaller
#: ones cost less to fill (about 5 ns an element) than tainting costs every later op
LAZY_FILL_MIN_ELEMS = 1 << 16

#: real-tensor runs: a floating-point result at least this large is replaced by a stand-in
STAND_IN_BYTES = 64 << 20


def _is_stand_in(t) -> bool:
    """A stand-in: one value broadcast to the whole shape (all strides 0, but those of size-1
    dims, which expand keeps: a [n, 1] stand-in has strides (0, 1))."""
    return isinstance(t, torch.Tensor) and t.numel() > 1 and not any(
        st for sz, st in zip(t.shape, t.stride()) if sz != 1)


def stand_in(shape, dtype: torch.dtype) -> torch.Tensor:
    """A large floating tensor that costs one element of memory: a single value in (0.5, 1.5)
    broadcast to ``shape``. Shapes and dtypes are all counting needs; values of large float
    tensors do not steer the references' control flow (index and mask tensors do)."""
    return (torch.rand(1) + 0.5).to(dtype).expand(shape)


def _written_args(func):
    """Positions of the arguments ``func`` writes (None: no schema)."""
    return _op_info(func).written


def _stand_in(func, args, kwargs, flat=None, fresh=None, info=None):
    """In a real-tensor run, skip work whose result only matters by its shape: an in-place
    write into a stand-in, and any op whose floating-point outputs are all large (each is
    returned as a stand-in). Returns None when the op must really run. ``flat``: the tensors
    of ``args`` and ``kwargs`` (:func:`flat_tensors`) when the caller has them. ``fresh``: a dict
    that gets ``{"fresh": True}`` when the result is a new stand-in (a value not computed
    from the operands). ``info``: ``func``'s :class:`_OpInfo` when the caller has it."""
    info = info or _op_info(func)
    written = info.written
    if written is None or info.returns_alias or info.inplace_view:
        # an in-place view op changes the stand-in's shape and strides (it costs nothing): it
        # runs, or the stand-in would keep its old shape
        # a view aliases its operand: a stand-in in its place would hide every later read of
        # the operand through it (a GQA expand of an input, read by the copy that follows)
        return None
    if flat is None:
        flat = flat_tensors(args, kwargs)
    any_stand_in = False
    nbytes = 0
    for x in flat:  # _is_stand_in inlined: this runs on every op of a real run
        n = x.numel()
        if n > 1 and (not any(x.stride()) or (1 in x.shape and _is_stand_in(x))):
            any_stand_in = True
            break
        nbytes += n * x.element_size()
    if not any_stand_in:
        # every rule below but the last needs a stand-in operand; the last (a large result)
        # only applies to a non-writing op with 1 MiB of inputs or more, or none at all
        if written or (flat and nbytes < (1 << 20)):
            return None
        return _large_result(func, args, kwargs, fresh)
    schema = func._schema
    masked = _constant_mask_write(func, args, kwargs, bool(written))
    if masked is not None:
        return masked
    if written:
        i = written[0]
        arg = args[i] if i < len(args) else kwargs.get(schema.arguments[i].name)
        return arg if _is_stand_in(arg) else None
    const = _constant_pointwise(func, args, kwargs)
    if const is not None:
        return const
    const = _constant_extremum(func, args, kwargs)
    if const is not None:
        return const
    return _large_result(func, args, kwargs, fresh)


#: reductions whose result over a constant tensor is that constant, exactly (no rounding:
#: the extremum of equal values is the value)
_EXTREMA = {"max", "min", "amax", "amin"}


def _constant_extremum(func, args, kwargs):
    """``max``/``min`` of a whole stand-in, or ``amax``/``amin`` of one over any dims, is its one
    value: computed on a single element and written into a real tensor of the shape, strides
    and dtype the meta kernel gives (what the CPU kernel returns, holding the same value in
    every element), so nothing downstream sees a difference but the time not spent reading a
    broadcast tensor of up to billions of elements. None when that does not apply."""
    if _packet(func) not in _EXTREMA or func._schema.name in ("aten::max", "aten::min") \
            and func._overloadname != "default":
        return None  # max.dim / min.dim also return indices: not handled
    if not args or not _is_stand_in(args[0]) or len(flat_tensors(args, kwargs)) != 1:
        return None
    try:
        x = args[0]
        meta_out = func(x.to("meta"), *args[1:], **kwargs)
        if not isinstance(meta_out, torch.Tensor):
            return None
        one = x.reshape(-1)[:1]
        value = (one.amax() if _packet(func) in ("max", "amax") else one.amin()).to(meta_out.dtype)
        out = torch.empty_strided(meta_out.shape, meta_out.stride(), dtype=meta_out.dtype)
        return out.fill_(value)
    except Exception:  # noqa: BLE001 - run it for real
        return None


#: signatures (:func:`_sig_key`) of calls whose results are not all large floating tensors:
#: the meta run that decides it is a function of the signature alone (meta-device ops draw
#: from no generator), so a loop repeating a call at the same shapes decides it once
_NOT_LARGE: set = set()

#: signature memo (:func:`_sig_key` -> value): what a short-circuited tensor-core op's meta
#: kernel returns (meta tensors: only their shapes and dtypes are read by ``_fake_output``)
_META_OUT: dict = {}
#: signature memo (:func:`_sig_key`, no offsets) -> the FLOPs ``flop_counter``'s formula gives
#: a short-circuited call: a function of the shapes and the other arguments (stride, padding,
#: ...) alone, all of which the signature holds
_MMA_FLOPS: dict = {}


def _frz(x, offsets: bool):
    if isinstance(x, torch.Tensor):
        if offsets:
            return ("T", tuple(x.shape), x.stride(), x.storage_offset(), x.dtype)
        return ("T", tuple(x.shape), x.stride(), x.dtype)
    tp = type(x)
    if tp is list or tp is tuple:
        return (tp.__name__, tuple([_frz(y, offsets) for y in x]))
    if isinstance(x, (list, tuple)):  # torch.Size, namedtuples: a value of their own type
        return (tp, tuple([_frz(y, offsets) for y in x]))
    if tp is dict:
        return ("D", tuple(sorted((k, _frz(v, offsets)) for k, v in x.items())))
    return (tp, x)


def _sig_key(func, args, kwargs, offsets: bool = True):
    """A hashable signature of a call: ``func``, each tensor's shape, strides, storage offset
    (unless ``offsets`` is False) and dtype, and every other argument with its type (``1``,
    ``1.0`` and ``True`` are equal and hash alike in Python, but promote differently).
    Everything an op's meta kernel reads; nothing about the tensors' identities or values.
    None when an argument is unhashable or a tensor has no strides."""
    try:
        key = (func, _frz(args, offsets), _frz(kwargs, offsets) if kwargs else ("D", ()))
        hash(key)
        return key
    except (TypeError, RuntimeError):  # unhashable, or a tensor without strides
        return None


def _memo_put(memo: dict, key, value) -> None:
    if len(memo) >= 1 << 16:  # bounded: a run over ever-new shapes must not grow without end
        memo.clear()
    memo[key] = value


def _large_result(func, args, kwargs, fresh=None):
    """Stand-ins for the results of ``func`` when every result is a floating-point tensor of
    at least STAND_IN_BYTES (shapes from the meta device); None otherwise (run it)."""
    key = _sig_key(func, args, kwargs)
    if key is not None and key in _NOT_LARGE:
        return None
    out = _large_result_meta(func, args, kwargs, fresh)
    if out is None and key is not None:
        if len(_NOT_LARGE) >= 1 << 16:
            _NOT_LARGE.clear()
        _NOT_LARGE.add(key)
    return out


def _large_result_meta(func, args, kwargs, fresh=None):
    to_meta = lambda x: x.to("meta") if isinstance(x, torch.Tensor) else x  # noqa: E731
    mkwargs = tree_map(to_meta, kwargs)
    if "device" in mkwargs:  # factory ops (randn, empty, zeros): shape on the meta device
        mkwargs["device"] = torch.device("meta")
    try:
        meta_out = func(*tree_map(to_meta, args), **mkwargs)
    except Exception:  # noqa: BLE001 - no meta kernel or data-dependent shape: run it
        return None
    outs = [x for x in tree_flatten(meta_out)[0] if isinstance(x, torch.Tensor)]
    if not outs or any(not x.dtype.is_floating_point or x.element_size() < 1 or x.dtype.itemsize < 1
                       or x.numel() * x.element_size() < STAND_IN_BYTES for x in outs):
        return None
    try:
        out = tree_map(lambda x: stand_in(x.shape, x.dtype) if isinstance(x, torch.Tensor) else x, meta_out)
    except Exception:  # noqa: BLE001 - a dtype without a cast (packed fp4): run it
        return None
    if fresh is not None:
        fresh["fresh"] = True
    return out


def _prec_cuda_class(cls: str, rank: int) -> str:
    """CUDA-core class of elementwise work whose operands carry ``rank`` precision: 16-bit or
    narrower values may be computed in packed 16-bit arithmetic (HFMA2) even when the
    reference upcasts; never wider than the result's own class ``cls``."""
    order = {"fp16": 0, "fp32": 1, "fp64": 2}
    by_rank = "fp16" if rank <= 4 else ("fp32" if rank == 5 else "fp64")
    return min(cls, by_rank, key=order.get)


def _unique_elems(t: torch.Tensor) -> int:
    """Distinct storage elements a tensor (view) covers: broadcast (stride-0) dims count once."""
    try:
        st = t.stride()
    except Exception:  # noqa: BLE001
        return t.numel()
    return math.prod(sz for sz, s in zip(t.shape, st) if s != 0) if t.dim() else 1


def _accumulates(name: str, args, kwargs) -> bool:
    """An index_put/scatter that accumulates reads the destination too."""
    if name in ("index_put", "_index_put_impl"):
        acc = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        return bool(acc)
    if name == "scatter":
        return kwargs.get("reduce") is not None or len(args) > 4
    return False


def _region(name: str, args, kwargs, dst: torch.Tensor) -> float:
    """Elements of ``dst`` a write op replaces (its whole view for copy/fill/arithmetic)."""
    try:
        if name in ("index_put", "_index_put_impl"):
            idx = list(args[1]) if len(args) > 1 else list(kwargs.get("indices", []))
            given = [i for i in idx if i is not None]
            if not given or any(i.dtype == torch.bool for i in given):
                return float(_unique_elems(dst))
            lead = math.prod(torch.broadcast_shapes(*[i.shape for i in given]))
            rest = math.prod(sz for d, sz in enumerate(dst.shape) if d >= len(idx) or idx[d] is None)
            return float(min(dst.numel(), lead * rest))
        if name == "index_copy":
            return float(args[3].numel())
        if name == "index_fill":
            d = args[1] % max(dst.dim(), 1)
            return float(args[2].numel() * dst.numel() // max(dst.shape[d], 1)) if dst.dim() else 1.0
        if name == "scatter":
            return float(args[2].numel())
        if name in ("slice_scatter", "select_scatter", "diagonal_scatter", "as_strided_scatter"):
            return float(args[1].numel())
    except Exception:  # noqa: BLE001 - odd signature: the whole destination
        pass
    return float(_unique_elems(dst))


def _constant_pointwise(func, args, kwargs):
    """A pointwise op whose tensor inputs are all stand-ins (constant tensors) or single
    elements has a constant result: computed exactly on one element and broadcast (a
    stand-in of any dtype, bool included). None when that does not apply."""
    if not _op_info(func).pointwise:
        return None
    flat = flat_tensors(args, kwargs)
    if not flat or not any(_is_stand_in(x) for x in flat) or \
            not all(_is_stand_in(x) or x.numel() == 1 for x in flat):
        return None
    try:
        shape = torch.broadcast_shapes(*[x.shape for x in flat])

        def one(x):
            # one element, the number of dims kept: type promotion tells a 0-dim tensor from a
            # dimensioned one (bf16[n] * fp32[] is bf16, bf16[] * fp32[] is fp32)
            return x.reshape(-1)[:1].reshape((1,) * x.dim()) if isinstance(x, torch.Tensor) and x.dim() else x
        small = func(*[one(a) if isinstance(a, torch.Tensor) else a for a in args],
                     **{k: one(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()})
        if not isinstance(small, torch.Tensor) or small.numel() != 1:
            return None
        return small.reshape(()).expand(shape) if len(shape) else small
    except Exception:  # noqa: BLE001 - run it for real
        return None


def _constant_mask_write(func, args, kwargs, inplace: bool):
    """``t[mask] = v`` / ``masked_fill`` with a stand-in (constant) mask of ``t``'s shape: all
    or nothing, so a fill or a no-op (exact). None when that does not apply."""
    name = _packet(func)
    try:
        if name in ("index_put", "_index_put_impl"):
            dst, idx, val = args[0], list(args[1]), args[2]
            if len(idx) != 1 or idx[0] is None or idx[0].dtype != torch.bool or not _is_stand_in(idx[0]) \
                    or tuple(idx[0].shape) != tuple(dst.shape) or val.numel() != 1 or _accumulates(name, args, kwargs):
                return None
            mask, value = idx[0], val.reshape(())
        elif name == "masked_fill":
            dst, mask, value = args[0], args[1], args[2]
            if not isinstance(mask, torch.Tensor) or not _is_stand_in(mask) or mask.dtype != torch.bool \
                    or tuple(mask.shape) != tuple(dst.shape):
                return None
        else:
            return None
        on = bool(mask.reshape(-1)[0])
        if inplace and _is_stand_in(dst):
            return dst  # writes into a stand-in are skipped (see _stand_in)
        if not inplace and _is_stand_in(dst) and not on:
            # an out-of-place result is a new tensor (returning dst would make it alias an input)
            return stand_in_value(dst.shape, dst.dtype, dst.reshape(-1)[0].clone())
        out = dst if inplace else dst.clone()
        if on:
            if _is_stand_in(out):
                return stand_in_value(out.shape, out.dtype, value)
            out.fill_(value)
        return out
    except Exception:  # noqa: BLE001
        return None


def stand_in_value(shape, dtype, value) -> torch.Tensor:
    """A stand-in holding ``value`` (a number or a one-element tensor)."""
    return torch.as_tensor(value).to(dtype).reshape(()).expand(shape)


def _cuda_class(out_dtype: torch.dtype, in_dtype: torch.dtype) -> str:
    dt = out_dtype if out_dtype.is_floating_point else in_dtype
    if dt == torch.float64:
        return "fp64"
    if dt in (torch.float16, torch.bfloat16):
        return "fp16"
    return "fp32"


# ---------------------------------------------------------------------------------------
# building inputs

class _Placeholder(NamedTuple):
    """A shape-only input of a meta or FakeTensor run, made into ``torch.empty`` inside the
    run's mode (:func:`_materialize`), so that it lands on the meta device or is a FakeTensor."""

    shape: tuple
    dtype: torch.dtype


def _wants_stand_in(shape, dtype: torch.dtype) -> bool:
    """A floating input of at least :data:`STAND_IN_BYTES` (packed fp4 excluded: its bytes are
    codes the quantised references unpack), which a real run replaces by a stand-in."""
    return bool(shape) and dtype.is_floating_point and dtype != torch.float4_e2m1fn_x2 \
        and math.prod(shape) * dtype.itemsize >= STAND_IN_BYTES


def _declared_inputs(problem, workload, *, real: bool, counts: Counts) -> dict[str, Any]:
    """The inputs of a non-custom ``workload`` to count on: the inputs layer's
    (:func:`solbench.inputs.make_inputs`, seed 0, on the CPU), through a thin adapter for what
    counting needs of its own:

    - shape-only runs (``real`` False): every tensor the inputs layer would draw, and every
      blob, is a :class:`_Placeholder` of its shape and dtype (no value is drawn); scalars are
      the inputs layer's (the workload's, or drawn by dtype);
    - real runs: a floating tensor of :data:`STAND_IN_BYTES` or more is a :func:`stand_in`
      (values of large float tensors do not steer the references; index and mask tensors,
      drawn by their rules, do);
    - both: a safetensors input whose blob is absent (the dev dataset ships none) is drawn as
      a random input of its declared shape and dtype (``missing_blobs="draw"``) and listed in
      ``counts.synthesized``; in real runs, integer inputs the workload gives no values for
      (absent blobs, and random ones under upstream's ``int_uniform`` rule, which is no valid
      index: negative, and past the end of what it indexes) take
      :func:`solbench.inputs.synthesize_indices`'s values: offsets and indices by name (listed
      in ``counts.synthesized``), zeros otherwise. A declared role (``index:<axis>``) is valid
      and kept.

    Raises:
        SpecError: an input the inputs layer refuses (an unknown role, a blob without its key).
    """
    from ..inputs import make_inputs, plan_inputs, synthesize_indices

    plan = plan_inputs(problem, workload)

    def substitute(p):
        if not real:
            return _Placeholder(tuple(p.shape), p.dtype)
        if _wants_stand_in(p.shape, p.dtype):
            return stand_in(p.shape, p.dtype)
        return None

    vals = make_inputs(problem, workload, 0, "cpu", substitute=substitute, missing_blobs="draw")
    counts.synthesized.extend(n for n, p in plan.items() if p.missing_blob)
    if not real:
        return {k: _Placeholder(tuple(v.shape), v.dtype) if isinstance(v, torch.Tensor) else v
                for k, v in vals.items()}
    unsourced = [n for n, p in plan.items()
                 if p.missing_blob or (p.source == "random" and p.rule is not None and p.rule.rule == "int_uniform")]
    for k in synthesize_indices(vals, unsourced):
        if k not in counts.synthesized:
            counts.synthesized.append(k)
    return vals


def _materialize(vals: dict[str, Any]) -> dict[str, Any]:
    """``vals`` with each :class:`_Placeholder` an empty tensor made under the current mode."""
    return {k: torch.empty(v.shape, dtype=v.dtype) if isinstance(v, _Placeholder) else v for k, v in vals.items()}


def _custom_inputs(problem, workload, device: str) -> dict[str, Any]:
    """The inputs of a custom-input workload: the inputs layer's (the problem's entrypoint,
    seeded 0, or ``init_seed`` for KernelBench as the harness's build of the model is) on
    ``device`` ("cpu", or "meta" for a shape-only run)."""
    from ..inputs import make_inputs

    seed = problem.init_seed if problem.kind == "kernelbench" else 0
    return make_inputs(problem, workload, seed, device)


# ---------------------------------------------------------------------------------------

def _run_once(problem, workload, *, real: bool, meta: bool = False, lazy_fill: bool = False,
              lazy_masks: bool = False) -> Counts:
    from torch._subclasses.fake_tensor import FakeTensorMode

    counts = Counts(mode="real" if real else ("meta" if meta else "fake"), real_tensors=real)
    if real:
        # stand-ins' values and the reference's own draws are reproducible (the inputs layer
        # seeds its own generator)
        torch.manual_seed(0)
    counts.source_quant = source_quant_formats(problem.definition.reference)
    gen_device = "cpu"
    if real:
        fake_mode = None
    elif meta:
        # meta tensors: shapes and dtypes only, dispatched to the C++ meta kernels (several
        # times cheaper per op than FakeTensorMode); tensors the reference makes land on meta
        fake_mode = torch.device("meta")
        gen_device = "meta"
    else:
        fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    mode = _CountingMode(counts, short_circuit=real, lazy_fill=real and lazy_fill,
                         lazy_masks=real and lazy_masks)
    # declared inputs come from the inputs layer outside any mode (a scalar drawn by dtype is a
    # Python value, which a FakeTensor cannot give); placeholders become tensors in the mode
    declared_vals = None if workload.is_custom else _declared_inputs(problem, workload, real=real, counts=counts)
    ValuesObserved.made.clear()
    ctx_stack = []
    try:
        if fake_mode is not None:
            fake_mode.__enter__()
            ctx_stack.append(fake_mode)
            if not meta:
                deepcopy_guard = _FakeDeepcopy()
                deepcopy_guard.__enter__()
                ctx_stack.append(deepcopy_guard)
        with torch.no_grad():
            if workload.is_custom:
                # generating inputs is not part of the workload: the short-circuit mode
                # only keeps big GEMMs in the generator from running on the CPU
                if real:
                    gen = _ShortCircuitMode(lazy_masks=lazy_masks)
                    with gen.guard(), gen:
                        vals = _custom_inputs(problem, workload, "cpu")
                    # storages the generation left uncomputed stay tainted in the count
                    mode.taint.update(gen.taint)
                else:
                    vals = _custom_inputs(problem, workload, gen_device)
            else:
                vals = _materialize(declared_vals)
            params: list[tuple[str, torch.Tensor]] = []
            if problem.kind == "kernelbench":
                mod = problem.reference_module()
                torch.manual_seed(problem.init_seed)
                model = mod.Model(*problem.init_args)
                model.eval()
                params = list(model.named_parameters()) + list(model.named_buffers())
                ref = model
            else:
                ref = problem.make_reference("cpu")
            call_args = [vals[k] for k in problem.definition.inputs]
            seen: set = set()
            declared = []
            for name, v in list(zip(problem.definition.inputs, call_args)) + params:
                if isinstance(v, torch.Tensor):
                    key = _skey(v)
                    if key in seen:
                        continue
                    seen.add(key)
                    mode.input_storages[key] = name
                    mode.input_meta[name] = (v.numel(), v.dtype)
                    if _is_stand_in(v):
                        mode.stand_in_inputs.add(name)
                        mode.set_twin(v, _dense_twin(v))
                    mode.set_rank(v, dtype_rank(v.dtype))
                    declared.append((name, v))
            graph_mode = _CountingFunctionMode(mode)
            for _, v in declared:
                graph_mode.add_input(v)
            with graph_mode, mode:
                result = ref(*call_args)
            counts.solar_graph = graph_mode.graph
            for name, v in declared:
                full = float(v.numel()) * _elem_bytes(v)
                if name in mode.full_read:
                    read = full
                elif name in mode.gathered or name in mode.view_reads:
                    read = min(full, mode.gathered.get(name, 0.0) + sum(mode.view_reads[name].values()))
                else:
                    read = 0.0
                    counts.notes.append(f"input {name} is never read by the reference")
                counts.inputs.append((name, v.numel(), _elem_bytes(v), DTYPE_CLASS.get(v.dtype, "int"), read))
        outs = [x for x in tree_flatten(result)[0] if isinstance(x, torch.Tensor)]
        seen_out: set = set()
        for o in outs:
            # views of one stand-in share its storage, offset 0 and strides 0 (the three
            # chunks of a product): only the same view is the same output
            if _is_stand_in(o):
                # views of one stand-in share its storage and its zero strides: their twins
                # (contiguous for a stand-in no view was taken of) tell them apart
                tw = mode.twin(o)
                if tw is None:
                    tw = _dense_twin(o)
                key = (_skey(o), tw.storage_offset(), tuple(tw.shape), tuple(tw.stride()))
            else:
                key = _storage_key(o)
            if key in seen_out:
                continue
            seen_out.add(key)
            counts.outputs.append((o.numel(), _elem_bytes(o), DTYPE_CLASS.get(o.dtype, "int")))
            alias = mode.input_of(o)
            meta = mode.input_meta.get(alias) if alias else None
            if meta is not None and meta[1] == o.dtype:
                # the output is (a view of) an input, or of a full copy of one: an implementation
                # may return the input itself, so only what changed must be written
                written = min(float(o.numel()), mode.changed.get(_skey(o), 0.0))
                counts.notes.append(f"an output aliases input {alias}: {written:.0f} of {o.numel()} "
                                    "elements must be written")
            else:
                written, alias = float(o.numel()), None
            counts.output_writes.append((o.numel(), _elem_bytes(o), DTYPE_CLASS.get(o.dtype, "int"),
                                         written, alias))
    finally:
        for m in reversed(ctx_stack):
            m.__exit__(None, None, None)
    if ValuesObserved.made:
        # a read was detected but did not end the run (caught or wrapped by the reference):
        # the run is void all the same
        first = ValuesObserved.made[0][0]
        kinds = 0
        for _, k in ValuesObserved.made:
            kinds |= k
        ValuesObserved.made.clear()
        raise ValuesObserved(f"{first} (raised inside the reference and not propagated)", kinds)
    return counts


_QUANT_LITERAL = re.compile(r"torch\.(float8_e4m3fn|float8_e5m2|float8_e4m3fnuz|float8_e5m2fnuz|float4_e2m1fn_x2)\b")


def source_quant_formats(source: str) -> set[str]:
    """Quantised formats a reference's source text names: {"fp8", "fp4"} subsets."""
    return {"fp4" if m.startswith("float4") else "fp8" for m in _QUANT_LITERAL.findall(source or "")}


def _skey(t: torch.Tensor):
    """Identity of a tensor's storage (views of one input share it)."""
    try:
        return t.untyped_storage()._cdata
    except Exception:  # noqa: BLE001
        return id(t)


def _storage_key(t: torch.Tensor):
    try:
        return (t.untyped_storage()._cdata, t.storage_offset(), tuple(t.shape))
    except Exception:  # noqa: BLE001 - fake storages
        return id(t)


def count_workload(problem, workload, *, allow_real: bool = True,
                   max_real_bytes: float = 6e9, meta: bool = True,
                   fake_failed: str | None = None, lazy_fill: bool = True,
                   lazy_masks: bool = True) -> Counts:
    """Count the work of ``problem``'s reference on ``workload`` (see module docstring).

    Args:
        problem: a loaded :class:`solbench.spec.Problem`.
        workload: one of its workloads.
        allow_real: fall back to real CPU tensors when the fake run needs values.
        max_real_bytes: refuse the real fallback when the declared inputs exceed this many
            bytes (the CPU would run out of memory or time).
        meta: try the meta device first (mode ``meta``), then FakeTensors (``fake``).
        fake_failed: the FakeTensor run of another workload of this problem failed with this
            message (:func:`solbench.sol.batch.problem_counts` passes it): after a failed meta
            run, go straight to real tensors. The real run counts the same reference on values,
            so it is as valid as a fake run would be; it only skips a retry that, for a
            reference that reads values, costs up to a second per workload and fails again.
        lazy_fill: the real run first leaves short-circuited outputs (matmuls, attention)
            unfilled (:class:`_CountingMode`); when a value derived from one is read
            (:class:`ValuesObserved`), it runs again with them filled. Either way the counts
            are those of the filled run; ``Counts.notes`` records a repeated run.
        lazy_masks: the real run (and its generation of custom inputs) first leaves large
            masks and masked writes uncomputed (:func:`_skip_unread`); when a value derived
            from one is read, it runs again computing them (note :data:`MASKS_NOTE`). A read
            voids only the laziness its value derives from (:attr:`ValuesObserved.kinds`).

    Raises:
        CountingError: no run succeeded (the message gives the reasons).
    """
    if meta:
        try:
            return _run_once(problem, workload, real=False, meta=True)
        except Exception:  # noqa: BLE001 - a reference the meta device cannot run: FakeTensors
            pass
    if fake_failed is not None:
        fake_err = f"{fake_failed}, on an earlier workload of this problem"
    else:
        try:
            return _run_once(problem, workload, real=False)
        except Exception as e:  # noqa: BLE001 - any failure of the fake run falls back
            fake_err = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if not allow_real:
        raise CountingError(f"fake run failed ({fake_err}); real fallback disabled")
    declared = _declared_bytes(problem, workload)
    if declared > max_real_bytes:
        raise CountingError(f"fake run failed ({fake_err}); inputs of {declared / 1e9:.1f} GB are "
                            f"too large for the real CPU fallback")
    try:
        notes = []
        while True:
            try:
                c = _run_once(problem, workload, real=True, lazy_fill=lazy_fill, lazy_masks=lazy_masks)
                break
            except ValuesObserved as e:
                ValuesObserved.made.clear()
                if not (lazy_fill or lazy_masks):
                    raise  # a run with nothing left unfilled taints nothing: not reached
                # the void run may have left state in the reference's module (a cache filled
                # with its values, a module-level generator advanced): the rerun imports it anew
                _forget_reference(problem)
                kinds = e.kinds if (lazy_fill and e.kinds & TAINT_FILL) or (lazy_masks and e.kinds & TAINT_MASK) \
                    else TAINT_FILL | TAINT_MASK
                if lazy_fill and kinds & TAINT_FILL:
                    lazy_fill = False
                    notes.append(f"{FILLED_NOTE} ({e})")
                if lazy_masks and kinds & TAINT_MASK:
                    lazy_masks = False
                    notes.append(f"{MASKS_NOTE} ({e})")
        c.notes.extend(notes)
    except Exception as e:  # noqa: BLE001
        raise CountingError(f"fake run failed ({fake_err}); real run failed "
                            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    c.notes.append(f"fake run failed ({fake_err}); counted on real CPU tensors")
    c.fake_error = fake_failed if fake_failed is not None else fake_err
    return c


def _forget_reference(problem) -> None:
    """Forget ``problem``'s reference module (:func:`solbench.spec.reference.forget_source`),
    so that its next use imports it anew."""
    from ..spec.reference import forget_source

    src = getattr(getattr(problem, "definition", None), "reference", None)
    if isinstance(src, str):
        forget_source(src)


def _declared_bytes(problem, workload) -> float:
    """Bytes the real fallback materialises for the declared inputs (large float inputs are
    stand-ins and cost nothing); shapes and dtypes as the inputs layer plans them."""
    from ..inputs import plan_inputs
    from ..spec.dtypes import element_bytes

    total = 0.0
    for p in plan_inputs(problem, workload).values():
        if p.shape and not _wants_stand_in(p.shape, p.dtype):
            total += math.prod(p.shape) * element_bytes(p.dtype)
    return total
