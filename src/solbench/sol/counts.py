"""What a count of one workload's reference found, as plain data: :class:`Counts` and the
solar model's :class:`SolarTotals`.

Kept apart from :mod:`solbench.sol.counting` (which runs the reference under torch's dispatch
modes) and imports no torch: pricing a count (:func:`solbench.sol.bound.bound_from_counts`) and
reading one back from the cache (:mod:`solbench.sol.cache`) need only these, so a warm
``solbench sol`` whose every workload is cached never starts torch (about 1.3-2.5 s of its
imports on this project's CPU host).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .solar_graph import SolarGraph


#: the note of a count whose lazy run met a value read and was repeated with filled outputs
FILLED_NOTE = "counted with filled short-circuit outputs"
#: the note of a count whose lazy run read a value derived from a skipped mask computation
MASKS_NOTE = "counted with computed masks"


class CountingError(Exception):
    """The reference could not be run to count its work (message says why)."""


@dataclass(frozen=True)
class SolarTotals:
    """What the solar model prices from a :class:`SolarGraph` (:func:`solbench.sol.bound.bound_from_counts`),
    as element and MAC counts (no bytes: the width is chosen at pricing): ``macs`` (:meth:`SolarGraph.macs`),
    ``fused_elements`` (:meth:`SolarGraph.fused_elements`), ``weight_root_elements``
    (:meth:`SolarGraph.weight_root_elements`) and ``scaled_weight_root_elements`` (the same with
    the weights' block scales, ``weight_root_elements(scales=True)``). A count's cache entry keeps
    these four, not the graph,
    which for a reference that loops over requests or pages holds tens of thousands of layers."""

    macs: int
    fused_elements: int
    weight_root_elements: int
    scaled_weight_root_elements: int = 0



@dataclass
class Counts:
    """Work of one workload's reference.

    Units: FLOP (2 per MAC), SFU ops, bytes. ``mma_flops`` are keyed by operand class
    (fp64, fp32, fp16, bf16, fp8, fp4, int8) with causal attention counted as required
    (masked positions excluded); ``mma_flops_full`` counts causal attention in full (the
    solar convention). ``cuda_flops`` are CUDA-core FLOPs keyed by output class (fp64,
    fp32, fp16 for 16-bit float); ``sfu_ops`` transcendental evaluations.
    """

    mma_flops: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    mma_flops_full: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    #: tensor-core-eligible FLOPs keyed by the precision the operands' values carry (their
    #: provenance from the problem's inputs, :func:`mma_precision`), causal as required: the
    #: refined model prices these (an upcast inside the reference does not raise the class)
    mma_by_precision: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    #: CUDA-core FLOPs keyed by min(output dtype class, provenance class): fp64, fp32, fp16
    cuda_by_precision: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    #: per output: (numel, element bytes, class, elements that must be written, aliased input
    #: or None). An output that is an input updated in place (or a copy of one with a region
    #: replaced) must only write the replaced region
    output_writes: list[tuple[int, float, str, float, str | None]] = field(default_factory=list)
    cuda_flops: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    sfu_ops: float = 0.0
    bytes_unfused: float = 0.0
    #: (name, numel, element bytes, class, bytes read) of each distinct input tensor (module
    #: parameters included); bytes read < numel*width when the reference only gathers rows of it
    #: (embedding, index_select, indexing) and 0 when it never reads it
    inputs: list[tuple[str, int, float, str, float]] = field(default_factory=list)
    #: (numel, element bytes, dtype name) of each distinct output tensor
    outputs: list[tuple[int, float, str]] = field(default_factory=list)
    op_counts: Counter = field(default_factory=Counter)
    unknown_ops: Counter = field(default_factory=Counter)
    attention_calls: list[dict] = field(default_factory=list)
    #: operand classes of every tensor any op produced (e.g. "fp8" when the reference
    #: quantises a bf16 input itself): the solar model picks its rate from these
    dtypes_seen: set = field(default_factory=set)
    mode: str = "fake"
    real_tensors: bool = False
    synthesized: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the torch-function-level layer graph upstream SOLAR's memory model walks (solar mode)
    solar_graph: SolarGraph | None = None
    #: what the solar model prices from ``solar_graph`` (:meth:`solar`); a count read back from
    #: the cache carries these alone (its ``solar_graph`` is None)
    solar_totals: SolarTotals | None = None
    #: quantised formats the reference *source* names (``torch.float8_e4m3fn``, ...): "fp8",
    #: "fp4"; upstream picks the solar-mode rate and byte width from these literals alone
    source_quant: set = field(default_factory=set)
    #: why the FakeTensor run failed, for a count made on real tensors (None otherwise)
    fake_error: str | None = None

    def solar(self) -> SolarTotals | None:
        """The solar model's figures (:class:`~solbench.sol.solar_graph.SolarTotals`): the stored
        ones, else those of ``solar_graph`` (computed once); None without either."""
        if self.solar_totals is None and self.solar_graph is not None:
            self.solar_totals = self.solar_graph.totals()
        return self.solar_totals

    @property
    def bytes_fused(self) -> float:
        """Compulsory bytes: each distinct input element the outputs depend on read once (only
        its gathered rows or read views when the reference reads no more; 0 when never read) +
        each output element that must be written, once (an output aliasing an input updated in
        place writes only the changed region), each at its own width."""
        if self.output_writes:
            return sum(r for *_, r in self.inputs) + sum(w * b for _, b, _, w, _ in self.output_writes)
        return sum(r for *_, r in self.inputs) + sum(n * b for n, b, _ in self.outputs)

    @property
    def bytes_outputs_certain(self) -> float:
        """Bytes every correct implementation must write: each output's changed elements at its
        own width (the certain floor of :func:`solbench.sol.bound.certain_bound`)."""
        if self.output_writes:
            return sum(w * b for _, b, _, w, _ in self.output_writes)
        return sum(n * b for n, b, _ in self.outputs)

    @property
    def bytes_io(self) -> float:
        """Every input in full + every output, own widths (upstream's per-tensor-dtype bytes)."""
        return sum(n * b for _, n, b, _, _ in self.inputs) + sum(n * b for n, b, _ in self.outputs)

    def elements_io(self) -> int:
        return sum(n for _, n, *_ in self.inputs) + sum(n for n, _, _ in self.outputs)

    def io_dtype_classes(self) -> set[str]:
        return {x[3] for x in self.inputs} | {c for *_, c in self.outputs}
