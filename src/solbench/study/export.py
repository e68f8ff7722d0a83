"""``solbench export RESULTS... -o BUNDLE``: every evaluation of a study as one self-describing
dataset.

BUNDLE holds:

* ``traces.jsonl`` (+ ``traces.jsonl.manifest.json``): the accepted trace lines of every
  results file, copied byte for byte with their run manifests (:func:`solbench.store.merge`),
  so ``solbench report BUNDLE/traces.jsonl`` verifies and reads them as it read the originals
  (a reader without the signing key passes ``--include-unverified``, or the key file in
  ``$SOLBENCH_TRACE_KEYS``);
* ``traces.jsonl.verify.jsonl``: the ``solbench verify`` records found beside the results
  files, lines copied as signed;
* ``traces.parquet``, ``findings.parquet``, ``workloads.parquet``, ``candidates.parquet``,
  ``sources.parquet`` (the DuckDB views of docs/reports.md, built from the bundle's own
  traces) and ``models.parquet`` / ``models.csv`` (the per-model rows, report/models.py);
* ``manifest.json``: the code version (solbench version, git commit, dirty flag), every run's
  hardware (host, GPUs with clocks as NVML read them, libraries) from the results manifests,
  the hardware named in the traces, the input seeds of every trace, the sha256 of every
  problem (definition.json + workload.jsonl, or the KernelBench file) and of every file of the
  bundle.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from ..errors import SpecError

BUNDLE_SCHEMA = 1
TRACES = "traces.jsonl"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def problem_hash(path: Path) -> str:
    """sha256 over a problem's files: ``definition.json`` then ``workload.jsonl`` of a
    directory (each file's bytes, in that order), or the ``.py`` of a KernelBench problem."""
    h = hashlib.sha256()
    if path.is_file():
        h.update(path.read_bytes())
    else:
        for name in ("definition.json", "workload.jsonl"):
            f = path / name
            if f.is_file():
                h.update(name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def export(results: Sequence[Path], bundle: Path, *, problems: Sequence[str] = (),
           adopt_legacy: bool = False) -> dict:
    """Write the bundle (module docstring). ``adopt_legacy``: sign the traces of
    unauthenticated (legacy) results files with this user's key, as ``solbench results merge
    --adopt-legacy`` does. Raises SpecError when ``bundle`` exists and is not empty, a
    results file is missing, or one is legacy without ``adopt_legacy``. Returns the manifest."""
    from .. import __version__
    from ..report.models import model_rows, read_verifications, verify_path, write_tables
    from ..report.records import label_for, load
    from ..report import db as sdb
    from ..store import merge
    from ..store.manifest import git_commit
    from .verify import find_problems

    bundle = Path(bundle)
    if bundle.exists() and any(bundle.iterdir()):
        raise SpecError(bundle, "", "bundle folder exists and is not empty; choose a new one")
    for r in results:
        if not Path(r).is_file():
            raise SpecError(r, "", "no such results file")
    bundle.mkdir(parents=True, exist_ok=True)
    traces_path = bundle / TRACES
    merged = merge([Path(r) for r in results], traces_path, adopt_legacy=adopt_legacy)
    ver_lines = []
    for r in results:
        vp = verify_path(Path(r))
        if vp.is_file():
            ver_lines += [x for x in vp.read_text().splitlines() if x.strip()]
    if ver_lines:
        verify_path(traces_path).write_text("\n".join(ver_lines) + "\n")
    rs = load([traces_path], quiet=True)
    con = sdb.build(rs)
    sdb.export(con, bundle, "parquet")
    rows = model_rows(rs.traces, lambda t: label_for(t, {}), read_verifications([verify_path(traces_path)]))
    write_tables(rows, bundle)
    read = rs.reads[0]
    runs = []
    for run_id, e in read.runs.items():
        runs.append({"run_id": run_id, "verified": e.get("verified"), "started": e.get("started"),
                     "solbench": e.get("solbench"), "argv": e.get("argv"), "config": e.get("config"),
                     "host": e.get("host"), "libs": e.get("libs"), "gpus": e.get("gpus")})
    defs = sorted({t.definition for t in rs.traces})
    where = find_problems(set(defs), problems)
    manifest = {
        "bundle_schema": BUNDLE_SCHEMA,
        "created": datetime.now(timezone.utc).isoformat(),
        "solbench": {"version": __version__, **git_commit()},
        "sources": [{"file": str(r), "sha256": _sha(Path(r))} for r in results],
        "traces": merged["written"], "duplicates_dropped": merged["duplicates"],
        "left_out": merged["left_out"],
        "hardware": sorted({t.evaluation.environment.hardware for t in rs.traces}),
        "devices": sorted({t.evaluation.device for t in rs.traces if t.evaluation.device}),
        "runs": runs,
        "seeds": [{"definition": t.definition, "solution": t.solution,
                   "solution_hash": t.evaluation.solution_hash, "workload": t.workload.uuid,
                   "input_seed": t.evaluation.input_seed, "input_seeds": t.evaluation.input_seeds}
                  for t in rs.traces],
        "problems": {d: ({"path": str(where[d]), "sha256": problem_hash(where[d])} if d in where
                         else {"path": None, "sha256": None, "note": "problem not found; pass --problems"})
                     for d in defs},
        "verifications": len(ver_lines),
    }
    files = sorted(p for p in bundle.iterdir() if p.is_file())
    manifest["files"] = {p.name: _sha(p) for p in files}
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=1, allow_nan=False) + "\n")
    return manifest
