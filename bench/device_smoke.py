"""Quick device smoke: the reference of one small problem through the full harness, printing
the timing method, samples and any notes (first thing to look at on a new machine).

Usage: python bench/device_smoke.py [PROBLEM_DIR]
"""
import sys
import time

import torch

from solbench.harness import EvalConfig
from solbench.run.session import evaluate_and_score
from solbench.spec import load_problem, reference_solution

path = sys.argv[1] if len(sys.argv) > 1 else ".devdata/sol-execbench-dev/FlashInfer-Bench/024_rmsnorm_h2048"
p = load_problem(path)
t = time.time()
tr = evaluate_and_score(p, reference_solution(p), EvalConfig(device="cuda" if torch.cuda.is_available() else "cpu",
                                                            max_workloads=2, iters=10))
for x in tr:
    e = x.evaluation
    print(e.status.value, e.timing.method if e.timing else None, e.timing.median_ms if e.timing else None,
          e.timing.kernel_sum_median_ms if e.timing else None, e.timing.host_median_ms if e.timing else None,
          e.timing.notes if e.timing else None)
    print("  ref:", e.reference_timing.median_ms if e.reference_timing else None, "sol:", e.sol.sol_ms if e.sol else None,
          e.sol.score if e.sol else None, e.sol.error if e.sol else None)
    print("  findings:", [(f.check, f.severity, f.message[:200]) for f in e.findings])
    if e.status.value != "PASSED":
        print(e.log[-1500:])
print(f"smoke took {time.time() - t:.1f} s")
