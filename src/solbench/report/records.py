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
* ``suite``: the one the trace recorded (``evaluation.suite``: the problem's ``suite:`` tag,
  else the folder holding the problem, e.g. SOL-ExecBench's ``L1``); for traces written
  before it, the bundled suite holding the definition (l1, dlrm, ...), else the name of the
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
from .summary import speedup_low, trace_speedup
from .tables import (bound_text, error_figures, failure_reason, no_sol_score_reason, unresolved_side,
                     unresolved_text)

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


def suite_of(definition: str, results_path: Path | None = None, recorded: str | None = None) -> str:
    """The suite a trace is grouped under (module docstring): ``recorded`` (its
    ``evaluation.suite``), else the bundled suite of ``definition``, else the results file's
    folder name up to its first ``_``, else "other"."""
    if recorded:
        return recorded
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
    #: ``unresolved (not above this run's noise floor: X ms)`` when a side's CPU time is not
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
    #: table cells ``unres. <=X ms`` of the candidate's / reference's latency when that side is
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
    #: low end of the speedup's noise interval (``report.summary.speedup_low``): fast_p counts
    #: a speedup above p only when this is above p too; ``raw_speedup_low`` likewise for the raw
    #: speedup of a timed REWARD_HACK
    speedup_low: float | None = None
    raw_speedup_low: float | None = None
    #: the deciding check, finding or log line of a trace that did not pass
    #: (``report.tables.failure_reason``); "" for a PASSED trace
    reason: str = ""
    #: why a PASSED trace has no ``sol_score`` (``report.tables.no_sol_score_reason``: a side's
    #: CPU time unresolved, no SOL on CPU, no hardware spec, SOL error); "" when it has one or
    #: did not pass
    no_sol_score: str = ""
    #: the log of a trace that did not pass (the HTML problem page shows it), else ""
    log: str = field(default="", repr=False)
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


#: solution-name suffixes of solbench's own baselines -> the one label every command shows
#: (``solbench baseline`` and ``run`` call them eager and compile; traces of ``solbench eval``
#: of the reference, and older runs, name them ``<problem>__reference`` / ``__torch_compile``)
BASELINE_ALIASES = {"reference": "eager", "torch_compile": "compile"}


def canonical_label(name: str) -> str:
    """The label of a candidate family named ``name`` (a solution name's suffix after
    ``__``): ``reference`` -> ``eager``, ``torch_compile[_X]`` -> ``compile[_X]``; any other
    name unchanged."""
    if name in BASELINE_ALIASES:
        return BASELINE_ALIASES[name]
    if name.startswith("torch_compile_"):
        return "compile_" + name[len("torch_compile_"):]
    return name


def label_for(trace: Trace, labels: dict[str, str]) -> str:
    """The candidate label of a trace: the one its suite run recorded (``evaluation.label``);
    else a legacy ``labels.json`` entry; else the solution name's suffix after ``__``
    (:func:`canonical_label`); else the solution name."""
    if trace.evaluation.label:
        return trace.evaluation.label
    h = trace.evaluation.solution_hash or ""
    if h in labels:
        return labels[h]
    if "__" in trace.solution:
        return canonical_label(trace.solution.rsplit("__", 1)[1])
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
        low = speedup_low(t)
        raw_low = low
        if ev.status == Status.REWARD_HACK and raw_sp:
            from .tables import speedup_interval

            iv = speedup_interval(t)
            raw_low = min(iv[0], raw_sp) if iv else None
        hacks = [f for f in ev.findings if f.severity == "hack"]
        rows.append(TraceRow(
            file=str(path), line=ln, provenance=pv, suite=suite_of(t.definition, path, ev.suite),
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
            # None for an output never fully written: its error figures measure nothing
            max_abs_error=error_figures(t)[0], rel_l2=_num(error_figures(t)[1]),
            timestamp=ev.timestamp,
            speedup_low=low, raw_speedup_low=raw_low,
            reason="" if ev.status == Status.PASSED else failure_reason(t),
            no_sol_score=((no_sol_score_reason(t) or "no score in the SOL block")
                          if ev.status == Status.PASSED and score is None else ""),
            log="" if ev.status == Status.PASSED else ev.log,
            samples_ms=[x for x in (ev.timing.samples_ms if ev.timing else []) if x is not None],
            ref_samples_ms=[x for x in (ev.reference_timing.samples_ms if ev.reference_timing else [])
                            if x is not None],
        ))
        for f in ev.findings:
            finds.append(FindingRow(str(path), ln, t.definition, t.solution, label, t.workload.uuid,
                                    ev.status.value, f.check, f.severity, f.message,
                                    json.dumps(f.evidence, default=str, sort_keys=True)))
    return rows, finds


def check_labels(wanted: Iterable[str], present: Iterable[str], where: str = "") -> None:
    """Raise ValueError when a wanted candidate label is not among ``present``, naming it and
    listing the labels there are (a filter that matches nothing is a mistake, never an empty
    table)."""
    have = sorted(set(present))
    missing = [w for w in wanted if w not in have]
    if missing:
        raise ValueError(f"{where}no candidate labelled {', '.join(map(repr, missing))}; labels there are: "
                         + (", ".join(have) if have else "none"))


def select_labels(rs: ResultSet, labels: Sequence[str]) -> ResultSet:
    """``rs`` with only the traces of these candidate labels. Raises ValueError
    (:func:`check_labels`) for a label not in ``rs``."""
    check_labels(labels, (r.label for r in rs.rows))
    keep = set(labels)
    idx = [i for i, r in enumerate(rs.rows) if r.label in keep]
    rows = [rs.rows[i] for i in idx]
    kept = {(r.file, r.line) for r in rows}
    finds = [f for f in rs.findings if (f.file, f.line) in kept]
    traces = [rs.traces[i] for i in idx] if len(rs.traces) == len(rs.rows) else rs.traces
    return ResultSet(rows, finds, rs.reads, traces)


def why_no_accepted(rs: ResultSet) -> str:
    """The end of the error a command prints when ``rs`` holds no accepted trace: how many
    lines failed authentication and the ways to read them (docs/reports.md): lines signed on
    another machine verify with its key file in SOLBENCH_TRACE_KEYS; ``--include-unverified``
    reads them, marked. Empty when no line was rejected (an empty file)."""
    states = {x.state for r in rs.reads for x in r.rejected}
    if not states:
        return ""
    hint = "; --include-unverified reads them, marked unverified"
    if "unknown_key" in states:
        hint = ("; lines signed on another machine verify when its trace.key is named in "
                "SOLBENCH_TRACE_KEYS" + hint)
    n = sum(len(r.rejected) for r in rs.reads)
    return f" ({n} lines failed authentication{hint})"


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
