"""Cost of the strict and stress correctness rounds (docs/inputs.md, "Rounds").

Evaluates honest candidates of the adversarial corpus with the full round plan and with the
upstream rounds only (``round_plan(..., extra=False)``), ``reps`` times each, and prints the
median correctness and timing phases (s) and the extra rounds that ran.

    PYTHONPATH=src python bench/rounds_cost.py [--reps 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
from functools import partial
from pathlib import Path

from solbench.harness import EvalConfig, Evaluator
from solbench.harness import evaluator as evaluator_mod
from solbench.harness.rounds import round_plan
from solbench.spec import load_problem, load_solution

ADV = Path(__file__).resolve().parents[1] / "tests" / "adversarial"
CASES = [("layernorm_affine_f32", "honest/layernorm_two_pass.py"),
         ("softmax_long_f32", "honest/softmax_manual.py"),
         ("matmul_f32", "honest/matmul_torch.py")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    print("| problem | extra rounds | correctness s (upstream only) | correctness s (all) | timing s (all) |")
    print("|---|---|---|---|---|")
    for prob_name, cand in CASES:
        p = load_problem(ADV / "problems" / prob_name)
        sol = load_solution(ADV / cand, p)
        res: dict[bool, list] = {False: [], True: []}
        ev = Evaluator(p, EvalConfig(device=a.device, rounds=5, reference_timing=True))
        try:
            for _ in range(a.reps):
                for extra in (False, True):
                    evaluator_mod.round_plan = partial(round_plan, extra=extra)
                    (t,) = ev.evaluate(sol)
                    e = t.evaluation
                    assert e.status.value == "PASSED", (cand, e.log)
                    labels = [r["label"] for r in (e.correctness.extra.get("extra_rounds") or [])]
                    res[extra].append((e.phases_s["correctness"], e.phases_s.get("timing", 0.0), labels))
        finally:
            evaluator_mod.round_plan = round_plan
            ev.close()
        off = statistics.median(x[0] for x in res[False])
        on = statistics.median(x[0] for x in res[True])
        tm = statistics.median(x[1] for x in res[True])
        print(f"| {prob_name} | {', '.join(res[True][0][2])} | {off:.3f} | {on:.3f} | {tm:.3f} |")


if __name__ == "__main__":
    main()
