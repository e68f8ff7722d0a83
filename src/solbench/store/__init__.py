"""Results store: trace JSON lines, appended by the parent only, authenticated, read back
with verification; a run manifest beside each file (the DuckDB database built from them is
:mod:`solbench.report.db`).

Stored line = the trace (``spec.trace.Trace``) plus an envelope: ``schema_version``
(:data:`SCHEMA_VERSION`), ``run_id`` (the manifest entry of the run that wrote it), ``seq``
(0, 1, ... within the run) and ``auth`` (HMAC-SHA256, :mod:`.auth`). Reading
(:func:`read_store`) sorts every line into one of:

* verified: MAC good with this user's key (or a ``--key`` given);
* legacy: the whole file predates authentication (no line has ``auth``, no manifest, and
  this user's solbench never signed into it, :func:`signed_before`): loaded, marked
  "unauthenticated (legacy)";
* rejected (excluded unless ``include_unverified``): in an authenticated file, a line with
  no MAC, a wrong MAC (edited, or forged without the key), a MAC by a key not available here,
  a repeated (run_id, seq) (a replayed copy), a newer schema, or text that is not JSON.

Missing sequence numbers within a run (deleted lines) are reported as ``gaps``.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from .. import paths
from ..errors import SpecError
from ..spec.trace import Trace
from . import auth, manifest

#: version of the stored line (envelope + trace); a line without one is version 0 (legacy)
SCHEMA_VERSION = 1

# run id and next sequence number per results file, for this process
_RUNS: dict[str, list] = {}


SIGNED_REGISTRY = "signed_results.txt"


def _registry() -> Path:
    return auth.key_dir() / SIGNED_REGISTRY


def signed_before(path: Path) -> bool:
    """Whether this user's solbench has signed lines into ``path`` (by resolved path). Kept in
    the key folder, which the candidate cannot see: stripping every MAC and the manifest from
    a file does not turn it into a "legacy" file."""
    try:
        return str(path.resolve()) in _registry().read_text().splitlines()
    except OSError:
        return False


def _register(path: Path) -> None:
    if not signed_before(path):
        fd = os.open(_registry(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a") as f:
            f.write(str(path.resolve()) + "\n")


def _run_for(path: Path, config: dict[str, Any] | None, keep_manifest: bool = False) -> list:
    key = str(path.resolve())
    run = _RUNS.get(key)
    if run is None:
        entry = manifest.collect(config)
        k = auth.load_key(create=True)
        if not (path.exists() and path.stat().st_size > 0) and not keep_manifest:
            # a fresh results file starts a fresh manifest
            manifest.manifest_path(path).unlink(missing_ok=True)
        manifest.add_run(path, auth.sign(entry, k))
        _register(path)
        run = _RUNS[key] = [entry["run_id"], 0]
    return run


def append_traces(path: str | Path, traces: Iterable[Trace], config: dict[str, Any] | None = None,
                  _keep_manifest: bool = False) -> int:
    """Append traces to ``path`` (created with its folder), one signed strict-JSON line each,
    flushed and fsynced so an interrupted run keeps what it finished. The first append of this
    process to ``path`` adds a run entry (``config`` included) to its manifest. Returns the
    count written. Raises auth.KeyError_ when the trace key cannot be trusted."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    traces = list(traces)
    if not traces:
        return 0
    key = auth.load_key(create=True)
    run = _run_for(path, config, _keep_manifest)
    lines = []
    for t in traces:
        obj = json.loads(t.to_json_line())
        obj.update(schema_version=SCHEMA_VERSION, run_id=run[0], seq=run[1])
        run[1] += 1
        lines.append(json.dumps(auth.sign(obj, key), allow_nan=False))
    with open(path, "a") as f:
        f.write("".join(x + "\n" for x in lines))
        f.flush()
        os.fsync(f.fileno())
    return len(lines)


@dataclass
class LineIssue:
    """A line that was not accepted as written by solbench, or was included unverified."""

    line: int
    state: str  # unsigned | bad_mac | unknown_key | malformed | replayed | newer_schema | invalid
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass
class StoreRead:
    """What :func:`read_store` found in one results file."""

    path: Path
    traces: list[Trace]
    #: per accepted trace: "verified", "legacy", or "unverified:<state>" (include_unverified)
    provenance: list[str]
    line_numbers: list[int]
    legacy: bool
    rejected: list[LineIssue] = field(default_factory=list)
    gaps: dict[str, list[int]] = field(default_factory=dict)
    manifest: dict[str, Any] | None = None
    #: manifest run entries by run_id, each with ``verified`` set
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(p.split(":")[0] for p in self.provenance)
        c["rejected"] = len(self.rejected)
        return dict(c)

    def summary_line(self) -> str | None:
        """One line for the terminal when anything is not verified, else None."""
        parts = []
        if self.legacy and self.traces:
            parts.append(f"{len(self.traces)} traces unauthenticated (legacy file, no MACs)")
        bad = self.rejected
        if bad:
            shown = "; ".join(str(r) for r in bad[:3]) + (f"; ... {len(bad) - 3} more" if len(bad) > 3 else "")
            inc = sum(p.startswith("unverified") for p in self.provenance)
            verb = f"{inc} included unverified as asked" if inc else "excluded"
            parts.append(f"{len(bad)} lines not written by solbench ({verb}): {shown}")
        for run, seqs in self.gaps.items():
            parts.append(f"run {run[:8]}: lines missing (seq {', '.join(map(str, seqs[:5]))}"
                         f"{', ...' if len(seqs) > 5 else ''}): deleted after writing")
        return f"{self.path}: " + " | ".join(parts) if parts else None


def _keys(extra: Sequence[bytes] = ()) -> list[bytes]:
    keys = list(extra)
    k = auth.load_key(create=False)
    if k is not None:
        keys.append(k)
    for f in paths.trace_key_files():
        keys.append(auth.load_key_file(f))
    return keys


def read_store(path: str | Path, include_unverified: bool = False, keys: Sequence[bytes] = ()) -> StoreRead:
    """Read and verify one results file (see the module docstring for the rules).

    Args:
        path: a results JSONL; a missing file reads as empty.
        include_unverified: also return lines that fail verification (when they parse as
            traces), marked ``unverified:<state>`` in ``provenance``.
        keys: further keys to verify with (``auth.load_key_file``), besides this user's key
            and the files named in ``$SOLBENCH_TRACE_KEYS``.
    Raises:
        SpecError: a malformed line in a legacy (unauthenticated) file, naming the line.
    """
    path = Path(path)
    out = StoreRead(path=path, traces=[], provenance=[], line_numbers=[], legacy=True,
                    manifest=manifest.read_manifest(path))
    if not path.exists():
        return out
    rows: list[tuple[int, str, Any]] = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append((i, line, json.loads(line)))
        except json.JSONDecodeError as e:
            rows.append((i, line, e))
    signed = any(isinstance(o, dict) and "auth" in o for _, _, o in rows) or bool(
        out.manifest and out.manifest.get("runs")) or signed_before(path)
    out.legacy = not signed
    ks = _keys(keys)
    if out.manifest:
        for entry in out.manifest.get("runs", []):
            if isinstance(entry, dict) and isinstance(entry.get("run_id"), str):
                state, _ = auth.verify(entry, ks)
                out.runs[entry["run_id"]] = {**entry, "verified": state == "verified"}
    seen: dict[tuple[str, int], int] = {}
    seqs: dict[str, set[int]] = {}
    for i, line, obj in rows:
        if out.legacy:
            try:
                if isinstance(obj, Exception):
                    raise obj
                out.traces.append(Trace.from_json_line(line))
            except ValueError as e:
                raise SpecError(path, f"line {i}", f"not a valid trace: {str(e).splitlines()[0]}") from None
            out.provenance.append("legacy")
            out.line_numbers.append(i)
            continue
        if isinstance(obj, Exception) or not isinstance(obj, dict):
            out.rejected.append(LineIssue(i, "malformed", "not a JSON object (not written by solbench)"))
            continue
        state, reason = auth.verify(obj, ks)
        if state == "unsigned":
            reason = "no MAC in an authenticated file: not written by solbench"
        if state == "verified":
            ver = obj.get("schema_version")
            rk = (obj.get("run_id"), obj.get("seq"))
            if not isinstance(ver, int) or ver > SCHEMA_VERSION:
                state, reason = "newer_schema", f"schema_version {ver!r}; this solbench reads up to {SCHEMA_VERSION}"
            elif rk in seen:
                state, reason = "replayed", f"a copy of line {seen[rk]} (same run and seq)"
            else:
                seen[rk] = i
                if isinstance(rk[0], str) and isinstance(rk[1], int):
                    seqs.setdefault(rk[0], set()).add(rk[1])
        try:
            trace = Trace.from_json_line(line)
        except ValueError as e:
            out.rejected.append(LineIssue(i, "invalid", f"not a valid trace ({state}): {str(e).splitlines()[0]}"))
            continue
        if state == "verified":
            out.traces.append(trace)
            out.provenance.append("verified")
            out.line_numbers.append(i)
            continue
        out.rejected.append(LineIssue(i, state, reason))
        if include_unverified:
            out.traces.append(trace)
            out.provenance.append(f"unverified:{state}")
            out.line_numbers.append(i)
    for run, have in seqs.items():
        missing = sorted(set(range(max(have) + 1)) - have)
        if missing:
            out.gaps[run] = missing
    return out


def warn_unverified(read: StoreRead, stream=None) -> None:
    """Print :meth:`StoreRead.summary_line` (when there is one) to stderr."""
    msg = read.summary_line()
    if msg:
        print(f"solbench: warning: {msg}", file=stream or sys.stderr)


def read_traces(path: str | Path, include_unverified: bool = False, quiet: bool = False) -> list[Trace]:
    """The accepted traces of ``path`` (:func:`read_store`); rejected lines, legacy files and
    gaps are reported on stderr unless ``quiet``. Raises SpecError naming the line of a
    malformed trace in a legacy file."""
    r = read_store(path, include_unverified=include_unverified)
    if not quiet and (r.rejected or r.gaps):
        warn_unverified(r)
    return r.traces


def done_keys(path: str | Path) -> set[tuple[str, str]]:
    """(solution hash, workload uuid) of every accepted trace (for --resume): a forged line
    does not make its pair count as done."""
    return {(t.evaluation.solution_hash or "", t.workload.uuid) for t in read_traces(path)}


def merge(shards: Sequence[str | Path], out: str | Path, adopt_legacy: bool = False) -> dict[str, Any]:
    """Merge shard results files into ``out`` (which must not exist or be empty).

    Verified lines are copied byte for byte (their MACs stay valid) and each shard's manifest
    runs are carried over, so the merged file verifies like its shards. Lines a shard's
    reader rejected are left out and listed. A trace whose (solution hash, workload) is
    already in the merge is dropped as a duplicate. A legacy (unauthenticated) shard is an
    error unless ``adopt_legacy``: its traces are then signed with this user's key as a new
    run whose manifest config names the shard.

    Returns {"written", "duplicates", "left_out": [...]}. Raises SpecError naming the shard.
    """
    out = Path(out)
    if out.exists() and out.stat().st_size > 0:
        raise SpecError(out, "", "merge output exists and is not empty; choose a new file")
    reads = []
    for s in shards:
        s = Path(s)
        if not s.is_file():
            raise SpecError(s, "", "no such results file")
        r = read_store(s)
        if r.legacy and r.traces and not adopt_legacy:
            raise SpecError(s, "", "unauthenticated (legacy) shard: its lines cannot be verified; pass "
                            "--adopt-legacy to sign its traces as yours")
        reads.append(r)
    seen: set[tuple[str, str]] = set()
    lines, runs, left_out, legacy_traces, legacy_from = [], [], [], [], []
    dups = 0
    for r in reads:
        left_out += [f"{r.path}: {x}" for x in r.rejected]
        text = r.path.read_text().splitlines()
        for t, ln in zip(r.traces, r.line_numbers):
            k = (t.evaluation.solution_hash or t.solution, t.workload.uuid)
            if k in seen:
                dups += 1
                continue
            seen.add(k)
            if r.legacy:
                legacy_traces.append(t)
            else:
                lines.append(text[ln - 1])
        if r.legacy and r.traces:
            legacy_from.append(str(r.path))
        if r.manifest:
            runs += [e for e in r.manifest.get("runs", []) if isinstance(e, dict)]
    out.parent.mkdir(parents=True, exist_ok=True)
    mp = manifest.manifest_path(out)
    mp.write_text(json.dumps({"manifest_schema": manifest.MANIFEST_SCHEMA, "results": out.name,
                              "merged_from": [str(r.path) for r in reads], "runs": runs},
                             indent=1, allow_nan=False) + "\n")
    with open(out, "w") as f:
        f.write("".join(x + "\n" for x in lines))
        f.flush()
        os.fsync(f.fileno())
    written = len(lines)
    if legacy_traces:
        _RUNS.pop(str(out.resolve()), None)
        written += append_traces(out, legacy_traces, config={"adopted_legacy_shards": legacy_from},
                                 _keep_manifest=True)
    return {"written": written, "duplicates": dups, "left_out": left_out}
