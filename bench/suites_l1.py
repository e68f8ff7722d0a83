"""Device check of the l1 suite at full size, plus an eager-candidate suite run.

Usage (GPU machine): ``PYTHONPATH=src python bench/suites_l1.py --out $OUT/suites_l1``
CPU smoke test: ``PYTHONPATH=src python bench/suites_l1.py --out /tmp/x --device cpu --only 'relu*'``

Part 1 (always): for every workload of every l1 problem on the device: build the inputs,
run the eager reference, and check (a) declared shapes, (b) no trivial candidate (zeros,
1e-6, mean of the output, passthrough of a same-shape input) passes the workload tolerance,
(c) an honest candidate (the reference on inputs upcast to float64, cast back) passes it
against the device reference (this is where cuDNN's default TF32 for fp32 convolutions
meets the tolerance), and (d) the eager reference's median time over 10 CUDA-event-timed
calls (warm L2; a sizing figure only, not a solbench measurement).

Part 2 (when ``solbench.harness`` exists): ``solbench run`` of the eager candidates (each
problem's reference as a solution) over the first ``--run-workloads`` workloads of every
problem, with the summary.

Writes (<= 4 files): l1_check.json, l1_eager_results.jsonl, l1_eager_summary.json,
and prints a table.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import statistics
import sys
import time
import traceback
from pathlib import Path


def part1(args, out: Path) -> dict:
    import torch

    from solbench.spec import load_problem
    from solbench.suites import suite_problems
    from solbench.suites.check import as_tuple, trivial_candidates, upstream_match
    from solbench.inputs import make_inputs

    dev = args.device
    rows = []
    t_start = time.time()
    for p in suite_problems("l1"):
        if args.only and not fnmatch.fnmatch(p.name, args.only):
            continue
        prob = load_problem(p)
        run = prob.make_reference(dev)
        defn = prob.definition
        for w in prob.workloads:
            if time.time() - t_start > args.budget_s:
                rows.append({"problem": p.name, "uuid": w.uuid, "skipped": "time budget"})
                continue
            row = {"problem": p.name, "uuid": w.uuid, "axes": w.axes,
                   "cpu": "cpu" in (w.tags or [])}
            try:
                env = defn.resolve_axes(w.axes)
                inputs = make_inputs(prob, w, seed=0, device=dev)
                args_ = [inputs[k] for k in defn.inputs]
                refs = dict(zip(defn.outputs, as_tuple(run(*args_))))
                row["shapes_ok"] = all(
                    tuple(refs[k].shape) == defn.shape_of(s, env)
                    and refs[k].dtype == getattr(torch, s.dtype) for k, s in defn.outputs.items())
                tol = w.tolerance_or_default()
                best = ("-", 0.0)
                passing = []
                for label, cand in trivial_candidates(refs, inputs):
                    oks, ratios = zip(*(upstream_match(c, refs[k], tol) for k, c in cand.items()))
                    if all(oks):
                        passing.append(label)
                    if min(ratios) > best[1]:
                        best = (label, min(ratios))
                row["passing_trivial"] = passing
                row["best_trivial"] = [best[0], round(best[1], 4)]
                up = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                      for a in args_]
                hon = as_tuple(run(*up))
                hr = [upstream_match(h.to(refs[k].dtype), refs[k], tol) for k, h in zip(defn.outputs, hon)]
                row["honest_ok"] = all(ok for ok, _ in hr)
                row["honest_ratio"] = min(r for _, r in hr)
                del up, hon
                if dev.startswith("cuda"):
                    times = []
                    for _ in range(3):
                        run(*args_)
                    for _ in range(10):
                        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        s.record()
                        run(*args_)
                        e.record()
                        torch.cuda.synchronize()
                        times.append(s.elapsed_time(e))
                    row["eager_median_ms"] = statistics.median(times)
                del inputs, args_, refs
                if dev.startswith("cuda"):
                    torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001 - record and go on
                row["error"] = f"{type(e).__name__}: {e}"[:500]
            rows.append(row)
    bad = [r for r in rows if r.get("error") or r.get("passing_trivial") or r.get("honest_ok") is False
           or r.get("shapes_ok") is False]
    res = {"device": dev, "workloads": len(rows), "bad": len(bad), "seconds": round(time.time() - t_start, 1),
           "eager_total_ms": round(sum(r.get("eager_median_ms", 0.0) for r in rows), 3), "rows": rows}
    if dev.startswith("cuda"):
        import torch

        res["gpu"] = torch.cuda.get_device_name()
        res["torch"] = torch.__version__
    (out / "l1_check.json").write_text(json.dumps(res, indent=1))
    print(f"\n== part 1: {len(rows)} workloads checked on {dev} in {res['seconds']} s; "
          f"{len(bad)} bad; eager total {res['eager_total_ms']} ms")
    print(f"{'problem':32s} {'uuid':8s} {'trivial best':28s} {'honest':>7s} {'eager ms':>9s}  note")
    for r in rows:
        bt = r.get("best_trivial", ["-", 0])
        note = r.get("error") or r.get("skipped") or (
            "TRIVIAL PASSES " + ",".join(r["passing_trivial"]) if r.get("passing_trivial") else "")
        if r.get("honest_ok") is False:
            note += " HONEST FAILS"
        em = r.get("eager_median_ms")
        print(f"{r['problem']:32s} {r['uuid'][:8]:8s} {bt[0][:20]:20s} {bt[1]:7.4f} "
              f"{r.get('honest_ratio', float('nan')):7.4f} {em if em is None else round(em, 4)!s:>9s}  {note}")
    return res


def part2(args, out: Path) -> dict | None:
    try:
        from solbench.harness import EvalConfig, evaluate  # noqa: F401
    except ImportError as e:
        print(f"\n== part 2 skipped: harness not available ({e})")
        return None
    import tempfile

    from solbench.report.summary import summarize
    from solbench.suites import suite_problems
    from solbench.run.executors.local import execute
    from solbench.suites.runner import label_map, write_eager_candidates
    from solbench.run.plan import plan_run

    paths = [p for p in suite_problems("l1") if not args.only or fnmatch.fnmatch(p.name, args.only)]
    sols = Path(tempfile.mkdtemp(prefix="l1_eager_"))
    write_eager_candidates(paths, sols)
    res_path = out / "l1_eager_results.jsonl"
    if res_path.exists():
        res_path.unlink()
    plan = plan_run(paths, sols, set(), workload_limit=args.run_workloads)
    t0 = time.time()
    outcome = execute(plan, res_path, args.device,
                      on_pair_done=lambda p, ts: print(f"  {p.problem.name:32s} "
                                                       + " ".join(t.evaluation.status.value for t in ts),
                                                       flush=True))
    labels = label_map(plan)
    summ = summarize(outcome.traces, label_of=lambda t: labels.get(t.evaluation.solution_hash or "", t.solution))
    data = {"seconds": round(time.time() - t0, 1), "harness_errors": outcome.harness_errors,
            "summary": {k: v.to_json() for k, v in summ.items()}}
    (out / "l1_eager_summary.json").write_text(json.dumps(data, indent=1))
    print(f"\n== part 2: {len(outcome.traces)} traces in {data['seconds']} s; "
          f"{len(outcome.harness_errors)} harness errors")
    for k, v in summ.items():
        print(f"  {k}: correct {v.correct_rate}, median speedup {v.median_speedup}, "
              f"fast_1 {v.fast_p.get('1')}, statuses {v.statuses}")
    return data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    ap.add_argument("--only", default=None, help="fnmatch pattern of problem names")
    ap.add_argument("--budget-s", type=float, default=150.0, help="time budget of part 1")
    ap.add_argument("--run-workloads", type=int, default=2, help="workloads per problem in part 2")
    ap.add_argument("--skip-run", action="store_true", help="skip part 2")
    args = ap.parse_args()
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.out.mkdir(parents=True, exist_ok=True)
    rc = 0
    try:
        r1 = part1(args, args.out)
        rc |= 1 if r1["bad"] else 0
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        rc = 2
    if not args.skip_run:
        try:
            part2(args, args.out)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            rc = 2
    return rc


if __name__ == "__main__":
    sys.exit(main())
