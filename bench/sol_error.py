"""Measured versus predicted: T_measured / T_SOL per problem class, from stored traces.

For every PASSED trace with a measured latency in the given results.jsonl files, T_SOL is
recomputed with the current model (both refined and solar, on the trace's hardware spec; the
workload is counted once) and compared with the latency the trace measured; the T_SOL the
trace itself recorded (``evaluation.sol.sol_ms``, the model of its day) is kept beside it.
Classes: the refined bound's bottleneck (dram / tensor / cuda / sfu), the suite, and the
candidate kind (the solution name's suffix: reference, compile, triton, ...). A ratio below 1
is an honest measurement beating the bound: a defect of the model.

    python bench/sol_error.py [TRACES.jsonl ...] [--out bench/results]
    (default: bench/results/suites_device/*/results.jsonl, real H200 traces)

Writes bench/results/sol_error.json (rows + summaries) and sol_error.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _summary(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0}
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=10) if len(xs) >= 2 else [xs[0]] * 9
    return {"n": len(xs), "min": xs[0], "p10": q[0], "median": statistics.median(xs), "p90": q[-1],
            "max": xs[-1], "below_1": sum(x < 1 for x in xs)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args(argv)
    files = args.traces or sorted((ROOT / "bench" / "results" / "suites_device").glob("*/results.jsonl"))
    import torch

    torch.set_num_threads(1)
    from solbench.sol import bound_from_counts, count_workload, load_hardware
    from solbench.spec import load_problem
    from solbench.spec.workload import Workload
    from solbench.suites import resolve_problem

    problems: dict[str, object] = {}
    counts: dict[tuple, object] = {}
    rows, skipped = [], defaultdict(int)
    for f in files:
        suite = f.parent.name.rsplit("_", 1)[0]
        for line in f.read_text().splitlines():
            if not line.strip():
                continue
            t = json.loads(line)
            ev = t["evaluation"]
            perf = ev.get("performance") or {}
            if ev.get("status") != "PASSED" or not perf.get("latency_ms"):
                skipped[ev.get("status", "?")] += 1
                continue
            name = t["definition"]
            if name not in problems:
                try:
                    problems[name] = load_problem(resolve_problem(name))
                except Exception as e:  # noqa: BLE001 - report, never stop
                    problems[name] = e
            p = problems[name]
            if isinstance(p, Exception):
                skipped["problem not found"] += 1
                continue
            w = Workload.model_validate(t["workload"])
            key = (name, w.uuid)
            if key not in counts:
                try:
                    counts[key] = count_workload(p, w)
                except Exception as e:  # noqa: BLE001
                    counts[key] = e
            c = counts[key]
            if isinstance(c, Exception):
                skipped["counting failed"] += 1
                continue
            hw = load_hardware((ev.get("sol") or {}).get("hardware") or "H200")
            allow = bool(p.definition.allow_tf32)
            ref = bound_from_counts(c, hw, "refined", allow_tf32=allow)
            sol = bound_from_counts(c, hw, "solar", allow_tf32=allow)
            lat = perf["latency_ms"]
            rec = (ev.get("sol") or {}).get("sol_ms")
            kind = t["solution"].rsplit("__", 1)[-1] if "__" in t["solution"] else t["solution"]
            rows.append({"suite": suite, "problem": name, "workload": w.uuid, "solution": t["solution"],
                         "kind": kind, "hardware": hw.id, "latency_ms": lat,
                         "refined_ms": ref.sol_ms, "solar_ms": sol.sol_ms, "certain_ms": ref.t_certain_ms,
                         "bottleneck": ref.bottleneck, "recorded_sol_ms": rec,
                         "ratio_refined": lat / ref.sol_ms if ref.sol_ms else None,
                         "ratio_solar": lat / sol.sol_ms if sol.sol_ms else None,
                         "ratio_recorded": lat / rec if rec else None})
    groups: dict[str, dict[str, list[float]]] = {"bottleneck": defaultdict(list), "suite": defaultdict(list),
                                                 "kind": defaultdict(list), "all": defaultdict(list)}
    for r in rows:
        if r["ratio_refined"] is None:
            continue
        for g, k in (("bottleneck", r["bottleneck"]), ("suite", r["suite"]), ("kind", r["kind"]), ("all", "all")):
            groups[g][k].append(r["ratio_refined"])
    summ = {g: {k: _summary(v) for k, v in sorted(d.items())} for g, d in groups.items()}
    solar_all = _summary([r["ratio_solar"] for r in rows if r["ratio_solar"]])
    rec_all = _summary([r["ratio_recorded"] for r in rows if r["ratio_recorded"]])
    res = {"files": [str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else str(f) for f in files],
           "traces": len(rows), "skipped": dict(skipped), "refined": summ, "solar_all": solar_all,
           "recorded_all": rec_all,
           "below_refined": [r for r in rows if r["ratio_refined"] is not None and r["ratio_refined"] < 1],
           "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sol_error.json").write_text(json.dumps(res, indent=1, allow_nan=False))
    md = ["# T_measured / T_SOL per problem class", "",
          f"{len(rows)} PASSED traces from {', '.join(res['files'])}; T_SOL recomputed with the current "
          "refined model on each trace's hardware (H200 datasheet). A ratio below 1 is an honest kernel "
          "beating the bound (a model defect).", "",
          "| group | class | n | min | p10 | median | p90 | max | below 1 |", "|---|---|---|---|---|---|---|---|---|"]
    for g, d in summ.items():
        for k, s in d.items():
            if s["n"]:
                md.append(f"| {g} | {k} | {s['n']} | {s['min']:.3g} | {s['p10']:.3g} | {s['median']:.3g} | "
                          f"{s['p90']:.3g} | {s['max']:.3g} | {s['below_1']} |")
    for lab, s in (("solar model (same traces)", solar_all), ("T_SOL recorded in the traces", rec_all)):
        if s.get("n"):
            md.append(f"| all | {lab} | {s['n']} | {s['min']:.3g} | {s['p10']:.3g} | {s['median']:.3g} | "
                      f"{s['p90']:.3g} | {s['max']:.3g} | {s['below_1']} |")
    md += ["", "Below the refined bound:" if res["below_refined"] else "No trace is below the refined bound."]
    for r in res["below_refined"]:
        md.append(f"- {r['problem']} / {r['solution']}: {r['latency_ms']:.4g} ms vs T_SOL {r['refined_ms']:.4g} ms "
                  f"(certain floor {r['certain_ms']:.3g} ms)")
    (args.out / "sol_error.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
