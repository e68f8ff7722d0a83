"""Agreement of solbench's solar-mode T_SOL with SOL-ExecBench's official sol_ms (CPU only).

For every workload of every problem under a dataset root (default: the dev set,
../shared/datasets/sol-execbench-dev; any root whose problems sit in <subset>/<problem>/ or
<problem>/ directories), count the reference's work once, price it with model="solar" and
model="refined" on the B200_SOLAR spec (SOLAR's 1.5 GHz-lock constants), and compare with the
official figure, which is read from nothing but the problem's metadata.json
(sol.per_workload[i].sol_ms).

Prints, and writes to <out>/sol_agreement.md (rows in <out>/sol_agreement.json):
* per subset: workloads with a bound, the share within 0.9-1.1 of the official figure, the
  median ratio ours/official (solar mode, then refined mode);
* the same share with the rows whose official figure is documented as not SOLAR's convention
  (bench/sol_official_notes.json, kind "official") set aside, said as such;
* the worst 15 problems and why each differs (the notes file; "no note" when none).

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


def official_figures(meta: dict) -> list[float | None]:
    """Official sol_ms of each workload (ms), by index, from a problem's metadata.json dict;
    None where the figure is absent, not positive, or marked a dummy (sol.sol_is_dummy)."""
    sol = meta.get("sol") or {}
    if not sol.get("available", True) or sol.get("sol_is_dummy"):
        return [None] * int(meta.get("num_workloads") or len(sol.get("per_workload") or []))
    per = sol.get("per_workload") or []
    out: list[float | None] = [None] * max(len(per), int(meta.get("num_workloads") or 0))
    for pos, w in enumerate(per):
        i = int(w.get("index", pos))
        v = w.get("sol_ms")
        if 0 <= i < len(out) and isinstance(v, (int, float)) and v > 0:
            out[i] = float(v)
    return out


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
    meta = json.loads((pdir / "metadata.json").read_text())
    official = official_figures(meta)
    subset = meta.get("subset") or pdir.parent.name
    hw = load_hardware("B200_SOLAR")
    rows = []
    try:
        problem = load_problem(pdir)
    except Exception as e:  # noqa: BLE001 - report, never stop the bench
        return [{"problem": pdir.name, "subset": subset, "index": i, "official_ms": o,
                 "error": f"load: {type(e).__name__}: {e}"} for i, o in enumerate(official)]
    timeouts = 0
    for i, w in enumerate(problem.workloads):
        row = {"problem": pdir.name, "subset": subset, "index": i, "uuid": w.uuid,
               "axes": w.axes, "official_ms": official[i] if i < len(official) else None}
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


def load_notes(path: Path) -> dict:
    """Per-problem notes (bench/sol_official_notes.json): name -> {kind, rows, why} (and
    beyond_dev: true for a problem the dev set lacks)."""
    if not path.exists():
        return {}
    return json.loads(path.read_text()).get("problems", {})


def set_aside(r: dict, notes: dict) -> bool:
    """Is this row's official figure documented as not SOLAR's convention (kind "official")?"""
    n = notes.get(r["problem"])
    if not n or n.get("kind") != "official":
        return False
    return n.get("rows") == "all" or r["index"] in n.get("rows", [])


def subset_table(rows: list[dict], model: str, notes: dict) -> list[dict]:
    """One line per subset and one for all: workloads, with a bound, share within BAND,
    median ratio, and the share within BAND with the set-aside rows left out."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if r["index"] < 0:
            continue
        groups.setdefault(r["subset"], []).append(r)
    out = []
    for name, rs in [*sorted(groups.items()), ("all", [r for r in rows if r["index"] >= 0])]:
        with_official = [r for r in rs if r.get("official_ms")]
        ratios = [x for x in (_ratio(r, model) for r in with_official) if x is not None]
        kept = [x for r in with_official if not set_aside(r, notes)
                for x in [_ratio(r, model)] if x is not None]
        out.append({"subset": name, "workloads": len(with_official), "bound": len(ratios),
                    "within": sum(map(_in_band, ratios)) / len(ratios) if ratios else None,
                    "median": statistics.median(ratios) if ratios else None,
                    "set_aside": len(ratios) - len(kept),
                    "within_kept": sum(map(_in_band, kept)) / len(kept) if kept else None})
    return out


def by_problem(rows: list[dict], model: str) -> list[dict]:
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault((r["subset"], r["problem"]), []).append(r)
    res = []
    for (sub, prob), rs in sorted(out.items()):
        rat = [x for x in (_ratio(r, model) for r in rs) if x is not None]
        errs = [r["error"] for r in rs if "error" in r]
        res.append({"subset": sub, "problem": prob, "n": len(rs), "counted": len(rat),
                    "in_band": sum(map(_in_band, rat)),
                    "median": statistics.median(rat) if rat else None,
                    "min": min(rat) if rat else None, "max": max(rat) if rat else None,
                    "bottlenecks": sorted({r[model]["bottleneck"] for r in rs if model in r}),
                    "modes": sorted({r.get("mode", "-") for r in rs}),
                    "unknown_ops": sorted({k for r in rs for k in r.get("unknown_ops", {})}),
                    "error": errs[0] if errs else None})
    return res


def worst(problems: list[dict], k: int = WORST) -> list[dict]:
    """The k problems with most workloads outside BAND (or without a bound), then the median
    furthest from 1 (in log terms)."""
    def key(p):
        off = p["n"] - p["in_band"]
        dev = abs(math.log(p["median"])) if p["median"] else math.inf
        return (-off, -dev)
    return [p for p in sorted(problems, key=key) if p["n"] - p["in_band"] > 0][:k]


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
            got = problem_rows(d)
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

    tmpdir = Path(tempfile.mkdtemp(prefix="sol_agreement_"))
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
                meta = json.loads((Path(p) / "metadata.json").read_text())
                rows += [{"problem": Path(p).name, "subset": meta.get("subset") or Path(p).parent.name,
                          "index": i, "official_ms": o, "error": f"shard process exited {proc.returncode}"}
                         for i, o in enumerate(official_figures(meta))]
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
    lo, hi = BAND
    out = ["# SOL agreement with the official SOL-ExecBench B200 sol_ms", "",
           f"Dataset: `{res['data']}`. Workloads: {res['workloads']}, counting errors: {res['errors']}, "
           f"hardware spec: {res['hardware']}, {res['elapsed_s']} s wall (counting on the CPU)."
           + (f" {res['merged']}." if res.get("merged") else ""),
           "", f"Command: `{res.get('command', 'python bench/sol_agreement.py')}`", ""]
    for model in ("solar", "refined"):
        tab = subset_table(res["rows"], model, notes)
        out += [f"## model={model}: ours / official", "",
                f"| subset | workloads with a bound | within {lo}-{hi} of official | median ratio "
                f"| rows set aside (official not SOLAR's convention) | within {lo}-{hi}, those set aside |",
                "|---|---|---|---|---|---|"]
        for t in tab:
            out.append(f"| {t['subset']} | {t['bound']} of {t['workloads']} | {_pct(t['within'])} | "
                       f"{_f(t['median'])} | {t['set_aside']} | {_pct(t['within_kept'])} |")
        out.append("")
    out += ["Solar mode follows upstream SOLAR's conventions (docs/sol-model.md, 'solar mode'); refined "
            "mode is solbench's own lower bound and is not meant to agree. Rows set aside are those "
            "bench/sol_official_notes.json marks kind \"official\": the official figure there is a hand "
            "model, another pipeline, or belongs to other workloads (each note gives the hand count); the "
            "first column counts them like every other row.", "",
            f"## Worst {WORST} problems (solar mode) and why each differs", "",
            f"| subset | problem | within {lo}-{hi} | median | min | max | note kind | why |",
            "|---|---|---|---|---|---|---|---|"]
    for p in worst(res["by_problem"]["solar"]):
        n = notes.get(p["problem"], {})
        why = n.get("why") or ("counting error: " + p["error"] if p["error"] else "no note: not analysed")
        out.append(f"| {p['subset']} | {p['problem']} | {p['in_band']}/{p['n']} | {_f(p['median'])} | "
                   f"{_f(p['min'])} | {_f(p['max'])} | {n.get('kind', '-')} | {why} |")
    for m in ("solar", "refined"):
        out += ["", f"## Per problem, model={m}", "",
                f"| subset | problem | counted | within {lo}-{hi} | median | min | max | bottleneck | counting "
                "| unknown ops | error |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for p in res["by_problem"][m]:
            out.append(f"| {p['subset']} | {p['problem']} | {p['counted']}/{p['n']} | {p['in_band']} | "
                       f"{_f(p['median'])} | {_f(p['min'])} | {_f(p['max'])} | {','.join(p['bottlenecks'])} | "
                       f"{','.join(p['modes'])} | {' '.join(p['unknown_ops'])[:60]} | "
                       f"{(p['error'] or '')[:80]} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
