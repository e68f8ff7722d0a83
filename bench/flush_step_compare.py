"""CPU: work moved between two timed calls against the same work done in the call (issue 11).

Evaluates, on an ``add`` of ROWS x 1024 fp32 (20 timed calls a side, one correctness round),
in alternating order (forwards on even repetitions, backwards on odd ones, so host load that
drifts during the run falls on every candidate alike):

- ``hostile``: ``tests/harness/cand_flush_step_work.py`` (a helper thread maps and faults
  the next call's output buffer between calls; on the old held path, in the flush step);
- ``in_call``: the same file with that work done inside the call;
- ``honest``: ``return x + y``;
- ``ref``: the reference itself as the candidate (A/A).

Prints one line per evaluation: status, speedup against the reference timed in the same
run, the two medians (ms), the two notch half-widths (stopping.relative_halfwidth) and the
findings; with ``--out`` also writes them as JSON lines.

Usage:
    PYTHONPATH=src python bench/flush_step_compare.py --order hostile,honest,in_call --reps 2
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "harness"))

from harness_helpers import py_solution, write_problem  # noqa: E402

from solbench.harness import EvalConfig, evaluate  # noqa: E402
from solbench.harness.stopping import relative_halfwidth  # noqa: E402
from solbench.spec import load_problem  # noqa: E402
from solbench.spec.problem import reference_solution  # noqa: E402

ADD = {"name": "add_flush_step", "axes": {"rows": {"type": "var"}, "cols": {"type": "const", "value": 1024}},
       "inputs": {"x": {"shape": ["rows", "cols"], "dtype": "float32"},
                  "y": {"shape": ["rows", "cols"], "dtype": "float32"}},
       "outputs": {"z": {"shape": ["rows", "cols"], "dtype": "float32"}},
       "reference": "import torch\n\ndef run(x, y):\n    return x + y\n"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--order", default="hostile,honest,in_call,ref")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp())
    prob = load_problem(write_problem(d / "add", ADD, [
        {"uuid": "w", "axes": {"rows": a.rows}, "inputs": {"x": {"type": "random"}, "y": {"type": "random"}}}]))
    src = (ROOT / "tests/harness/cand_flush_step_work.py").read_text()
    sols = {"hostile": py_solution("hostile", src, prob.name),
            "in_call": py_solution("in_call", src.replace('MODE = "flush_step"', 'MODE = "in_call"'), prob.name),
            "honest": py_solution("honest", "import torch\n\ndef run(x, y):\n    return x + y\n", prob.name),
            "ref": reference_solution(prob)}
    order = a.order.split(",")
    out = a.out.open("a") if a.out else None
    for rep in range(a.reps):
        for name in (order if rep % 2 == 0 else order[::-1]):
            (t,) = evaluate(prob, sols[name], EvalConfig(device="cpu", iters=a.iters, rounds=1))
            ev = t.evaluation
            row = {"candidate": name, "rep": rep, "status": str(ev.status.value),
                   "speedup": ev.performance.speedup_factor if ev.performance else None,
                   "cand_median_ms": ev.timing.median_ms if ev.timing else None,
                   "ref_median_ms": ev.reference_timing.median_ms if ev.reference_timing else None,
                   "halfwidths": [relative_halfwidth(x.samples_ms) if x else None
                                  for x in (ev.timing, ev.reference_timing)],
                   "findings": [f.check for f in ev.findings]}
            print(f"{name:8s} {row['status']:12s} speedup {row['speedup'] or float('nan'):.3f} "
                  f"cand {row['cand_median_ms'] or float('nan'):.3f} ms ref {row['ref_median_ms'] or float('nan'):.3f} ms "
                  f"hw {[round(x, 3) if x else None for x in row['halfwidths']]} {row['findings']}", flush=True)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()


if __name__ == "__main__":
    main()
