"""Summary table of `bench/suites_device.py` runs: per suite and candidate label, the correct
rate, win rate against eager, median and geometric-mean speedup, fast_p and mean SOL score
(`solbench.report.summary`, the same figures `solbench run` prints).

Usage: python bench/suites_summary.py RUN_DIR... [--out bench/results/suites_device]
Each RUN_DIR holds results.jsonl and labels.json; its suite is read from the traces'
definitions (a RUN_DIR name starting with the suite name also works: l1_0, dlrm_1, ...).
Writes OUT.json and OUT.md and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    from solbench.report.summary import summarize, unit_results
    from solbench.run.plan import read_results

    by_suite: dict[str, list] = defaultdict(list)
    labels: dict[str, str] = {}
    for run in args.runs:
        labels.update(json.loads((run / "labels.json").read_text()))
        suite = run.name.split("_")[0]
        if (run / "results.jsonl").exists():
            by_suite[suite] += read_results(run / "results.jsonl")

    def label_of(t):
        return labels.get(t.evaluation.solution_hash or "", t.solution)

    report = {}
    lines = ["| suite | candidate | problems | correct | win rate vs eager | median speedup | "
             "geomean speedup | fast_1 | fast_1.5 | fast_2 | mean SOL score (n) | statuses |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    num = lambda v: "-" if v is None else f"{v:.3g}"  # noqa: E731
    for suite, traces in sorted(by_suite.items()):
        s = summarize(traces, unit="problem", label_of=label_of)
        rows = unit_results(traces, unit="problem", label_of=label_of)
        report[suite] = {"summary": {k: v.to_json() for k, v in s.items()},
                         "problems": [r.__dict__ for r in sorted(rows, key=lambda r: (r.definition, r.label))],
                         "workloads": len(traces),
                         "timing_methods": dict(Counter((t.evaluation.timing.method if t.evaluation.timing else None)
                                                         for t in traces))}
        for lab, x in s.items():
            if lab == "all":
                continue
            st = ", ".join(f"{k} {v}" for k, v in sorted(x.statuses.items()) if k != "PASSED")
            lines.append(
                f"| {suite} | {lab} | {x.units} | {pct(x.correct_rate)} | {pct(x.win_rate)} | "
                f"{num(x.median_speedup)} | {num(x.geomean_speedup)} | {pct(x.fast_p.get('1'))} | "
                f"{pct(x.fast_p.get('1.5'))} | {pct(x.fast_p.get('2'))} | "
                f"{num(x.mean_sol_score)} ({x.sol_units}) | {st} |")
    md = "\n".join(lines)
    print(md)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(report, indent=1, default=str))
        args.out.with_suffix(".md").write_text(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
