"""Agreement of solbench's solar-mode T_SOL with SOL-ExecBench's official sol_ms (CPU only).

For every workload of every problem under a dataset root (default: the dev set,
../shared/datasets/sol-execbench-dev; any root whose problems sit in <subset>/<problem>/ or
<problem>/ directories), count the reference's work once, price it with model="solar" and
model="refined" on the B200_SOLAR spec (SOLAR's 1.5 GHz-lock constants), and compare with the
official figure, which is read from nothing but the problem's metadata.json
(sol.per_workload[i].sol_ms).

Prints, and writes to <out>/sol_agreement.md (rows in <out>/sol_agreement.json):
* per subset: workloads, those with a bound, those with an official figure, the share within
  0.9-1.1 of the official figure and the median ratio ours/official over the rows with both
  (solar mode, then refined mode);
* the same share with the rows whose official figure is documented as not SOLAR's convention
  (bench/sol_official_notes.json, kind "official", rows named by workload uuid) set aside, said
  as such;
* the problems and rows without an official figure, and why (no `sol` in metadata.json, a
  null or non-numeric sol_ms, a malformed metadata.json: that one is also printed to stderr as
  a one-line error naming the file and the field); they are counted, and kept out of the
  agreement columns and the worst list;
* the worst 15 problems (most rows with an official figure outside 0.9-1.1 or without a
  bound) and why each differs (the notes file; "no note" when none).

A malformed metadata.json, a problem that fails to load or a counting error never stops the
run: the problem's rows carry the error and every other problem is counted.

    python bench/sol_agreement.py [--data DIR] [--out bench/results] [--jobs 2] [--only SUBSTR]
        [--time-limit S] [--merge] [--render-only] [--notes FILE]

--merge (with --only): recount only those problems and replace their rows in the existing
sol_agreement.json. --render-only: re-render the tables from sol_agreement.json.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

DEFAULT_DATA = ROOT.parent / "shared" / "datasets" / "sol-execbench-dev"
DEFAULT_NOTES = ROOT / "bench" / "sol_official_notes.json"
#: the issue's agreement band (ours / official)
BAND = (0.9, 1.1)
WORST = 15


#: per-workload counting budget (s): a reference that loops in Python over a large real
#: workload is reported as an error rather than stalling the bench
TIME_LIMIT_S = 60
#: address-space cap of each shard process (GiB)
SHARD_MEMORY_GB = 7


class CountTimeout(BaseException):  # not Exception: must not be caught as a failed fake run
    pass


def _timeout(signum, frame):
    raise CountTimeout(f"counting took more than {TIME_LIMIT_S} s")


def _set_time_limit(s: int) -> None:
    global TIME_LIMIT_S
    TIME_LIMIT_S = s


class MetadataError(ValueError):
    """A problem's metadata.json whose `sol` cannot be read. The message is one line naming the
    file and the field: ``.../L1/033_x/metadata.json: sol.per_workload: expected a list, got str``."""


#: the reason every row of a problem whose metadata.json has no `sol` gives (said once)
NO_SOL = "no official sol_ms (metadata.json has no `sol`)"


def _type(x) -> str:
    return "null" if x is None else type(x).__name__


@dataclass
class Official:
    """The official figures of one problem's workloads, by index, and why a workload has none.

    ``problem`` is set when no workload of the problem has a figure for one reason (no `sol`, a
    malformed metadata.json, sol.available false, a dummy sol): said once, not per row.
    ``error`` is True when that reason is a malformed metadata.json (an error, not a gap)."""

    figures: list[float | None] = field(default_factory=list)
    reasons: list[str | None] = field(default_factory=list)
    problem: str | None = None
    error: bool = False
    #: each entry's ``axes`` by index (None where the entry gives none)
    axes: list[dict | None] = field(default_factory=list)

    def at(self, i: int, axes: dict | None = None) -> tuple[float | None, str | None]:
        """(figure, None) for workload ``i``, or (None, why it has none). ``axes``: the
        workload's own; when given, an entry whose axes disagree with them on a shared key is
        for another workload (workload.jsonl reordered against metadata.json): the figure is
        then the one entry whose axes agree, and None when no entry or several do."""
        if self.problem:
            return None, self.problem
        if axes is not None and i < len(self.axes) and not _same_axes(self.axes[i], axes):
            hits = [j for j, a in enumerate(self.axes) if a is not None and _same_axes(a, axes)]
            if len(hits) != 1:
                return None, (f"the official entry of index {i} is for axes {_shown(self.axes[i])}, not this "
                              f"workload's {_shown(axes)}, and {len(hits)} entries match those")[:300]
            i = hits[0]
        if i < len(self.figures) and self.figures[i] is not None:
            return self.figures[i], None
        if i < len(self.reasons) and self.reasons[i]:
            return None, self.reasons[i]
        return None, "no entry with this index in sol.per_workload"


def _same_axes(a: dict | None, b: dict) -> bool:
    """Whether two axes dicts agree on every key both give (an entry may list derived axes the
    workload does not, or the reverse)."""
    return a is None or all(a[k] == b[k] for k in a.keys() & b.keys())


def _shown(axes: dict | None) -> str:
    return json.dumps(axes, sort_keys=True) if axes is not None else "(none)"


def official_info(meta, where: str = "metadata.json") -> Official:
    """The official sol_ms of each workload (ms), by index (sol.per_workload[i].index, else the
    entry's position), from a problem's metadata.json content, and for each workload without
    one the reason: metadata.json has no `sol` (NO_SOL), sol.available is false, sol.sol_is_dummy
    is true, no entry has the workload's index, or the entry's sol_ms is null, not a number, not
    finite or not positive.

    Raises:
        MetadataError: the content is malformed (``meta`` or `sol` not an object, sol.per_workload
            not a list, an entry not an object, an index not a non-negative integer, repeated, or
            not below num_workloads, num_workloads not a non-negative integer); the one-line
            message names ``where`` and the field.
    """
    def bad(fld: str, what: str) -> MetadataError:
        return MetadataError(f"{where}: {fld}: {what}")

    if not isinstance(meta, dict):
        raise bad("(top level)", f"expected an object, got {_type(meta)}")
    nw = meta.get("num_workloads")
    if nw is not None and (isinstance(nw, bool) or not isinstance(nw, int) or nw < 0):
        raise bad("num_workloads", f"expected a non-negative integer, got {_type(nw)} {nw!r}")
    sol = meta.get("sol")
    if sol is None:
        return Official([None] * (nw or 0), [NO_SOL] * (nw or 0), problem=NO_SOL)
    if not isinstance(sol, dict):
        raise bad("sol", f"expected an object, got {_type(sol)}")
    per = sol.get("per_workload")
    if per is None:
        per = []
    if not isinstance(per, list):
        raise bad("sol.per_workload", f"expected a list, got {_type(per)}")
    if sol.get("available", True) is False or sol.get("sol_is_dummy"):
        why = ("sol.available is false" if sol.get("available", True) is False
               else "sol.sol_is_dummy is true (the figures are placeholders)")
        n = nw if nw is not None else len(per)
        return Official([None] * n, [why] * n, problem=f"no official sol_ms ({why})")
    entries: dict[int, object] = {}
    axes_of: dict[int, dict] = {}
    for pos, w in enumerate(per):
        if not isinstance(w, dict):
            raise bad(f"sol.per_workload[{pos}]", f"expected an object, got {_type(w)}")
        i = w.get("index", pos)
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise bad(f"sol.per_workload[{pos}].index", f"expected a non-negative integer, got {_type(i)} {i!r}")
        if nw is not None and i >= nw:
            raise bad(f"sol.per_workload[{pos}].index", f"{i} is not below num_workloads ({nw})")
        if i in entries:
            raise bad(f"sol.per_workload[{pos}].index", f"{i} repeated")
        entries[i] = w.get("sol_ms")
        ax = w.get("axes")
        if ax is not None and not isinstance(ax, dict):
            raise bad(f"sol.per_workload[{pos}].axes", f"expected an object, got {_type(ax)}")
        if ax is not None:
            axes_of[i] = ax
    n = max([nw or 0, len(per)] + [i + 1 for i in entries])
    figures: list[float | None] = [None] * n
    reasons: list[str | None] = ["no entry with this index in sol.per_workload"] * n
    for i, v in entries.items():
        if v is None:
            reasons[i] = "sol_ms is null"
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            reasons[i] = f"sol_ms is not a number ({_type(v)} {v!r})"[:120]
        elif not math.isfinite(v) or v <= 0:
            reasons[i] = f"sol_ms is not a positive number ({v!r})"
        else:
            figures[i], reasons[i] = float(v), None
    return Official(figures, reasons, axes=[axes_of.get(i) for i in range(n)])


def official_figures(meta, where: str = "metadata.json") -> list[float | None]:
    """Official sol_ms of each workload (ms), by index, from a problem's metadata.json dict;
    None where the figure is absent, not a positive number, or marked a dummy (official_info
    gives the reasons).

    Raises:
        MetadataError: malformed content (see official_info).
    """
    return official_info(meta, where).figures


def read_official(pdir: Path) -> tuple[str, Official]:
    """(subset, official figures) of a problem directory; never raises: a metadata.json that
    cannot be read, is not valid JSON or is malformed gives no figures, with the one-line error
    as the problem's reason (``Official.error`` set)."""
    path = pdir / "metadata.json"
    subset = pdir.parent.name
    try:
        meta = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        what = f"not valid JSON: {e}" if isinstance(e, ValueError) else f"cannot be read: {e}"
        return subset, Official(problem=f"{path}: {what}".replace("\n", " "), error=True)
    if isinstance(meta, dict) and isinstance(meta.get("subset"), str) and meta["subset"]:
        subset = meta["subset"]
    try:
        return subset, official_info(meta, str(path))
    except MetadataError as e:
        return subset, Official(problem=str(e), error=True)


def workload_uuids(pdir: Path) -> list[str | None]:
    """The uuid of each line of a problem's workload.jsonl, in order (None for a line without
    one); [] when the file cannot be read. Never raises."""
    try:
        lines = [ln for ln in (pdir / "workload.jsonl").read_text().splitlines() if ln.strip()]
    except (OSError, UnicodeDecodeError):
        return []
    out: list[str | None] = []
    for ln in lines:
        try:
            w = json.loads(ln)
        except ValueError:
            w = None
        out.append(w.get("uuid") if isinstance(w, dict) and isinstance(w.get("uuid"), str) else None)
    return out


def _row(pdir: Path, subset: str, i: int, uuid, off: Official, axes: dict | None = None) -> dict:
    fig, why = off.at(i, axes)
    row = {"problem": pdir.name, "subset": subset, "index": i, "uuid": uuid, "official_ms": fig}
    if why:
        row["official_why"] = why
        if off.error:
            row["official_error"] = True
    return row


def uncounted_rows(pdir: str | Path, error: str) -> list[dict]:
    """One row per workload of a problem that was not counted (its definition failed to load,
    or its shard process died), each with ``error``; the official figures and the workloads'
    uuids are read as far as they can be. Never raises."""
    pdir = Path(pdir)
    subset, off = read_official(pdir)
    uuids = workload_uuids(pdir)
    n = max(len(uuids), len(off.figures))
    if n == 0:  # nothing to name a row by: one row for the problem, left out of the subset tables
        r = _row(pdir, subset, -1, None, off)
        r["error"] = error
        return [r]
    rows = []
    for i in range(n):
        r = _row(pdir, subset, i, uuids[i] if i < len(uuids) else None, off)
        r["error"] = error
        rows.append(r)
    return rows


def problem_dirs(root: Path) -> list[Path]:
    """Problem directories under a dataset root: <subset>/<problem>/metadata.json or
    <problem>/metadata.json (a root that is itself a problem counts as one)."""
    if (root / "metadata.json").exists():
        return [root]
    found = {p.parent for pat in ("*/metadata.json", "*/*/metadata.json") for p in root.glob(pat)}
    return sorted(found)


def problem_rows(pdir: str) -> list[dict]:
    import torch

    torch.set_num_threads(1)
    from solbench.sol import bound_from_counts, count_workload, load_hardware
    from solbench.spec import load_problem

    pdir = Path(pdir)
    subset, off = read_official(pdir)
    hw = load_hardware("B200_SOLAR")
    rows = []
    try:
        problem = load_problem(pdir)
    except Exception as e:  # noqa: BLE001 - report, never stop the bench
        return uncounted_rows(pdir, f"load: {type(e).__name__}: {e}")
    timeouts = 0
    for i, w in enumerate(problem.workloads):
        row = _row(pdir, subset, i, w.uuid, off, w.axes)
        row["axes"] = w.axes
        if timeouts >= 2:
            row["error"] = "skipped: two earlier workloads of this problem hit the counting time limit"
            rows.append(row)
            continue
        t0 = time.perf_counter()
        signal.signal(signal.SIGALRM, _timeout)
        signal.alarm(TIME_LIMIT_S)
        try:
            c = count_workload(problem, w, max_real_bytes=2e9)
            signal.alarm(0)
            for model in ("solar", "refined"):
                b = bound_from_counts(c, hw, model, allow_tf32=bool(problem.definition.allow_tf32),
                                      workload_uuid=w.uuid, axes=w.axes)
                row[model] = {"sol_ms": b.sol_ms, "bottleneck": b.bottleneck, "terms_ms": b.terms_ms,
                              "bytes_model": b.bytes_model}
            row["solar_macs"] = b.solar_macs
            if c.solar_graph is not None:
                row["graph_macs"] = c.solar_graph.macs()
                row["graph_elems"] = c.solar_graph.fused_elements()
            row["flops"] = b.flops
            row["bytes_fused"] = c.bytes_fused
            row["bytes_unfused"] = c.bytes_unfused
            row["unknown_ops"] = dict(c.unknown_ops)
            row["mode"] = c.mode
            row["synthesized"] = c.synthesized
            row["attention"] = [{k: a[k] for k in ("L", "S", "causal", "gqa")} for a in c.attention_calls[:1]]
        except CountTimeout as e:
            row["error"] = f"CountTimeout: {e}"
            timeouts += 1
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        finally:
            signal.alarm(0)
        row["count_s"] = round(time.perf_counter() - t0, 3)
        rows.append(row)
    return rows


def _ratio(r: dict, model: str) -> float | None:
    if model in r and r.get("official_ms"):
        return r[model]["sol_ms"] / r["official_ms"]
    return None


def _in_band(x: float) -> bool:
    return BAND[0] <= x <= BAND[1]


#: note kinds (bench/sol_official_notes.json); only "official" rows are set aside
KINDS = ("official", "model", "source", "ours", "rounding", "unexplained")
SET_ASIDE_KINDS = ("official",)


def load_notes(path: Path) -> dict:
    """Per-problem notes (bench/sol_official_notes.json): name -> {kind, rows, why} (and
    beyond_dev: true for a problem the dev set lacks). ``rows`` is "all" or a list of workload
    uuids (never indices: a reordered workload file must not move a note to other rows).
    {} when the file does not exist.

    Raises:
        ValueError: the file is not valid JSON, or a note has an unknown kind or rows that are
            neither "all" nor a list of uuid strings (the message names the file and the note).
    """
    if not path.exists():
        return {}
    notes = json.loads(path.read_text()).get("problems", {})
    for name, n in notes.items():
        if n.get("kind") not in KINDS:
            raise ValueError(f"{path}: problems.{name}.kind: {n.get('kind')!r} is not one of {', '.join(KINDS)}")
        rows = n.get("rows")
        if rows != "all" and not (isinstance(rows, list) and all(isinstance(u, str) for u in rows)):
            raise ValueError(f"{path}: problems.{name}.rows: expected \"all\" or a list of workload uuids, "
                             f"got {rows!r}"[:300])
    return notes


def set_aside(r: dict, notes: dict) -> bool:
    """Is this row's official figure documented as not SOLAR's convention (a note of kind
    "official" naming the row's workload uuid, or all rows)?"""
    n = notes.get(r["problem"])
    if not n or n.get("kind") not in SET_ASIDE_KINDS:
        return False
    return n.get("rows") == "all" or (r.get("uuid") is not None and r["uuid"] in n.get("rows", []))


def subset_table(rows: list[dict], model: str, notes: dict) -> list[dict]:
    """One line per subset and one for all: workloads, those with a bound, those with an
    official figure, the share within BAND and the median ratio over the rows with both, and
    the share within BAND with the set-aside rows left out."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if r["index"] < 0:
            continue
        groups.setdefault(r["subset"], []).append(r)
    out = []
    for name, rs in [*sorted(groups.items()), ("all", [r for r in rows if r["index"] >= 0])]:
        ratios = [x for x in (_ratio(r, model) for r in rs) if x is not None]
        kept = [x for r in rs if not set_aside(r, notes) for x in [_ratio(r, model)] if x is not None]
        out.append({"subset": name, "workloads": len(rs), "bound": sum(model in r for r in rs),
                    "official": sum(bool(r.get("official_ms")) for r in rs), "compared": len(ratios),
                    "within": sum(map(_in_band, ratios)) / len(ratios) if ratios else None,
                    "median": statistics.median(ratios) if ratios else None,
                    "set_aside": len(ratios) - len(kept),
                    "within_kept": sum(map(_in_band, kept)) / len(kept) if kept else None})
    return out


def _spans(ix: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    out, ix = [], sorted(ix)
    i = 0
    while i < len(ix):
        j = i
        while j + 1 < len(ix) and ix[j + 1] == ix[j] + 1:
            j += 1
        out.append(str(ix[i]) if i == j else f"{ix[i]}-{ix[j]}")
        i = j + 1
    return ", ".join(out)


def missing_official(rs: list[dict]) -> list[str]:
    """Why rows of one problem have no official figure, one line per reason: the reason alone
    when it holds for every row (said once), else 'rows 3, 7: <reason>'."""
    by: dict[str, list[int]] = {}
    for r in rs:
        if not r.get("official_ms"):
            by.setdefault(r.get("official_why") or "no official sol_ms", []).append(r["index"])
    n = len(rs)
    return [why if len(ix) == n else f"row{'s' if len(ix) > 1 else ''} {_spans(ix)}: {why}"
            for why, ix in by.items()]


def by_problem(rows: list[dict], model: str) -> list[dict]:
    """One entry per problem: workloads (n), counted (with a bound), official (with an official
    figure), compared (both), in_band, out (rows with an official figure outside BAND or without a
    bound), median/min/max ratio, why rows lack an official figure (no_official), first error."""
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault((r["subset"], r["problem"]), []).append(r)
    res = []
    for (sub, prob), rs in sorted(out.items()):
        rat = [x for x in (_ratio(r, model) for r in rs) if x is not None]
        errs = [r["error"] for r in rs if "error" in r]
        real = [r for r in rs if r["index"] >= 0]
        official = sum(bool(r.get("official_ms")) for r in real)
        in_band = sum(map(_in_band, rat))
        res.append({"subset": sub, "problem": prob, "n": len(real), "counted": sum(model in r for r in real),
                    "official": official, "compared": len(rat), "in_band": in_band,
                    "out": official - in_band,
                    "median": statistics.median(rat) if rat else None,
                    "min": min(rat) if rat else None, "max": max(rat) if rat else None,
                    "bottlenecks": sorted({r[model]["bottleneck"] for r in rs if model in r}),
                    "modes": sorted({r.get("mode", "-") for r in rs}),
                    "unknown_ops": sorted({k for r in rs for k in r.get("unknown_ops", {})}),
                    "no_official": missing_official(rs),
                    "official_error": next((r["official_why"] for r in rs if r.get("official_error")), None),
                    "error": errs[0] if errs else None})
    return res


def worst(problems: list[dict], k: int = WORST) -> list[dict]:
    """The k problems with most rows that disagree (an official figure, and ours outside BAND
    or no bound at all), then the median furthest from 1 (in log terms). Rows without an
    official figure are not disagreement and a problem with none is never listed."""
    def key(p):
        dev = abs(math.log(p["median"])) if p["median"] else math.inf
        return (-p["out"], -dev)
    return [p for p in sorted(problems, key=key) if p["out"] > 0][:k]


t0_global = time.time()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default=None, help="only problems whose path contains one of these (comma-separated)")
    ap.add_argument("--shard-out", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("dirs", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--render-only", action="store_true", help="re-render the .md from the .json")
    ap.add_argument("--time-limit", type=int, default=TIME_LIMIT_S, help="per-workload counting budget (s)")
    ap.add_argument("--merge", action="store_true", help="with --only: replace those problems' rows "
                    "in the existing sol_agreement.json")
    ap.add_argument("--notes", type=Path, default=DEFAULT_NOTES,
                    help="per-problem notes on official-figure differences (JSON)")
    args = ap.parse_args(argv)
    _set_time_limit(args.time_limit)
    if args.render_only:
        res = json.loads((args.out / "sol_agreement.json").read_text())
        res["by_problem"] = {m: by_problem(res["rows"], m) for m in ("solar", "refined")}
        md = render_md(res, load_notes(args.notes))
        (args.out / "sol_agreement.md").write_text(md)
        print(md.split("\n## Per problem")[0])
        return 0
    if args.shard_out:  # worker: count the given problem dirs, append rows as JSON lines
        # cap the address space so a reference that needs more memory on the real CPU path
        # fails with an allocation error (recorded) instead of drawing the OOM killer
        import resource

        cap = int(SHARD_MEMORY_GB * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        for d in args.dirs:
            t1 = time.time()
            try:
                got = problem_rows(d)
            except Exception as e:  # noqa: BLE001 - one problem's failure must not lose the shard's others
                got = uncounted_rows(d, f"{type(e).__name__}: {str(e)[:300]}")
            with open(args.shard_out, "a") as fh:
                for r in got:
                    fh.write(json.dumps(r, allow_nan=False) + "\n")
            print(f"[{time.time() - t0_global:6.0f}s] {Path(d).name}: {len(got)} workloads, "
                  f"{sum('error' in r for r in got)} errors ({time.time() - t1:.0f} s)", flush=True)
        return 0
    if not args.data.exists():
        print(f"dataset not found: {args.data}", file=sys.stderr)
        return 2
    pdirs = [str(p) for p in problem_dirs(args.data)]
    if args.only:
        pdirs = [p for p in pdirs if any(o in p for o in args.only.split(","))]
    t0 = time.time()
    rows: list[dict] = []
    # one process per shard (no executor: a worker killed by the OOM killer must not hang the
    # bench); each shard runs problems in order and writes JSON lines to a temp file
    import subprocess
    import tempfile

    import shutil

    tmpdir = Path(tempfile.mkdtemp(prefix="sol_agreement_"))
    try:
        shards = [pdirs[i::args.jobs] for i in range(args.jobs)]
        procs = []
        for i, shard in enumerate(shards):
            f = tmpdir / f"shard{i}.jsonl"
            procs.append((subprocess.Popen([sys.executable, __file__, "--shard-out", str(f),
                                            "--time-limit", str(args.time_limit), *shard]), f, shard))
        for proc, f, shard in procs:
            proc.wait()
        done = set()
        for proc, f, shard in procs:
            if f.exists():
                for line in f.read_text().splitlines():
                    r = json.loads(line)
                    rows.append(r)
                    done.add(r["problem"])
            for p in shard:
                if Path(p).name not in done:  # every workload of a problem the shard never reached
                    rows += uncounted_rows(p, f"shard process exited {proc.returncode}")
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    for msg in sorted({r["official_why"] for r in rows if r.get("official_error")}):
        print(f"error: {msg}", file=sys.stderr)
    rows.sort(key=lambda r: (r["subset"], r["problem"], r["index"]))
    merged_note = None
    if args.merge:
        prev = json.loads((args.out / "sol_agreement.json").read_text())
        redone = {r["problem"] for r in rows}
        rows = sorted([r for r in prev["rows"] if r["problem"] not in redone] + rows,
                      key=lambda r: (r["subset"], r["problem"], r["index"]))
        merged_note = (f"{len(redone)} problem(s) recounted with --time-limit {args.time_limit} and merged: "
                       + ", ".join(sorted(redone)))
        t0 -= prev.get("elapsed_s", 0)
    result = {
        "hardware": "B200_SOLAR", "data": str(args.data), "workloads": len(rows),
        "errors": sum("error" in r for r in rows), "elapsed_s": round(time.time() - t0, 1),
        "command": "python bench/sol_agreement.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "by_problem": {m: by_problem(rows, m) for m in ("solar", "refined")},
        "rows": rows,
    }
    if merged_note:
        result["merged"] = merged_note
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sol_agreement.json").write_text(json.dumps(result, indent=1, allow_nan=False))
    md = render_md(result, load_notes(args.notes))
    (args.out / "sol_agreement.md").write_text(md)
    print(md.split("\n## Per problem")[0])
    return 0


def _f(x, d=3):
    return "-" if x is None else f"{x:.{d}f}"


def _pct(x):
    return "-" if x is None else f"{x:.1%}"


def render_md(res: dict, notes: dict) -> str:
    """The report: per-subset tables (solar, refined), the problems and rows without an
    official figure and why, the worst problems with their notes, and per-problem tables."""
    lo, hi = BAND
    out = ["# SOL agreement with the official SOL-ExecBench B200 sol_ms", "",
           f"Dataset: `{res['data']}`. Workloads: {res['workloads']}, counting errors: {res['errors']}, "
           f"hardware spec: {res['hardware']}, {res['elapsed_s']} s wall (counting on the CPU)."
           + (f" {res['merged']}." if res.get("merged") else ""),
           "", f"Command: `{res.get('command', 'python bench/sol_agreement.py')}`", ""]
    for model in ("solar", "refined"):
        tab = subset_table(res["rows"], model, notes)
        out += [f"## model={model}: ours / official", "",
                f"| subset | workloads | with a bound | with an official figure | within {lo}-{hi} of official "
                f"(rows with both) | median ratio | rows set aside (official not SOLAR's convention) "
                f"| within {lo}-{hi}, those set aside |",
                "|---|---|---|---|---|---|---|---|"]
        for t in tab:
            out.append(f"| {t['subset']} | {t['workloads']} | {t['bound']} | {t['official']} | "
                       f"{_pct(t['within'])} of {t['compared']} | {_f(t['median'])} | {t['set_aside']} | "
                       f"{_pct(t['within_kept'])} |")
        out.append("")
    out += ["Solar mode follows upstream SOLAR's conventions (docs/sol-model.md, 'solar mode'); refined "
            "mode is solbench's own lower bound and is not meant to agree. Rows set aside are those a "
            "note of kind \"official\" in bench/sol_official_notes.json names (by workload uuid): the "
            "official figure there is a hand model, another pipeline, or belongs to other workloads (each "
            "note gives the hand count); the first column counts them like every other row. Notes of kind "
            "\"model\" (the official row follows another of upstream SOLAR's models than the layer walk "
            "solar mode follows), \"source\", \"ours\", \"rounding\" and \"unexplained\" explain a "
            "difference without setting rows aside.", ""]
    probs = res["by_problem"]["solar"]
    lacking = [p for p in probs if p["no_official"]]
    if lacking:
        out += ["## Without an official figure", "",
                "Counted like every other workload (the bound columns), left out of the agreement "
                "columns and of the worst problems.", ""]
        for p in lacking:
            out.append(f"* {p['subset']}/{p['problem']} ({p['official']} of {p['n']} rows with one): "
                       + "; ".join(p["no_official"]))
        out.append("")
    bad = worst(probs)
    n_any = sum(p["out"] > 0 for p in probs)
    out += [f"## Worst problems (solar mode): the {WORST} with the most rows outside {lo}-{hi} of the "
            f"official figure ({n_any} have any), and why each differs", "",
            f"| subset | problem | within {lo}-{hi} (of rows with an official figure) | median | min | max "
            "| note kind | why |",
            "|---|---|---|---|---|---|---|---|"]
    for p in bad:
        n = notes.get(p["problem"], {})
        why = n.get("why") or ("counting error: " + p["error"] if p["error"] else "no note: not analysed")
        out.append(f"| {p['subset']} | {p['problem']} | {p['in_band']}/{p['official']} | {_f(p['median'])} | "
                   f"{_f(p['min'])} | {_f(p['max'])} | {n.get('kind', '-')} | {why} |")
    for m in ("solar", "refined"):
        out += ["", f"## Per problem, model={m}", "",
                f"| subset | problem | counted | with an official figure | within {lo}-{hi} | median | min | max "
                "| bottleneck | counting | unknown ops | error |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for p in res["by_problem"][m]:
            why = "; ".join(p["no_official"])
            err = p["error"] or (why if why.startswith("no official") or not why else "no official sol_ms: " + why)
            out.append(f"| {p['subset']} | {p['problem']} | {p['counted']}/{p['n']} | {p['official']}/{p['n']} | "
                       f"{p['in_band']}/{p['compared']} | {_f(p['median'])} | {_f(p['min'])} | {_f(p['max'])} | "
                       f"{','.join(p['bottlenecks'])} | {','.join(p['modes'])} | "
                       f"{' '.join(p['unknown_ops'])[:60]} | {err[:120]} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
