"""The steady overhead of two `steadyab` arms (bench/gpu_session.sh) compared workload by
workload: only the steady workloads (not a pair's first) that both arms ran, each arm's
median over its runs, then the median of the paired differences, per phase group of
bench/throughput.py. A budget-capped run covers a different subset of workloads in each arm,
which pooled medians compare as if it did not.

    python bench/steady_paired.py --old "DIR/steadyab_old_r*_call2.jsonl" --new "DIR/steadyab_new_r*_call2.jsonl"
"""
from __future__ import annotations

import argparse
import glob
import json
import statistics as st
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import split  # noqa: E402

ROWS = ("overhead steady", "timed calls (host)", "inputs", "correctness", "correctness: compare", "verify",
        "guards", "reference rest", "timing rest", "guard check after timing")


def _load(pattern: str, steady_profiler: float) -> dict:
    out: dict = {}
    for f in sorted(glob.glob(pattern)):
        for line in open(f):
            t = json.loads(line)
            ev = t["evaluation"]
            if (ev.get("phases_s") or {}).get("worker_start", 1.0) != 0.0:
                continue  # a pair's first workload carries the per-pair costs
            s = split(ev, steady_profiler)
            if s is not None:
                out.setdefault((t["definition"], t["workload"]["uuid"]), []).append(s)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True, help="glob of the old arm's results.jsonl files")
    ap.add_argument("--new", required=True, help="glob of the new arm's results.jsonl files")
    ap.add_argument("--steady-profiler", type=float, default=0.005)
    a = ap.parse_args()
    old, new = _load(a.old, a.steady_profiler), _load(a.new, a.steady_profiler)
    both = sorted(set(old) & set(new))
    if not both:
        raise SystemExit("no steady workload was run by both arms")
    print(f"{len(both)} steady workloads run by both arms (old {len(old)}, new {len(new)})")
    print("| s per workload | old (median) | new (median) | median of paired new - old |")
    print("|---|---|---|---|")
    for row in ROWS:
        o = [st.median(x[row] for x in old[k]) for k in both]
        n = [st.median(x[row] for x in new[k]) for k in both]
        print(f"| {row} | {st.median(o):.4f} | {st.median(n):.4f} | {st.median(b - c for b, c in zip(n, o)):+.4f} |")


if __name__ == "__main__":
    main()
