"""Flat records of stored traces: one row per trace and one per finding, with the figures
every report, query and comparison uses, computed in one place.

Definitions (docs/reports.md gives the sources):

* ``speedup`` = T_ref / T_k of a PASSED trace (``report.summary.trace_speedup``).
* ``t_sol_ms``, ``sol_score`` (S), ``headroom`` (h): from the trace's SOL block
  (``store.blocks.SolBlock``); ``sol_distance`` = T_k / T_SOL (how many times slower than the
  bound the candidate still is; >= 1 for a sound bound).
* ``raw_*``: the same figures as the candidate's own timings claim, before the reward-hack
  verdict: a REWARD_HACK trace that was timed gets ``raw_latency_ms`` (its timing median),
  ``raw_speedup`` against its reference timing and ``raw_sol_score`` against the T_SOL of
  the same workload on the same hardware (taken from any trace that has one). For a PASSED
  trace raw = adjusted.
* ``suite``: the bundled suite holding the definition (l1, dlrm, ...), else the name of the
  folder of the results file.
* ``label``: the candidate family (``labels.json`` beside the results file, a legacy side
  file of bench/suites_device.py; else the solution name's suffix after ``__``; else the
  solution name).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..errors import SpecError
from ..spec.trace import Status, Trace
from ..store import StoreRead, read_store, warn_unverified
from ..store.blocks import BlockError, sol_of
from .summary import trace_speedup
from .tables import bound_text, unresolved_side, unresolved_text

@lru_cache(maxsize=1)
def _bundled_suites() -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        root = resources.files("solbench.suites").joinpath("data")
        for suite in root.iterdir():
            if suite.is_dir():
                for prob in suite.iterdir():
                    if prob.is_dir():
                        out[prob.name] = suite.name
    except (FileNotFoundError, NotADirectoryError):
        pass
    return out


def suite_of(definition: str, results_path: Path | None = None) -> str:
    s = _bundled_suites().get(definition)
    if s:
        return s
    if results_path is not None:
        name = results_path.resolve().parent.name
        return name.split("_")[0] if name else results_path.stem
    return "other"


def _num(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


@dataclass
class TraceRow:
    """One trace, flattened. Times in ms; FLOP and bytes as counted by the SOL model."""

    file: str
    line: int
    provenance: str
    suite: str
    hardware: str
    definition: str
    solution: str
    label: str
    solution_hash: str | None
    workload: str
    axes: str
    status: str
    latency_ms: float | None
    reference_latency_ms: float | None
    speedup: float | None
    t_sol_ms: float | None
    sol_score: float | None
    headroom: float | None
    sol_distance: float | None
    raw_latency_ms: float | None
    raw_reference_ms: float | None
    raw_speedup: float | None
    raw_sol_score: float | None
    #: ``unresolved (below the CPU timer's resolution: X ms)`` when a side's CPU time is not
    #: resolved (``report.tables.unresolved_text``); its latency, speedup and SOL figures are None
    unresolved: str | None
    #: which side's CPU time is unresolved: "candidate", "reference", "both", or None
    #: (``report.tables.unresolved_side``); ``solbench compare`` judges no candidate-side time
    #: of a row with "candidate" or "both"
    unresolved_side: str | None
    #: ``<=0.175x`` / ``>=3.2x``: the speedup bound the resolved side proves when one side is
    #: unresolved (``report.tables.bound_text``); ``speedup`` holds it only when informative
    #: (``report.summary.trace_speedup``)
    speedup_bound: str | None
    #: table cells ``unres. <X ms`` of the candidate's / reference's latency when that side is
    #: unresolved (``report.tables.unresolved_text(short=True)``), else None
    unres_latency: str | None
    unres_reference: str | None
    timing_method: str | None
    n_samples: int | None
    iqr_ms: float | None
    total_flops: float | None
    bytes_model: float | None
    arithmetic_intensity: float | None
    bottleneck: str | None
    sol_model: str | None
    sol_hardware: str | None
    findings: int
    hack_findings: int
    max_abs_error: float | None
    rel_l2: float | None
    timestamp: str | None
    #: raw timing samples of candidate and reference (not exported to tables)
    samples_ms: list[float] = field(default_factory=list, repr=False)
    ref_samples_ms: list[float] = field(default_factory=list, repr=False)

    def table_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("samples_ms")
        d.pop("ref_samples_ms")
        return d


@dataclass
class FindingRow:
    file: str
    line: int
    definition: str
    solution: str
    label: str
    workload: str
    status: str
    check_name: str  # the finding's ``check`` ("check" is an SQL keyword)
    severity: str
    message: str
    evidence: str  # JSON


@dataclass
class ResultSet:
    """Everything read from some results files: rows, findings, and what the store said."""

    rows: list[TraceRow]
    findings: list[FindingRow]
    reads: list[StoreRead]
    traces: list[Trace]

    def provenance_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.reads:
            for k, v in r.counts.items():
                out[k] = out.get(k, 0) + v
        return out


def _labels_beside(path: Path) -> dict[str, str]:
    f = path.parent / "labels.json"
    if f.is_file():
        try:
            data = json.loads(f.read_text())
            if isinstance(data, dict):
                return {str(k): str(v) for k, v in data.items()}
        except (OSError, json.JSONDecodeError):
            pass
    return {}


def label_for(trace: Trace, labels: dict[str, str]) -> str:
    h = trace.evaluation.solution_hash or ""
    if h in labels:
        return labels[h]
    if "__" in trace.solution:
        return trace.solution.rsplit("__", 1)[1]
    return trace.solution


def _hardware(trace: Trace) -> str:
    return trace.evaluation.environment.hardware or trace.evaluation.device or "unknown"


def rows_from_traces(traces: Sequence[Trace], path: Path, read: StoreRead | None = None,
                     labels: dict[str, str] | None = None) -> tuple[list[TraceRow], list[FindingRow]]:
    """Rows of one file's traces. Raises BlockError naming the line of a malformed block."""
    labels = labels if labels is not None else _labels_beside(path)
    lines = read.line_numbers if read else list(range(1, len(traces) + 1))
    prov = read.provenance if read else ["unknown"] * len(traces)
    sols: list[Any] = []
    for t, ln in zip(traces, lines):
        try:
            sols.append(sol_of(t))
        except BlockError as e:
            raise BlockError(f"{path}: line {ln}: {e}") from None
    # T_SOL per (definition, workload, hardware), from any trace that carries it
    tsol: dict[tuple[str, str, str], float] = {}
    for t, s in zip(traces, sols):
        if s is not None and _num(s.sol_ms):
            tsol.setdefault((t.definition, t.workload.uuid, _hardware(t)), float(s.sol_ms))
    rows, finds = [], []
    for t, s, ln, pv in zip(traces, sols, lines, prov):
        ev = t.evaluation
        perf = ev.performance
        sp = trace_speedup(t)
        t_sol = _num(s.sol_ms) if s else None
        t_sol = t_sol or tsol.get((t.definition, t.workload.uuid, _hardware(t)))
        score = _num(s.score) if s and ev.status == Status.PASSED else None
        h = _num(s.h) if s and ev.status == Status.PASSED else None
        lat = perf.latency_ms if perf else None
        ref = perf.reference_latency_ms if perf else None
        un_c, un_r = unresolved_text(ev.timing), unresolved_text(ev.reference_timing)
        if un_c is not None:
            lat = None  # noise of the subtracted baseline, not a time
        if un_r is not None:
            ref = None
        raw_lat = lat if lat is not None else (ev.timing.median_ms if ev.timing else None)
        raw_ref = ref if ref is not None else (ev.reference_timing.median_ms if ev.reference_timing else None)
        raw_sp, raw_score = sp, score
        if un_c is not None or un_r is not None:
            raw_lat = lat
            raw_ref = ref
            raw_score = None  # raw_sp: the informative bound, as sp
        if ev.status == Status.REWARD_HACK and raw_lat and raw_ref:
            raw_sp = raw_ref / raw_lat
            if t_sol:
                from ..sol.score import sol_score

                try:
                    raw_score = sol_score(raw_lat, raw_ref, t_sol).score
                except ValueError:
                    raw_score = None
        elif ev.status != Status.PASSED:
            raw_sp = raw_score = None
            raw_lat = raw_ref = None
        label = label_for(t, labels)
        bound = s.bound if s else None
        hacks = [f for f in ev.findings if f.severity == "hack"]
        corr = ev.correctness
        rows.append(TraceRow(
            file=str(path), line=ln, provenance=pv, suite=suite_of(t.definition, path),
            hardware=_hardware(t), definition=t.definition, solution=t.solution, label=label,
            solution_hash=ev.solution_hash, workload=t.workload.uuid,
            axes=",".join(f"{k}={v}" for k, v in t.workload.axes.items()), status=ev.status.value,
            latency_ms=lat, reference_latency_ms=ref, speedup=sp, t_sol_ms=t_sol, sol_score=score,
            headroom=h, sol_distance=(lat / t_sol) if (lat and t_sol) else None,
            raw_latency_ms=raw_lat, raw_reference_ms=raw_ref, raw_speedup=raw_sp, raw_sol_score=raw_score,
            unresolved=un_c or un_r,
            unresolved_side=unresolved_side(t) if ev.status == Status.PASSED else None,
            speedup_bound=bound_text(t),
            unres_latency=unresolved_text(ev.timing, short=True) if ev.status == Status.PASSED else None,
            unres_reference=unresolved_text(ev.reference_timing, short=True) if ev.status == Status.PASSED else None,
            timing_method=ev.timing.method if ev.timing else None,
            n_samples=ev.timing.n_samples if ev.timing else None,
            iqr_ms=ev.timing.iqr_ms if ev.timing else None,
            total_flops=_num(bound.total_flops) if bound else None,
            bytes_model=_num(bound.bytes_model) if bound else None,
            arithmetic_intensity=_num(bound.arithmetic_intensity) if bound else None,
            bottleneck=bound.bottleneck if bound else None,
            sol_model=s.model if s else None, sol_hardware=s.hardware if s else None,
            findings=len(ev.findings), hack_findings=len(hacks),
            max_abs_error=corr.max_absolute_error if corr else None,
            rel_l2=_num(corr.extra.get("rel_l2")) if corr else None,
            timestamp=ev.timestamp,
            samples_ms=[x for x in (ev.timing.samples_ms if ev.timing else []) if x is not None],
            ref_samples_ms=[x for x in (ev.reference_timing.samples_ms if ev.reference_timing else [])
                            if x is not None],
        ))
        for f in ev.findings:
            finds.append(FindingRow(str(path), ln, t.definition, t.solution, label, t.workload.uuid,
                                    ev.status.value, f.check, f.severity, f.message,
                                    json.dumps(f.evidence, default=str, sort_keys=True)))
    return rows, finds


def load(paths: Iterable[str | Path], include_unverified: bool = False, quiet: bool = False) -> ResultSet:
    """Read and verify results files (``store.read_store``) and flatten them. Rejected lines
    are reported on stderr unless ``quiet``. Raises SpecError / BlockError naming the file."""
    rows, finds, reads, traces = [], [], [], []
    for p in paths:
        p = Path(p)
        if not p.is_file():
            raise SpecError(p, "", "no such results file")
        r = read_store(p, include_unverified=include_unverified)
        if not quiet and (r.rejected or r.gaps):
            warn_unverified(r)
        a, b = rows_from_traces(r.traces, p, r)
        rows += a
        finds += b
        reads.append(r)
        traces += r.traces
    return ResultSet(rows, finds, reads, traces)
