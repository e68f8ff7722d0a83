"""``solbench verify``: re-measure every claimed speedup before it is counted.

A *claim* is a unit (problem, candidate by solution hash) whose every workload PASSED and
whose speedup over the eager reference (geometric mean over its workloads,
:func:`solbench.report.summary.trace_speedup`) is above 1. Each claim is evaluated again in a
fresh process (``python -m solbench.cli eval``: a new interpreter, new workers, the same entry
point as ``solbench eval``) on the same workloads, with a new input seed and more timed calls
(default: twice the claim's own count, at least 20). Verdicts, per workload and per unit:

* ``verified``: every workload PASSED again and the new speedup is above 1 even at the
  pessimistic end of the re-measurement's own noise: per workload the lower end of the
  speedup interval (reference Q1 / candidate Q3 of the latency samples,
  :func:`solbench.report.tables.speedup_interval`), over the unit their geometric mean
  (``verified_speedup_low``) must exceed 1;
* ``not_reproduced``: every workload PASSED again but the new speedup is not clearly above 1
  (within the noise, below 1, or no longer resolved on the CPU): both figures are kept;
* ``failed``: a workload did not PASS (its status and log kept), or the evaluation process
  failed;
* ``missing``: the candidate or its problem could not be found (not re-evaluated, never
  counted as verified).

Records are JSON lines, one per unit, signed like results lines (:mod:`solbench.store.auth`),
written to ``<results>.verify.jsonl`` beside the (first) results file unless ``-o`` names
another; ``solbench report`` reads that file beside a results file by itself
(report/models.py). The re-measured traces go to ``<verify file>.traces.jsonl``.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..report.models import read_verifications, verify_path  # noqa: F401 - the file format's reader
from ..spec import Problem, Trace, load_problem
from ..inputs.seeds import fingerprint
from ..spec.trace import Status

VERDICTS = ("verified", "not_reproduced", "failed", "missing")


@dataclass
class Claim:
    definition: str
    solution: str
    solution_hash: str
    traces: list[Trace]
    speedup: float


def claims(traces: Sequence[Trace]) -> list[Claim]:
    """The claimed speedups among ``traces`` (module docstring), in first-seen order. A
    (problem, hash) evaluated twice (two results files) is one claim of its latest traces per
    workload."""
    from ..report.summary import geomean, trace_speedup

    units: dict[tuple[str, str], dict[str, Trace]] = defaultdict(dict)
    for t in traces:
        h = t.evaluation.solution_hash or t.solution
        units[(t.definition, h)][t.workload.uuid] = t
    out = []
    for (d, h), by_w in units.items():
        ts = list(by_w.values())
        if not all(t.evaluation.status == Status.PASSED for t in ts):
            continue
        sp = [trace_speedup(t) for t in ts]
        if any(s is None for s in sp):
            continue
        g = geomean(sp)
        if g is not None and g > 1.0:
            out.append(Claim(d, ts[0].solution, h, ts, g))
    return out


def _eval_subprocess(problem: Path, solution: Path, uuids: list[str], iters: int, seed: int,
                     device: str, out: Path, timeout_s: float) -> tuple[list[Trace], str]:
    """Evaluate in a fresh interpreter through ``solbench eval``; (traces, error text)."""
    from ..store import read_traces

    # -P: not the cwd first on sys.path (a solbench/ or torch.py there, in a candidate's
    # folder, would run in this trusted parent)
    cmd = [sys.executable, "-P", "-m", "solbench.cli", "eval", str(problem), "--solution", str(solution),
           "-w", ",".join(uuids), "--iters", str(iters), "--seed", hex(seed), "--device", device,
           "-o", str(out), "--quiet"]
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])  # this solbench, whatever the cwd
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return [], f"verification process ran past {timeout_s:g} s"
    traces = read_traces(out, quiet=True) if out.exists() else []
    err = "" if traces else (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    return traces, err


#: (problem path, solution path, workload uuids, iters, seed, device) -> (traces, error)
Reevaluator = Callable[[Path, Path, list[str], int, int, str], tuple[list[Trace], str]]


def _figures(t: Trace | None) -> dict:
    from ..report.summary import trace_speedup

    if t is None:
        return {}
    ev = t.evaluation
    perf = ev.performance
    return {"status": ev.status.value, "speedup": trace_speedup(t),
            "latency_ms": perf.latency_ms if perf else None,
            "reference_latency_ms": perf.reference_latency_ms if perf else None,
            "n_samples": ev.timing.n_samples if ev.timing else None,
            "input_seed": ev.input_seed,
            "log": ev.log.strip().splitlines()[0][:300] if ev.status != Status.PASSED and ev.log.strip() else None}


def judge(claim: Claim, new: list[Trace], error: str, seed: int | None, iters: int | None) -> dict:
    """The unit's record (module docstring) from its re-evaluated traces ``new``."""
    from ..report.summary import geomean, trace_speedup

    from ..report.tables import speedup_interval

    by_w = {t.workload.uuid: t for t in new}
    rows, verdicts, speeds, lows = [], [], [], []
    for t in claim.traces:
        n = by_w.get(t.workload.uuid)
        if n is None:
            v = "failed"
        elif n.evaluation.status != Status.PASSED:
            v = "failed"
        else:
            s = trace_speedup(n)
            iv = speedup_interval(n)
            low = min(s, iv[0]) if (s is not None and iv is not None) else s
            speeds.append(s)
            lows.append(low)
            v = "verified" if low is not None and low > 1.0 else "not_reproduced"
        verdicts.append(v)
        rows.append({"workload": t.workload.uuid, "verdict": v, "claimed": _figures(t),
                     "measured": _figures(n)})
    vs = low_g = None
    if "failed" in verdicts:
        verdict = "failed"
    else:
        if speeds and all(s is not None for s in speeds):
            vs, low_g = geomean(speeds), geomean(lows)
        # above 1 even at the pessimistic end of the re-measurement's own noise (the
        # interquartile ranges of candidate and reference: report.tables.speedup_interval)
        verdict = "verified" if low_g is not None and low_g > 1.0 else "not_reproduced"
    return {"definition": claim.definition, "solution": claim.solution,
            "solution_hash": claim.solution_hash, "verdict": verdict,
            "claimed_speedup": claim.speedup, "verified_speedup": vs, "verified_speedup_low": low_g,
            "seed": hex(seed) if seed is not None else None,
            "iters": iters, "error": error or None, "workloads": rows}


def verdict_line(rec: dict) -> str:
    """One line for a verification record: verdict, claimed and re-measured speedups and, for
    a re-measured speedup that is not verified, why (its low end, or no speedup resolved)."""
    m = rec["workloads"][0]["measured"] if rec.get("workloads") else {}
    vs, low = rec.get("verified_speedup"), rec.get("verified_speedup_low")
    measured = f"{vs:.3g}x" if vs is not None else "-"
    if rec["verdict"] in ("verified", "not_reproduced") and vs is not None and low is not None:
        measured += f", low end {low:.3g}x"
    elif rec["verdict"] == "not_reproduced" and vs is None:
        measured += ": a workload's speedup is not resolved"
    return (f"{rec['definition']} / {rec['solution']}: {rec['verdict']} (claimed "
            f"{rec['claimed_speedup']:.3g}x, measured {measured}"
            + (f"; {rec['error']}" if rec.get("error") else "")
            + (f"; {m.get('status')}: {m.get('log')}" if m.get("log") else "") + ")")


def find_problems(definitions: set[str], targets: Sequence[str]) -> dict[str, Path]:
    """definition name -> problem path, from ``targets`` (as ``generate`` takes them) and the
    bundled suites."""
    from ..suites import DATA_ROOT
    from .generate import resolve_targets

    paths = resolve_targets(list(targets)) if targets else []
    paths += sorted(p.parent for p in DATA_ROOT.glob("*/*/definition.json"))
    out: dict[str, Path] = {}
    for p in paths:
        name = p.stem if p.is_file() else p.name
        if name in definitions and name not in out:
            out[name] = p
    for p in paths:  # a folder named otherwise than its definition
        if p.is_dir() and p.name not in out and (p / "definition.json").is_file():
            try:
                d = json.loads((p / "definition.json").read_text()).get("name")
            except (OSError, ValueError):
                continue
            if d in definitions and d not in out:
                out[d] = p
    return out


def verify(traces: Sequence[Trace], solutions: Path, out: Path, *, problems: Sequence[str] = (),
           device: str = "cpu", iters: int | None = None, timeout_s: float = 3600.0,
           reevaluate: Reevaluator | None = None,
           on_record: Callable[[dict], None] | None = None) -> list[dict]:
    """Re-evaluate every claim of ``traces`` (module docstring) and append one signed record
    per claim to ``out``. ``solutions``: the folder ``solbench run --solutions`` was given (the
    candidate is found there by its solution hash); ``problems``: where the problems are
    (suite names, folders, files), besides the bundled suites. ``iters``: timed calls of the
    re-evaluation (default: max(20, 2 x the claim's own count)). ``reevaluate``: the
    evaluation to use (default: a fresh ``solbench eval`` process). Returns the records."""
    from ..store import append_traces, auth
    from ..run.plan import candidate_files, load_candidate

    cl = claims(traces)
    where = find_problems({c.definition for c in cl}, problems)
    loaded: dict[str, Problem] = {}
    key = auth.load_key(create=True)
    traces_out = out.with_name(out.name + ".traces.jsonl") if out.suffix else out.with_suffix(".traces.jsonl")
    records = []
    for c in cl:
        ppath = where.get(c.definition)
        sol_path = None
        if ppath is not None:
            prob = loaded.get(c.definition) or loaded.setdefault(c.definition, load_problem(ppath))
            for f in candidate_files(solutions, prob):
                if load_candidate(f, prob).solution_hash == c.solution_hash:
                    sol_path = f
                    break
        if ppath is None or sol_path is None:
            rec = judge(c, [], "", None, None)
            rec.update(verdict="missing", error=(f"problem {c.definition!r} not found" if ppath is None
                                                 else f"no candidate with hash {c.solution_hash[:12]} in {solutions}"))
        else:
            n = iters or max(20, 2 * max((t.evaluation.timing.n_samples if t.evaluation.timing else 0)
                                         for t in c.traces))
            seed = secrets.randbits(63)
            old = {t.evaluation.input_seed for t in c.traces}
            while fingerprint(seed) in old:  # a new seed, never the claim's own
                seed = secrets.randbits(63)
            uuids = [t.workload.uuid for t in c.traces]
            if reevaluate is None:
                with tempfile.TemporaryDirectory(prefix="solbench-verify-") as tmp:
                    new, err = _eval_subprocess(ppath, sol_path, uuids, n, seed, device,
                                                Path(tmp) / "t.jsonl", timeout_s)
            else:
                new, err = reevaluate(ppath, sol_path, uuids, n, seed, device)
            for t in new:
                t.evaluation.solution_hash = c.solution_hash
            if new:
                append_traces(traces_out, new)
            rec = judge(c, new, err, seed, n)
        rec["candidate"] = str(sol_path) if sol_path else None
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "a") as f:
            f.write(json.dumps(auth.sign(dict(rec), key), allow_nan=False) + "\n")
        records.append(rec)
        if on_record:
            on_record(rec)
    return records
