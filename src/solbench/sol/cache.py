"""The on-disk cache of counted work (:class:`Counts`), one JSON file per workload.

Counting does not depend on hardware or model, so a workload counted once need not be
counted again until what the count derives from changes. The key is the SHA-256 of: the
counting code (every source file of ``solbench.sol``, ``solbench.spec`` and
``solbench.inputs``), the torch version, the problem (kind, definition with its reference
source, KernelBench init arguments and seed), the workload (uuid, axes, every input
description) and, for each safetensors input, its blob's path, size and modification time.
Any change to one of these is a miss.

The evaluation pipeline and ``solbench sol`` read and fill :func:`default_cache_dir` unless
it is turned off (``SOLBENCH_SOL_CACHE=off``), so a problem's second evaluation counts nothing.
The files decide bounds, so an entry is trusted only when it carries a MAC
(HMAC-SHA256, RFC 2104) under the user's key over its cache key and its counts: a candidate that
writes into the folder (a planted entry would be a planted T_SOL) cannot make a hit without the
key, which lives where the sandbox hides it (``solbench.store.auth``). Entries are plain JSON
(never unpickled); one that does not parse as a :class:`Counts`, or whose MAC is missing or
wrong, is a miss.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from .. import paths
from .counts import Counts, SolarTotals

_CODE_HASH: str | None = None
#: Counts fields that are defaultdict(float) while counting
_FLOAT_DICTS = ("mma_flops", "mma_flops_full", "mma_by_precision", "cuda_by_precision", "cuda_flops")


def default_cache_dir() -> Path | None:
    """Where counts are cached by default: ``$SOLBENCH_SOL_CACHE`` when set (None when it is
    ``off``/``0``/``none``/empty: no cache), else ``$XDG_CACHE_HOME/solbench/sol-counts``, else
    ``~/.cache/solbench/sol-counts`` (the XDG Base Directory Specification's cache home)."""
    return paths.sol_cache_dir()


def _torch_version() -> str:
    """The installed torch's version, read from its package metadata: the same string in a
    process that counted (torch imported) and one that only reads the cache (torch never
    imported, see :mod:`solbench.sol.counts`)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:  # a torch without distribution metadata (a source tree)
        import torch

        return torch.__version__


def code_hash() -> str:
    """SHA-256 of the source of every module a count depends on (see module docstring)."""
    global _CODE_HASH
    if _CODE_HASH is None:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256(_torch_version().encode())
        for sub in ("sol", "spec", "inputs"):
            for f in sorted((root / sub).rglob("*.py")):
                h.update(f.relative_to(root).as_posix().encode())
                h.update(f.read_bytes())
        _CODE_HASH = h.hexdigest()
    return _CODE_HASH


def _blob_stats(problem, workload) -> list:
    from ..spec.workload import SafetensorsInput

    out = []
    for name, src in sorted(workload.inputs.items()):
        if not isinstance(src, SafetensorsInput):
            continue
        try:
            from ..spec.problem import find_blob

            path = find_blob(problem, src.path)
        except Exception:  # noqa: BLE001 - as counting does: an unresolvable blob is synthesised
            path = None
        if path is None:
            out.append([name, None])
            continue
        st = os.stat(path)
        out.append([name, str(Path(path).resolve()), st.st_size, st.st_mtime_ns])
    return out


def workload_key(problem, workload) -> str:
    """The cache key of ``workload`` of ``problem`` (hex SHA-256; see module docstring)."""
    d = problem.definition
    blob = {
        "code": code_hash(), "kind": problem.kind,
        "definition": d.model_dump(mode="json") if hasattr(d, "model_dump") else repr(d),
        "init_args": repr(getattr(problem, "init_args", ())), "init_seed": getattr(problem, "init_seed", None),
        "workload": workload.model_dump(mode="json") if hasattr(workload, "model_dump") else repr(workload),
        "blobs": _blob_stats(problem, workload),
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=repr).encode()).hexdigest()


def counts_to_json(c: Counts) -> dict[str, Any]:
    """``c`` as plain JSON values (sets sorted, tuples as lists); :func:`counts_from_json`
    inverts it exactly (floats round-trip through ``repr``)."""
    st = c.solar()  # the priced figures, not the graph (see SolarTotals)
    out = {k: dict(getattr(c, k)) for k in _FLOAT_DICTS}
    out.update({
        "output_writes": [list(x) for x in c.output_writes], "sfu_ops": c.sfu_ops,
        "bytes_unfused": c.bytes_unfused, "inputs": [list(x) for x in c.inputs],
        "outputs": [list(x) for x in c.outputs], "op_counts": dict(c.op_counts),
        "unknown_ops": dict(c.unknown_ops), "attention_calls": list(c.attention_calls),
        "dtypes_seen": sorted(c.dtypes_seen), "mode": c.mode, "real_tensors": c.real_tensors,
        "synthesized": list(c.synthesized), "notes": list(c.notes),
        "solar_totals": None if st is None else [st.macs, st.fused_elements, st.weight_root_elements,
                                                   st.scaled_weight_root_elements],
        "source_quant": sorted(c.source_quant), "fake_error": c.fake_error,
    })
    return out


def counts_from_json(d: dict[str, Any]) -> Counts:
    """The :class:`Counts` that :func:`counts_to_json` wrote. Raises KeyError / TypeError /
    ValueError on anything else."""
    c = Counts()
    for k in _FLOAT_DICTS:
        dd = defaultdict(float)
        dd.update({str(a): float(b) for a, b in d[k].items()})
        setattr(c, k, dd)
    c.output_writes = [(int(n), float(b), str(cls), float(w), a) for n, b, cls, w, a in d["output_writes"]]
    c.sfu_ops = float(d["sfu_ops"])
    c.bytes_unfused = float(d["bytes_unfused"])
    c.inputs = [(str(nm), int(n), float(b), str(cls), float(r)) for nm, n, b, cls, r in d["inputs"]]
    c.outputs = [(int(n), float(b), str(cls)) for n, b, cls in d["outputs"]]
    c.op_counts = Counter({str(k): int(v) for k, v in d["op_counts"].items()})
    c.unknown_ops = Counter({str(k): int(v) for k, v in d["unknown_ops"].items()})
    c.attention_calls = [dict(x) for x in d["attention_calls"]]
    c.dtypes_seen = set(d["dtypes_seen"])
    c.mode = str(d["mode"])
    c.real_tensors = bool(d["real_tensors"])
    c.synthesized = [str(x) for x in d["synthesized"]]
    c.notes = [str(x) for x in d["notes"]]
    if d["solar_totals"] is not None:
        macs, fused, wre, swre = (int(v) for v in (list(d["solar_totals"]) + [0])[:4])
        c.solar_totals = SolarTotals(macs=macs, fused_elements=fused, weight_root_elements=wre,
                                     scaled_weight_root_elements=swre)
    c.source_quant = set(d["source_quant"])
    c.fake_error = d["fake_error"]
    return c


class CountsCache:
    """Counts on disk under ``root`` (created on first write), one ``<key>.json`` each.

    ``key``: the MAC key (bytes) entries are signed and checked with; None keeps entries
    unsigned and trusts any that parses (``solbench sol --cache DIR`` on a folder of one's own).
    An entry signed under another key, or unsigned, is a miss for a keyed cache."""

    def __init__(self, root: str | Path, key: bytes | None = None):
        self.root = Path(root)
        self.key = key
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def _mac(self, wkey: str, body: str) -> str:
        return hmac.new(self.key, wkey.encode() + b"\n" + body.encode(), hashlib.sha256).hexdigest()

    def get(self, problem, workload) -> Counts | None:
        """The cached count of ``workload``, or None (absent, unreadable, or not signed with
        this cache's key: a miss)."""
        wkey = workload_key(problem, workload)
        try:
            entry = json.loads(self._path(wkey).read_text())
            if self.key is not None:
                body = json.dumps(entry["counts"], sort_keys=True, allow_nan=False)
                if not hmac.compare_digest(str(entry.get("mac", "")), self._mac(wkey, body)):
                    raise ValueError("MAC mismatch")
            c = counts_from_json(entry["counts"] if "counts" in entry else entry)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self.misses += 1
            return None
        self.hits += 1
        return c

    def put(self, problem, workload, counts: Counts) -> None:
        """Store ``counts`` (atomically: a reader sees the old entry or the new one). Raises
        OSError when the folder cannot be written."""
        wkey = workload_key(problem, workload)
        p = self._path(wkey)
        p.parent.mkdir(parents=True, exist_ok=True)
        data = counts_to_json(counts)
        entry: dict[str, Any] = {"counts": data}
        if self.key is not None:
            entry["mac"] = self._mac(wkey, json.dumps(data, sort_keys=True, allow_nan=False))
        tmp = p.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entry, allow_nan=False))
        os.replace(tmp, p)
