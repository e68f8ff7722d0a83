"""Before a workload starts: what its evaluation will hold, against what the machine has.

One big workload used to kill a whole run: `solbench run-kernelbench` over KernelBench
level 1 on a 24 GB CPU host reached KernelBench's 3D convolution (2.1 GB of fp32 output), the
parent grew to 10.8 GB anonymous plus 8.0 GB of shared memory and the kernel's OOM killer
ended solbench, so neither that problem nor the nine after it got a trace. Now
:func:`plan` estimates the workload's peak from its declared shapes before anything of it is
allocated, and the evaluator (``Evaluator.evaluate``) either runs it, runs it without timing
the eager reference (which drops the reference's slot pool and its worker's outputs: the
"second copy"), or records it NOT_RUNNABLE with the figures and goes on.

The estimate (bytes; ``I`` the workload's declared tensor input bytes, ``O`` its declared
output bytes, ``k`` the slot count :meth:`EvalConfig.n_slots` gives; docs/harness.md,
"Large workloads" says which object each term is):

====================  =========  ==========================================================
term                  where      bytes
====================  =========  ==========================================================
slots                 shared     k (I + O): the candidate's slot pool (memfd / device)
reference_slots       shared     k (I + O), when the reference is timed (``SlotPool.twin``)
flush                 shared     the cache-flush buffers, one per worker (2 x flush bytes)
input_set             parent     I: the current input set (the slot's pristine copy)
reference_copies      parent     I: the reference's private copies (``Oracle.run_observed``)
reference_outputs     parent     O
first_outputs         parent     O: the first round's outputs, kept for ``constant_output``
truth                 parent     float64 copies of the float inputs and float64 outputs
                                 (8 bytes an element), when some output is float32/float64
compare               parent     32 bytes an element of the largest output, at most
                                 ``COMPARE_CHUNK`` elements (the chunked comparisons)
candidate_worker      worker     O when not destination-passing (its returned outputs), plus
                                 ``WORKER_BASE``
reference_worker      worker     O plus ``WORKER_BASE``, when the reference is timed
====================  =========  ==========================================================

Not counted: the candidate's and the reference's own temporaries (unknowable before they
run), and a KernelBench model's parameters (held by the reference and the candidate: the
problem's ``get_init_inputs`` model is not built here). :data:`MARGIN` leaves room for them:
a plan fits when its estimate is at most ``MARGIN`` x the available bytes.

Available bytes (:func:`available_bytes`): ``$SOLBENCH_MEMORY_AVAILABLE`` when set (a byte
count such as ``4G``: lowers the figure for a test, or states a share of a machine shared
with other jobs) less what this process already holds resident; else on the CPU the least of ``MemAvailable`` (/proc/meminfo) and the
cgroup's limit minus its usage plus its inactive file pages (v2 ``memory.max``, v1
``memory.limit_in_bytes``); on CUDA the device's free memory (``cudaMemGetInfo``) plus what
this process's caching allocator holds unused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import paths
from ..proc import procfs
from ..spec.dtypes import element_bytes, to_torch
from ..spec.problem import Problem
from ..spec.workload import Workload
from .config import EvalConfig
from .slots import cached_idle_bytes

#: environment variable that sets the available bytes (``4G``, ``512M``, ``1e9``)
ENV = paths.MEMORY_AVAILABLE
#: a plan fits when its estimate is at most this share of the available bytes (room for the
#: temporaries the estimate cannot see)
MARGIN = 0.9
#: resident bytes of a started worker before any workload (interpreter, torch, the harness):
#: 0.30-0.35 GiB measured on the CPU (torch 2.13, ``bench/kernelbench_memory.py``)
WORKER_BASE = 384 << 20
#: elements of an output the comparisons work on at once (``correctness.COMPARE_CHUNK``) and
#: their temporaries per element (float32 and float64 copies, the difference, masks)
COMPARE_CHUNK = 1 << 25
COMPARE_BYTES_PER_ELEMENT = 32

_BYTES_RX = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.I)

_SHARED = ("slots", "reference_slots", "flush")
_WORKERS = ("candidate_worker", "reference_worker")


def parse_bytes(text: str) -> int:
    """``4G``, ``512M``, ``1e9`` or a plain count (binary suffixes). Raises ValueError."""
    m = _BYTES_RX.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a byte count (e.g. 4G, 512M, 1e9)")
    n = int(float(m.group(1)) * (1 << (10 * " kmgt".index(m.group(2).lower() or " "))))
    if n <= 0:
        raise ValueError(f"{text!r} must be positive")
    return n


def gb(n: int | float | None) -> str:
    return "?" if n is None else f"{n / 1e9:.2f} GB"


@dataclass
class MemoryPlan:
    """The plan of one workload. ``terms``: bytes by term (module doc) of the plan chosen;
    ``estimated``: their sum; ``full``: the estimate with the reference timed; ``available``
    and where that figure came from (``source``); ``reference_timing``: whether the plan
    times the eager reference; ``fits``: whether the workload runs at all."""

    terms: dict[str, int]
    estimated: int
    full: int
    available: int | None
    source: str
    reference_timing: bool
    fits: bool
    slots: int
    notes: list[str] = field(default_factory=list)

    def split(self) -> dict[str, int]:
        """Bytes by process: ``parent``, ``shared`` (mapped by parent and workers, counted
        once), ``workers``."""
        out = {"parent": 0, "shared": 0, "workers": 0}
        for k, v in self.terms.items():
            out["shared" if k in _SHARED else "workers" if k in _WORKERS else "parent"] += v
        return out

    def evidence(self) -> dict[str, Any]:
        return {"estimated_bytes": self.estimated, "estimated_with_reference_timing_bytes": self.full,
                "available_bytes": self.available, "available_source": self.source,
                "margin": MARGIN, "slots": self.slots, "terms": dict(self.terms), **self.split()}

    def describe(self) -> str:
        """One line: the estimate by process against the available bytes."""
        s = self.split()
        line = (f"estimated {gb(self.estimated)} (parent {gb(s['parent'])}, shared buffers "
                f"{gb(s['shared'])}, workers {gb(s['workers'])}) against {gb(self.available)} "
                f"available ({self.source}; a plan may use {MARGIN:.0%})")
        if not self.reference_timing and self.full != self.estimated:
            line += f"; {gb(self.full)} with the reference timed"
        return line


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _tensors(defn, specs: dict, env: dict) -> list[tuple[torch.dtype, int, int]]:
    """(dtype, elements, bytes) of each tensor of ``specs`` (scalars left out)."""
    out = []
    for spec in specs.values():
        shape = defn.shape_of(spec, env)
        if shape is not None:
            dt = to_torch(spec.dtype)
            n = _numel(shape)
            out.append((dt, n, int(n * element_bytes(dt))))
    return out


def estimate(problem: Problem, w: Workload, cfg: EvalConfig, *, flush_bytes: int = 0,
             dps: bool = False, reference_timing: bool | None = None) -> tuple[dict[str, int], int]:
    """(bytes by term, slot count) of evaluating ``w`` under ``cfg`` (module doc).
    ``reference_timing`` None: as ``cfg`` says. Raises ValueError for an unresolvable axis."""
    defn = problem.definition
    env = defn.resolve_axes(w.axes)
    ref_timed = (cfg.timing and cfg.reference_timing) if reference_timing is None else reference_timing
    ins, outs = _tensors(defn, defn.inputs, env), _tensors(defn, defn.outputs, env)
    i_bytes = sum(b for _, _, b in ins)
    o_bytes = sum(b for _, _, b in outs)
    # the float64 run: float inputs up to 32 bits are widened (the others cloned), every float
    # output comes back float64
    truth_in = sum(8 * n if dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64) else b
                   for dt, n, b in ins)
    truth_out = sum(8 * n if dt.is_floating_point else b for dt, n, b in outs)
    max_out = max((n for _, n, _ in outs), default=0)
    wide_out = any(dt in (torch.float32, torch.float64) for dt, _, _ in outs)
    k = cfg.n_slots(max(i_bytes + o_bytes, 1))
    terms = {
        "slots": k * (i_bytes + o_bytes),
        "reference_slots": k * (i_bytes + o_bytes) if ref_timed else 0,
        "flush": (2 if ref_timed else 1) * int(flush_bytes) if cfg.timing else 0,
        "input_set": i_bytes,
        "reference_copies": i_bytes,
        "reference_outputs": o_bytes,
        "first_outputs": o_bytes,
        "truth": truth_in + truth_out if (cfg.precision_check and wide_out) else 0,
        "compare": min(max_out, COMPARE_CHUNK) * COMPARE_BYTES_PER_ELEMENT,
        "candidate_worker": WORKER_BASE + (0 if dps else o_bytes),
        "reference_worker": WORKER_BASE + o_bytes if ref_timed else 0,
    }
    return terms, k


def _read_int(path: Path) -> int | None:
    try:
        txt = path.read_text().strip()
    except OSError:
        return None
    return int(txt) if txt.isdigit() else None


def _stat_value(path: Path, keys: tuple[str, ...]) -> int:
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if k in keys and v.strip().isdigit():
                return int(v)
    except OSError:
        pass
    return 0


def _cgroup_room() -> int | None:
    """The cgroup's limit minus its usage plus its inactive file pages (reclaimable), or None
    without a limit. v2 (``memory.max``) first, then v1 (``memory/memory.limit_in_bytes``)."""
    root = Path("/sys/fs/cgroup")
    v2_limit = _read_int(root / "memory.max")
    if v2_limit is not None:
        use = _read_int(root / "memory.current") or 0
        return v2_limit - use + _stat_value(root / "memory.stat", ("inactive_file",))
    v1 = root / "memory"
    limit = _read_int(v1 / "memory.limit_in_bytes")
    if limit is None or limit >= (1 << 60):  # v1's "no limit" is a page-rounded 2^63
        return None
    use = _read_int(v1 / "memory.usage_in_bytes") or 0
    return limit - use + _stat_value(v1 / "memory.stat", ("total_inactive_file", "inactive_file"))


def _own_resident() -> int:
    """Resident bytes of this process (``/proc/self/statm``), 0 where unreadable."""
    return procfs.resident_bytes("self")


def available_bytes(device: str) -> tuple[int | None, str]:
    """(bytes available to this evaluation, where the figure came from); None when nothing
    says (the plan then runs every workload). Module doc: the sources, in order. Raises
    ValueError for a malformed ``$SOLBENCH_MEMORY_AVAILABLE``."""
    setting = paths.memory_available_setting()
    if setting:
        # the run's share of the machine: what this process already holds (interpreter,
        # torch, the problem) counts against it, as it does against MemAvailable
        share, own = parse_bytes(setting), _own_resident()
        return max(share - own, 0), f"${ENV} {gb(share)} less this process's {gb(own)}"
    if torch.device(device).type == "cuda":
        dev = torch.device(device)
        free, _total = torch.cuda.mem_get_info(dev)
        cached = cached_idle_bytes(dev)
        return int(free + max(cached, 0)), "free device memory"
    avail = procfs.mem_available()
    room = _cgroup_room()
    if room is not None and (avail is None or room < avail):
        return max(room, 0), "cgroup limit"
    return avail, "MemAvailable"


def plan(problem: Problem, w: Workload, cfg: EvalConfig, *, flush_bytes: int = 0,
         dps: bool = False) -> MemoryPlan:
    """The plan of ``w``: as configured when its estimate fits ``MARGIN`` x the available
    bytes; else without timing the eager reference when that fits (and the reference was
    to be timed); else not runnable (``fits`` false). Raises ValueError (a bad axis, a
    malformed ``$SOLBENCH_MEMORY_AVAILABLE``)."""
    avail, source = available_bytes(cfg.device)
    terms, k = estimate(problem, w, cfg, flush_bytes=flush_bytes, dps=dps)
    full = sum(terms.values())
    ref_timed = cfg.timing and cfg.reference_timing
    if avail is None or full <= MARGIN * avail:
        return MemoryPlan(terms, full, full, avail, source, ref_timed, True, k)
    if ref_timed:
        lean, k2 = estimate(problem, w, cfg, flush_bytes=flush_bytes, dps=dps, reference_timing=False)
        est = sum(lean.values())
        if est <= MARGIN * avail:
            return MemoryPlan(lean, est, full, avail, source, False, True, k2,
                              ["the eager reference is not timed: its buffers and worker would not fit"])
        return MemoryPlan(lean, est, full, avail, source, False, False, k2)
    return MemoryPlan(terms, full, full, avail, source, False, False, k)
