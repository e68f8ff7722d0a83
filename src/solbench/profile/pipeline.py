"""The profiling pipeline: warm up, time unprofiled wall-clock steps, profile a few steps with
torch.profiler, classify every kernel, attribute it to aten ops, and report the addressable
fraction (docs/profiling.md, "Method").

Denominators (both reported):
- ``busy_ms``: kernel-busy time per step, the union of device kernel intervals (all streams)
  over the profiled steps divided by their number. Per-class times are kernel durations; when
  kernels overlap (their sum exceeds the union) every kernel's time is scaled by
  union / sum, so the classes add up to the busy time (pro-rata attribution of overlap).
- ``wall_ms``: the median of >= 20 UNPROFILED steps, each timed host-side from before the step
  to after ``torch.cuda.synchronize()``. Fractions "over wall" divide by max(wall_ms, busy_ms),
  so a profiled kernel sum longer than the unprofiled step (profiler overhead, mostly on CPU)
  cannot give a fraction above 1. A step is ``launch_bound`` when busy_ms / wall_ms < 0.9.

On CUDA a "kernel" is a device activity record (kernels, memcpy, memset; user annotations
excluded), linked to its launching aten op by the profiler's correlation id. On CPU there are
no device kernels: each aten op's self time is the unit of work, classified by its op name,
and busy time is the sum of those self times (bookkeeping ops such as ``aten::empty`` and
``aten::view`` are left out).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections import defaultdict
from typing import Any, Iterable, Sequence

import torch
from pydantic import BaseModel, ConfigDict, Field

from .classify import CLASSES, LOOSE_ADDRESSABLE, STRICT_ADDRESSABLE, IGNORED_CPU_OPS, classify_kernel, classify_op
from .workloads import BuiltWorkload

LAUNCH_BOUND_THRESHOLD = 0.9
UNKNOWN_WARN_FRACTION = 0.01
MIN_WALL_STEPS = 20


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AddressableFraction(_M):
    """Share of time in addressable kernels. strict: framework_native; loose: + vendor_other.
    ``*_busy`` over kernel-busy time, ``*_wall`` over the unprofiled wall-clock step."""

    strict_busy: float
    strict_wall: float
    loose_busy: float
    loose_wall: float


class ClassTime(_M):
    """Time of one class (or sub-class / op) per step. ``ms``: milliseconds per step;
    ``share_busy`` / ``share_wall``: fractions of busy and of wall time."""

    ms: float
    share_busy: float
    share_wall: float
    count: int = 0


class KernelGroup(_M):
    """Kernels with the same name, launching op chain and optimizer context, summed per step.

    ``ops``: launching aten ops, innermost first (up to 4). ``shapes``: input shapes of the
    innermost op, most time first (up to 3 distinct). ``ms``: milliseconds per step (overlap
    pro-rated); ``count``: launches per step.
    """

    kernel: str
    op: str
    top_op: str
    ops: list[str] = Field(default_factory=list)
    in_optimizer: bool = False
    phase: str = "forward"  # forward | backward | optimizer
    tags: list[str] = Field(default_factory=list)  # solbench:: annotations, autograd node names
    cls: str
    subclass: str = ""
    rule: str = ""
    ms: float
    share_busy: float
    share_wall: float
    count: float
    shapes: list[Any] = Field(default_factory=list)


class ProfileReport(_M):
    """One workload profile. Times in milliseconds per step. The JSON form is what
    ``solbench profile --json`` prints and what ``solbench project`` reads."""

    workload: str
    mode: str
    scale: str
    device: str
    device_name: str
    classified_by: str  # "kernel name" (CUDA) or "aten op" (CPU)
    wall_ms: float
    wall_samples_ms: list[float]
    busy_ms: float
    kernel_sum_ms: float
    busy_over_wall: float
    launch_bound: bool
    addressable_fraction: AddressableFraction
    classes: dict[str, ClassTime]
    subclasses: dict[str, ClassTime]
    ops: list[dict[str, Any]]
    top_kernels: list[KernelGroup]
    kernel_table: list[KernelGroup]
    config: dict[str, Any]
    precision: dict[str, Any]
    steps: dict[str, int]
    environment: dict[str, str]
    warnings: list[str] = Field(default_factory=list)
    #: seconds the whole run took (build, warm-up, timing, profiling); set by
    #: bench/profile_device.py, None when not recorded
    run_s: float | None = None

    def to_json(self, **kw) -> str:
        return self.model_dump_json(**kw)


# ------------------------------------------------------------------ helpers
def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by half-open intervals [start, end) (any unit).

    >>> union_length([(0, 2), (1, 3), (5, 6)])
    4.0
    """
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


@contextlib.contextmanager
def precision_flags(precision: dict[str, Any]):
    """Apply a workload's TF32 / cudnn.benchmark flags for the run; restore them after."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.backends.cudnn.benchmark)
    try:
        torch.backends.cuda.matmul.allow_tf32 = bool(precision.get("tf32_matmul", False))
        torch.backends.cudnn.allow_tf32 = bool(precision.get("tf32_cudnn", saved[1]))
        torch.backends.cudnn.benchmark = bool(precision.get("cudnn_benchmark", False))
        yield
    finally:
        (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
         torch.backends.cudnn.benchmark) = saved


@contextlib.contextmanager
def cpu_threads(n: int | None):
    """Run with ``n`` intra-op CPU threads (None: leave as is)."""
    if n is None:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _sdpa_backends() -> dict[str, bool]:
    out = {}
    for name in ("flash", "mem_efficient", "math", "cudnn"):
        fn = getattr(torch.backends.cuda, f"{name}_sdp_enabled", None)
        if fn is not None:
            out[name] = bool(fn())
    return out


def _ancestors(ev) -> list:
    out, p = [], getattr(ev, "cpu_parent", None)
    while p is not None:
        out.append(p)
        p = getattr(p, "cpu_parent", None)
    return out


#: op namespaces kept in a kernel's launching-op chain
OP_NAMESPACES = ("aten::", "prims::", "fbgemm::", "torchrec::", "c10d::")


def _is_aten(name: str) -> bool:
    return name.startswith(OP_NAMESPACES)


# ------------------------------------------------------------------ records
_AUTOGRAD = "autograd::engine::evaluate_function: "


def phase_and_tags(context: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """From the enclosing event names (innermost first): the phase (``optimizer`` inside an
    ``Optimizer.*`` range, ``backward`` inside an autograd node, else ``forward``) and the tags
    (``solbench::`` annotations and autograd node names such as ``BmmBackward0``)."""
    phase = "forward"
    tags: list[str] = []
    for c in context:
        if c.startswith("Optimizer."):
            phase = "optimizer"
        elif c.startswith(_AUTOGRAD):
            if phase == "forward":
                phase = "backward"
            tags.append(c[len(_AUTOGRAD):])
        elif c.startswith("solbench::"):
            tags.append(c)
    return phase, tuple(tags)


class _Rec:
    __slots__ = ("kernel", "ops", "context", "start", "dur", "shapes", "cls", "sub", "rule", "phase", "tags")

    def __init__(self, kernel, ops, context, start, dur, shapes, c):
        self.kernel, self.ops, self.context = kernel, ops, context
        self.start, self.dur, self.shapes = start, dur, shapes
        self.cls, self.sub, self.rule = c.cls, c.subclass, c.rule
        self.phase, self.tags = phase_and_tags(context)


def _cuda_records(prof) -> tuple[list[_Rec], float]:
    """Device activity records linked to their aten ops; returns (records, busy_us_total)."""
    from torch.autograd import DeviceType

    fevents = prof.events()
    cpu_by_id = {e.id: e for e in fevents if e.device_type == DeviceType.CPU}
    recs: list[_Rec] = []
    intervals = []
    for k in prof.profiler.kineto_results.events():
        if k.device_type() != DeviceType.CUDA:
            continue
        if getattr(k, "is_user_annotation", lambda: False)():
            continue
        name = k.name()
        dur = k.duration_ns() / 1000.0
        start = k.start_ns() / 1000.0
        cpu = cpu_by_id.get(k.linked_correlation_id())
        chain = [cpu] + _ancestors(cpu) if cpu is not None else []
        ops = [e.name for e in chain if _is_aten(e.name)]
        context = [e.name for e in chain]
        shapes = list(cpu.input_shapes) if (cpu is not None and _is_aten(cpu.name)) else []
        recs.append(_Rec(name, ops, context, start, dur, shapes, classify_kernel(name, ops, context)))
        intervals.append((start, start + dur))
    return recs, union_length(intervals)


def _cpu_records(prof) -> tuple[list[_Rec], float]:
    """Aten-op self times as the units of work (no device kernels on CPU)."""
    from torch.autograd import DeviceType

    recs: list[_Rec] = []
    for e in prof.events():
        if e.device_type != DeviceType.CPU or not _is_aten(e.name):
            continue
        anc = _ancestors(e)
        aten_anc = [a.name for a in anc if _is_aten(a.name)]
        if e.name in IGNORED_CPU_OPS:
            continue
        dur = float(e.self_cpu_time_total)
        if dur <= 0:
            continue
        context = [a.name for a in anc]
        c = classify_op(e.name, aten_anc, context)
        recs.append(_Rec(e.name, [e.name] + aten_anc, context, e.time_range.start, dur,
                         list(e.input_shapes or []), c))
    # ops run one at a time on the calling thread, and self times do not overlap: busy = their sum
    return recs, sum(r.dur for r in recs)


# ------------------------------------------------------------------ aggregation
def summarize(recs: Sequence[_Rec], busy_us_total: float, active_steps: int, wall_ms: float,
              *, top_n: int = 15, table_rows: int = 400) -> dict[str, Any]:
    """Aggregate records into per-class, per-sub-class, per-op and per-kernel-group tables.

    Args:
        recs: classified records over ``active_steps`` profiled steps (durations in us).
        busy_us_total: union of their intervals over all profiled steps (us).
        wall_ms: unprofiled median step time (ms).
    Returns a dict of ProfileReport fields (busy_ms, kernel_sum_ms, classes, subclasses, ops,
    top_kernels, kernel_table, addressable_fraction, busy_over_wall, launch_bound).
    """
    n = max(active_steps, 1)
    kernel_sum_ms = sum(r.dur for r in recs) / 1000.0 / n
    busy_ms = busy_us_total / 1000.0 / n
    scale = busy_ms / kernel_sum_ms if kernel_sum_ms > busy_ms > 0 else 1.0
    denom_wall = max(wall_ms, busy_ms) if max(wall_ms, busy_ms) > 0 else 1.0
    denom_busy = busy_ms if busy_ms > 0 else 1.0

    def ct(ms: float, count: int = 0) -> ClassTime:
        return ClassTime(ms=ms, share_busy=ms / denom_busy, share_wall=ms / denom_wall, count=count)

    cls_us: dict[str, float] = defaultdict(float)
    cls_n: dict[str, int] = defaultdict(int)
    sub_us: dict[str, float] = defaultdict(float)
    sub_n: dict[str, int] = defaultdict(int)
    op_us: dict[str, float] = defaultdict(float)
    op_n: dict[str, int] = defaultdict(int)
    op_cls: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    groups: dict[tuple, dict[str, Any]] = {}
    for r in recs:
        cls_us[r.cls] += r.dur
        cls_n[r.cls] += 1
        if r.cls == "framework_native":
            sub_us[r.sub] += r.dur
            sub_n[r.sub] += 1
        op = r.ops[0] if r.ops else "(no aten op)"
        op_us[op] += r.dur
        op_n[op] += 1
        op_cls[op][r.cls] += r.dur
        key = (r.kernel, tuple(r.ops[:4]), r.phase, r.tags)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"rec": r, "us": 0.0, "count": 0, "shapes": defaultdict(float)}
        g["us"] += r.dur
        g["count"] += 1
        if r.shapes:
            g["shapes"][repr(r.shapes)] += r.dur

    to_ms = scale / 1000.0 / n
    classes = {c: ct(cls_us.get(c, 0.0) * to_ms, cls_n.get(c, 0) // n) for c in CLASSES}
    subclasses = {s: ct(v * to_ms, sub_n[s] // n) for s, v in sorted(sub_us.items(), key=lambda kv: -kv[1])}
    ops = [{"op": op, **ct(v * to_ms, op_n[op] // n).model_dump(),
            "classes": {c: x * to_ms for c, x in sorted(op_cls[op].items(), key=lambda kv: -kv[1])}}
           for op, v in sorted(op_us.items(), key=lambda kv: -kv[1])]

    table: list[KernelGroup] = []
    for (kernel, ops_chain, phase, tags), g in sorted(groups.items(), key=lambda kv: -kv[1]["us"]):
        r = g["rec"]
        ms = g["us"] * to_ms
        shapes = [eval_shapes(s) for s, _ in sorted(g["shapes"].items(), key=lambda kv: -kv[1])[:3]]
        table.append(KernelGroup(kernel=kernel, op=ops_chain[0] if ops_chain else "", top_op=r.ops[-1] if r.ops else "",
                                 ops=list(ops_chain), in_optimizer=phase == "optimizer", phase=phase,
                                 tags=list(tags), cls=r.cls, subclass=r.sub, rule=r.rule,
                                 ms=ms, share_busy=ms / denom_busy, share_wall=ms / denom_wall,
                                 count=g["count"] / n, shapes=shapes))
    if len(table) > table_rows:  # fold the tail into one row per class so the totals stay whole
        tail = table[table_rows:]
        table = table[:table_rows]
        folded: dict[tuple[str, str], float] = defaultdict(float)
        for t in tail:
            folded[(t.cls, t.subclass)] += t.ms
        for (c, s), ms in folded.items():
            table.append(KernelGroup(kernel=f"(other {c} kernels)", op="", top_op="", cls=c, subclass=s,
                                     rule="folded", ms=ms, share_busy=ms / denom_busy, share_wall=ms / denom_wall,
                                     count=0))
    top = [t for t in table if t.cls in LOOSE_ADDRESSABLE and t.rule != "folded"][:top_n]

    strict_ms = sum(classes[c].ms for c in STRICT_ADDRESSABLE)
    loose_ms = sum(classes[c].ms for c in LOOSE_ADDRESSABLE)
    af = AddressableFraction(strict_busy=strict_ms / denom_busy, strict_wall=strict_ms / denom_wall,
                             loose_busy=loose_ms / denom_busy, loose_wall=loose_ms / denom_wall)
    busy_over_wall = busy_ms / wall_ms if wall_ms > 0 else 0.0
    return dict(busy_ms=busy_ms, kernel_sum_ms=kernel_sum_ms, classes=classes, subclasses=subclasses, ops=ops,
                top_kernels=top, kernel_table=table, addressable_fraction=af, busy_over_wall=busy_over_wall,
                launch_bound=busy_over_wall < LAUNCH_BOUND_THRESHOLD)


def eval_shapes(s: str) -> Any:
    """Shapes were keyed by repr (lists of ints / nested lists); turn back into lists."""
    import ast

    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError):
        return s


# ------------------------------------------------------------------ the run
def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    import platform

    from ..proc.procfs import cpu_model

    return f"CPU ({cpu_model() or platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def profile_workload(built: BuiltWorkload, *, warmup: int = 3, wall_steps: int = MIN_WALL_STEPS,
                     active_steps: int = 3, threads: int | None = None) -> ProfileReport:
    """Profile one built workload.

    Args:
        built: from :func:`solbench.profile.workloads.build_workload`.
        warmup: steps run first (allocator, cuBLASLt heuristics, cudnn.benchmark, lazy caches).
        wall_steps: unprofiled steps timed for ``wall_ms`` (median; at least 20).
        active_steps: steps recorded by torch.profiler (keep small: traces grow fast).
        threads: CPU intra-op threads for the run (None: unchanged).
    Returns a :class:`ProfileReport`. Raises ValueError if wall_steps < 20 or active_steps < 1.
    """
    if wall_steps < MIN_WALL_STEPS:
        raise ValueError(f"wall_steps must be >= {MIN_WALL_STEPS} (median of >= 20), got {wall_steps}")
    if active_steps < 1:
        raise ValueError("active_steps must be >= 1")
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = built.device.startswith("cuda")
    sync = (lambda: torch.cuda.synchronize(built.device)) if cuda else (lambda: None)
    with precision_flags(built.precision), cpu_threads(threads):
        precision = dict(built.precision)
        precision.update(tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
                         tf32_cudnn=torch.backends.cudnn.allow_tf32,
                         cudnn_benchmark=torch.backends.cudnn.benchmark,
                         float32_matmul_precision=torch.get_float32_matmul_precision(),
                         sdpa_backends=_sdpa_backends() if cuda else {})
        for _ in range(warmup):
            built.step()
            sync()
        samples: list[float] = []
        for _ in range(wall_steps):
            sync()
            t0 = time.perf_counter()
            built.step()
            sync()
            samples.append((time.perf_counter() - t0) * 1000.0)
        wall_ms = statistics.median(samples)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        sync()
        with profile(activities=acts, record_shapes=True) as prof:
            for i in range(active_steps):
                with record_function(f"solbench_step_{i}"):
                    built.step()
                sync()
        recs, busy_us = _cuda_records(prof) if cuda else _cpu_records(prof)
        threads_used = torch.get_num_threads()
    summary = summarize(recs, busy_us, active_steps, wall_ms)
    warnings: list[str] = []
    unk = summary["classes"]["unknown"]
    if unk.share_busy > UNKNOWN_WARN_FRACTION:
        names = sorted({r.kernel for r in recs if r.cls == "unknown"})[:5]
        warnings.append(f"unknown kernels take {unk.share_busy:.1%} of busy time (> 1%): {names}")
    if not recs:
        warnings.append("the profiler recorded no kernels")
    if summary["busy_ms"] > wall_ms * 1.05:
        warnings.append(f"profiled busy time {summary['busy_ms']:.3f} ms exceeds the unprofiled wall "
                        f"{wall_ms:.3f} ms (profiler overhead); wall fractions use busy as denominator")
    env = {"torch": torch.__version__, "cuda": str(torch.version.cuda), "threads": str(threads_used)}
    try:
        import transformers

        env["transformers"] = transformers.__version__
    except ImportError:
        pass
    return ProfileReport(
        workload=built.name, mode=built.mode, scale=built.scale, device=built.device,
        device_name=_device_name(built.device), classified_by="kernel name" if cuda else "aten op",
        wall_ms=wall_ms, wall_samples_ms=samples, config=built.config, precision=precision,
        steps={"warmup": warmup, "wall": wall_steps, "active": active_steps}, environment=env,
        warnings=warnings, **summary)


def profile(name: str, mode: str = "infer", scale: str = "tiny", device: str = "cpu", **kw) -> ProfileReport:
    """Build and profile a workload (see :func:`profile_workload` for keyword arguments)."""
    from .workloads import build_workload

    threads = kw.pop("threads", None)
    with cpu_threads(threads):
        built = build_workload(name, mode, scale, device)
        try:
            return profile_workload(built, threads=threads, **kw)
        finally:
            del built
            import gc

            gc.collect()
            if device.startswith("cuda"):
                torch.cuda.empty_cache()


def llama_sweep(mode: str = "infer", scale: str = "full", device: str = "cuda", **kw) -> list[ProfileReport]:
    """Profile the Llama family (135M, 1B, 8B-layer shapes), smallest first, in one mode: does
    the addressable fraction shrink with scale? Keyword arguments go to :func:`profile`."""
    from .workloads import LLAMA_SWEEP

    return [profile(name, mode, scale, device, **kw) for name in LLAMA_SWEEP]


def fixture_rows(report: ProfileReport | dict[str, Any], n: int = 16) -> list[dict[str, Any]]:
    """A trimmed real trace for classification tests: the ``n`` kernel groups with the most
    time (kernel name, launching ops, phase, tags, microseconds per step, launches per step,
    and the class the rules gave when recorded)."""
    r = report.model_dump() if isinstance(report, ProfileReport) else report
    rows = []
    for g in [g for g in r["kernel_table"] if g.get("rule") != "folded"][:n]:
        rows.append({"workload": r["workload"], "mode": r["mode"], "kernel": g["kernel"], "ops": g["ops"][:3],
                     "phase": g.get("phase", "forward"), "tags": g.get("tags", [])[:3],
                     "us_per_step": round(g["ms"] * 1000.0, 3), "count": g["count"],
                     "recorded_cls": g["cls"], "recorded_subclass": g["subclass"]})
    return rows
