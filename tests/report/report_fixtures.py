"""Hand-made traces with figures worked out by hand (see each comment), shared by the
store, report and browser tests."""

from __future__ import annotations

from solbench.sol.score import sol_score
from solbench.spec.trace import (Correctness, Environment, Evaluation, Finding, Performance, Status,
                                 TimingStats, Trace)
from solbench.spec.workload import Workload

HW = "NVIDIA H200"


def _wl(uuid: str, n: int = 1024) -> Workload:
    return Workload.model_validate({"uuid": uuid, "axes": {"n": n}, "inputs": {"x": {"type": "random"}}})


def _timing(median: float, samples=None) -> TimingStats:
    s = list(samples) if samples is not None else [median] * 7
    return TimingStats(method="cupti", median_ms=median, iqr_ms=0.0, min_ms=min(s), mean_ms=sum(s) / len(s),
                       n_samples=len(s), warmup=2, cold_l2=True, samples_ms=s)


def mk(defn: str, sol: str, wl: str, status: Status = Status.PASSED, t_k: float = 1.0, t_ref: float = 1.0,
       t_sol: float | None = 0.1, samples=None, ref_samples=None, flops: float = 2e9, nbytes: float = 1e8,
       findings=(), hash_: str | None = None) -> Trace:
    """One trace: PASSED with performance and a SOL block (``sol_score`` of the real scorer),
    or a failing status (REWARD_HACK keeps its timings, as the evaluator writes it)."""
    ev: dict = dict(status=status, environment=Environment(hardware=HW, libs={"torch": "2.11.0"}),
                    solution_hash=hash_ or f"h-{defn}-{sol}", findings=list(findings))
    if status == Status.PASSED:
        ev["correctness"] = Correctness(max_absolute_error=0.0, max_relative_error=0.0, extra={"rel_l2": 0.0})
        ev["performance"] = Performance(latency_ms=t_k, reference_latency_ms=t_ref, speedup_factor=t_ref / t_k)
        ev["timing"] = _timing(t_k, samples)
        ev["reference_timing"] = _timing(t_ref, ref_samples)
        if t_sol is not None:
            s = sol_score(t_k, t_ref, t_sol)
            ev["sol"] = {"hardware": "H200", "model": "refined", "sol_ms": t_sol, "baseline": "eager",
                         "bound": {"sol_ms": t_sol, "bottleneck": "dram", "total_flops": flops,
                                   "bytes_model": nbytes, "arithmetic_intensity": flops / nbytes,
                                   "terms_ms": {"dram": t_sol}},
                         **s.model_dump(mode="json")}
    elif status == Status.REWARD_HACK:
        ev["correctness"] = Correctness()
        ev["timing"] = _timing(t_k, samples)
        ev["reference_timing"] = _timing(t_ref, ref_samples)
        if not any(f.severity == "hack" for f in ev["findings"]):
            ev["findings"].append(Finding(check="timer_patch", severity="hack",
                                          message="time.perf_counter replaced",
                                          evidence={"module": "time", "attr": "perf_counter"}))
    else:
        ev["correctness"] = Correctness(max_absolute_error=3.0, max_relative_error=1.0,
                                        extra={"failed_check": "allclose"})
    return Trace(definition=defn, solution=sol, workload=_wl(wl), evaluation=Evaluation(**ev))


# ---- a leaderboard worked out by hand ------------------------------------------------------
# candidate "fast" on four problems (T_SOL = 0.1 ms everywhere):
#   p1: w1 1.0 -> 0.5 ms (2x), w2 4.0 -> 1.0 ms (4x): speedup geomean sqrt(8) = 2.828
#       S(w1) = 1/(1 + 0.4/0.9) = 0.9/1.3 = 0.692308; S(w2) = 1/(1 + 0.9/3.9) = 3.9/4.8 = 0.8125
#       unit score (0.692308 + 0.8125)/2 = 0.752404
#   p2: 1.2 -> 1.0 ms (1.2x): S = 1/(1 + 0.9/1.1) = 1.1/2.0 = 0.55
#   p3: INCORRECT_NUMERICAL: score 0, not fast
#   p4: REWARD_HACK, timed at 1.0 ms against 3.0 ms: raw speedup 3, raw S = 2.9/3.8 = 0.763158
# candidate "slow": p1 w1 1.0 -> 2.0 ms (0.5x), w2 4.0 -> 4.0 ms (1x); p2 1.2 -> 1.2 ms (1x)
#   S(p1 w1) = 1/(1 + 1.9/0.9) = 0.9/2.8 = 0.321429; S(p1 w2) = 0.5; unit (0.321429+0.5)/2 = 0.410714
#   S(p2) = 0.5
# fast: fast_0 = fast_1 = 2/4, fast_1.5 = fast_2 = 1/4 (p1 only: 2.828 > 2), fast_3 = 0
#       raw fast_1 = 3/4 (p4's raw 3x counts), raw fast_2 = 2/4
#       mean SOL score (hack-adjusted) = (0.752404 + 0.55 + 0 + 0)/4 = 0.325601
#       raw mean SOL score = (0.752404 + 0.55 + 0 + 0.763158)/4 = 0.516390
#       mean SOL score, correct only = (0.752404 + 0.55)/2 = 0.651202
# slow: 2 problems, both correct; fast_1 = 0 (p1 geomean sqrt(0.5) = 0.707, p2 1.0 not > 1);
#       mean SOL score = (0.410714 + 0.5)/2 = 0.455357
def leaderboard_traces() -> list[Trace]:
    return [
        mk("p1", "p1__fast", "w1", t_k=0.5, t_ref=1.0), mk("p1", "p1__fast", "w2", t_k=1.0, t_ref=4.0),
        mk("p2", "p2__fast", "w1", t_k=1.0, t_ref=1.2),
        mk("p3", "p3__fast", "w1", status=Status.INCORRECT_NUMERICAL),
        mk("p4", "p4__fast", "w1", status=Status.REWARD_HACK, t_k=1.0, t_ref=3.0),
        mk("p4", "p4__slow_ref_only", "w1", t_k=3.0, t_ref=3.0),  # gives p4 w1 its T_SOL
        mk("p1", "p1__slow", "w1", t_k=2.0, t_ref=1.0), mk("p1", "p1__slow", "w2", t_k=4.0, t_ref=4.0),
        mk("p2", "p2__slow", "w1", t_k=1.2, t_ref=1.2),
    ]


# ---- speedup vs SOL distance, worked out by hand ---------------------------------------------
# T_SOL = 0.01 ms; (T_k, T_ref) = (0.02, 0.02), (0.2, 2.0), (2.0, 20.0):
#   SOL distance T_k/T_SOL = 2, 20, 200 -> log10 = 0.30103 + (0, 1, 2)
#   speedup T_ref/T_k = 1, 10, 10 -> log10 = (0, 1, 1)
#   x - mean = (-1, 0, 1); y - mean = (-2/3, 1/3, 1/3); cov sum = 2/3 + 1/3 = 1
#   sxx = 2, syy = 4/9 + 1/9 + 1/9 = 2/3; r = 1 / sqrt(2 * 2/3) = sqrt(3)/2 = 0.866025
def distance_traces() -> list[Trace]:
    return [mk("d1", "d1__k", "w1", t_k=0.02, t_ref=0.02, t_sol=0.01),
            mk("d2", "d2__k", "w1", t_k=0.2, t_ref=2.0, t_sol=0.01),
            mk("d3", "d3__k", "w1", t_k=2.0, t_ref=20.0, t_sol=0.01)]
