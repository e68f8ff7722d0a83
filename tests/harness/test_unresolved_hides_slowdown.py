"""Red team (CPU resolution rule, docs/harness.md "Resolution of CPU times"): a candidate
whose time is resolved against a reference whose time is not has a *proven* slowdown
whenever its median exceeds the reference's resolution (the reference's median is at most
that resolution), yet no speedup is recorded and summaries drop the unit. A candidate slow
only where the reference is unresolved (tiny workloads) hides that slowdown.
Hostile: tests/adversarial/hostile/slow_where_reference_unresolved.py."""

from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate
from solbench.report.summary import summarize, trace_speedup
from solbench.spec import load_problem
from solbench.spec.solution import Solution
from solbench.spec.trace import (Correctness, Environment, Evaluation, Performance, Status, TimingStats,
                                 Trace)
from solbench.spec.workload import Workload

from harness_helpers import py_solution, write_problem

HOSTILE = Path(__file__).parents[1] / "adversarial" / "hostile" / "slow_where_reference_unresolved.py"


def _ts(median, resolved, resolution):
    return TimingStats(method="perf_counter", median_ms=median, iqr_ms=0.1, min_ms=median, mean_ms=median,
                       n_samples=10, warmup=2, cold_l2=True, samples_ms=[median] * 10,
                       resolved=resolved, resolution_ms=resolution)


def _trace(uuid, cand, ref, latency, ref_latency, speedup):
    w = Workload.model_validate({"uuid": uuid, "axes": {}, "inputs": {"x": {"type": "random"}}})
    ev = Evaluation(status=Status.PASSED, correctness=Correctness(), environment=Environment(hardware="cpu"),
                    performance=Performance(latency_ms=latency, reference_latency_ms=ref_latency,
                                            speedup_factor=speedup),
                    timing=cand, reference_timing=ref)
    return Trace(definition="add2_f32", solution="slow_small", workload=w, evaluation=ev)


def test_a_proven_slowdown_is_not_dropped_from_summaries():
    # the figures of the run in the hostile's docstring (n=4096 and n=4Mi of add2_f32)
    small = _trace("w-small", _ts(230.2, True, 40.3), _ts(0.001, False, 40.3), 230.2, None, None)
    large = _trace("w-large", _ts(28.68, True, 3.0), _ts(27.35, True, 3.0), 28.68, 27.35, 27.35 / 28.68)
    # by hand: the reference's median is <= 40.3 ms, so the speedup is <= 40.3 / 230.2 = 0.175
    s = trace_speedup(small)
    assert s is not None and s <= 40.3 / 230.2
    # the problem's summary must not read as the large workload's 0.954x alone
    g = summarize([small, large])["slow_small"].geomean_speedup
    # (the bound itself, to rounding: exp(mean log) and sqrt differ in the last bits)
    assert g is not None and g <= (40.3 / 230.2 * 27.35 / 28.68) ** 0.5 * (1 + 1e-12)


def test_the_hostile_slowdown_is_recorded(tmp_path, solbench_cache):
    d = {"name": "add2_f32", "axes": {"n": {"type": "var"}},
         "inputs": {"x": {"shape": ["n"], "dtype": "float32"}, "y": {"shape": ["n"], "dtype": "float32"}},
         "outputs": {"out": {"shape": ["n"], "dtype": "float32"}},
         "reference": "import torch\n\ndef run(x, y):\n    return x + y\n"}
    prob = load_problem(write_problem(tmp_path / "add2", d, [
        {"uuid": "w", "axes": {"n": 4096}, "inputs": {"x": {"type": "random"}, "y": {"type": "random"}}}]))
    sol = py_solution("slow_small", HOSTILE.read_text(), prob.name)
    (t,) = evaluate(prob, sol, EvalConfig(device="cpu", iters=10, rounds=2, pool_bytes=320 << 20))
    ev = t.evaluation
    assert ev.status == Status.PASSED, (ev.log, ev.findings)
    if not (ev.timing.resolved and ev.reference_timing.resolved is False):
        pytest.skip(f"not the case under test here: candidate resolved {ev.timing.resolved}, "
                    f"reference resolved {ev.reference_timing.resolved}")
    # the reference's median is at most its resolution: a speedup (or its bound) below 1 is known
    assert ev.timing.median_ms > ev.reference_timing.resolution_ms
    # recorded in the trace as the bound, never as a measured factor
    assert ev.performance.speedup_factor is None
    if ev.speedup_bound is None:
        # the paired-block rule (harness/resolution.py) refused the claim on this host: no
        # bound at all is the sound answer there, never a false one
        from solbench.spec.trace import speedup_resolved

        assert speedup_resolved(ev) is False, ev.speedup_resolution
        pytest.skip(f"the paired blocks refused the claim here: {ev.speedup_resolution.get('reason')}")
    assert ev.speedup_bound.op == "<="
    assert ev.speedup_bound.value == ev.reference_timing.resolution_ms / ev.timing.median_ms
    s = trace_speedup(t)
    assert s is not None and s <= ev.reference_timing.resolution_ms / ev.timing.median_ms
