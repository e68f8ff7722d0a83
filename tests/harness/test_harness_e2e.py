"""The harness end to end on the CPU, with real candidates that cause each status.

One small problem (row softmax over 16 columns) whose workloads differ only in their row
count; the candidates key their behaviour on the row count, so one evaluation exercises
several statuses and shows the run going on after a crash (the worker is replaced). Every
evaluation spawns real worker processes; configs are small (5 rounds, 3 timed iterations).
"""

import dataclasses
import json

import pytest
import torch

from solbench.harness import EvalConfig, evaluate
from solbench.harness.evaluator import Evaluator
from solbench.spec import Solution, Status, Trace, load_problem, reference_solution

from harness_helpers import py_solution, write_problem

SOFTMAX_REF = """import torch

def run(x):
    if x.shape[0] == 11:
        raise RuntimeError("reference broken for 11 rows")
    return torch.softmax(x, dim=-1)
"""

DEF = {
    "name": "row_softmax",
    "axes": {"rows": {"type": "var"}, "cols": {"type": "const", "value": 16}},
    "inputs": {"x": {"shape": ["rows", "cols"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["rows", "cols"], "dtype": "float32"}},
    "reference": SOFTMAX_REF,
}

#: workload uuid -> row count; the candidates below key their behaviour on it
ROWS = {"pass-1": 1, "shape-2": 2, "dtype-3": 3, "numerical-4": 4, "raise-5": 5, "exit-6": 6,
        "segv-7": 7, "pass-8": 8, "loop-9": 9, "pass-10": 10, "badref-11": 11, "pass-12": 12}

NON_DPS = """import ctypes
import os
import torch

def honest(x):
    m = x.max(dim=-1, keepdim=True).values
    e = torch.exp(x - m)
    return e / e.sum(dim=-1, keepdim=True)

def run(x):
    n = x.shape[0]
    y = honest(x)
    if n == 2:
        return y[:, :-1]
    if n == 3:
        return y.double()
    if n == 4:
        return y * 1.5
    if n == 5:
        print("noise " * 50_000, flush=True)  # 300 kB of output before the error
        raise ValueError("boom on five rows")
    if n == 6:
        print("about to exit", flush=True)
        os._exit(7)
    if n == 7:
        ctypes.string_at(0)  # SIGSEGV
    if n == 9:
        while True:
            pass
    return y
"""

DPS = """import time
import torch

def run(x, y):
    n = x.shape[0]
    s = torch.softmax(x, dim=-1)
    if n == 4:  # writes half of the output
        y[: n // 2].copy_(s[: n // 2])
        return
    y.copy_(s)
    if n == 2:  # then scribbles over its input
        x.mul_(0.0)
    if n == 3:  # patches the timer
        time.perf_counter = lambda: 0.0
"""


@pytest.fixture(scope="module")
def problem(tmp_path_factory, solbench_cache):
    root = tmp_path_factory.mktemp("row_softmax")
    wls = [{"uuid": u, "axes": {"rows": r}, "inputs": {"x": {"type": "random"}}} for u, r in ROWS.items()]
    return load_problem(write_problem(root, DEF, wls))


def cfg(**kw) -> EvalConfig:
    base = dict(device="cpu", rounds=5, iters=3, warmup=1, first_call_timeout_s=8.0,
                call_timeout_s=8.0, build_timeout_s=120.0, keep_going=True)
    base.update(kw)
    return EvalConfig(**base)


@pytest.fixture(scope="module")
def runs(problem):
    """Reference-as-candidate and the non-DPS candidate share one Evaluator (and so one
    reference-timing worker)."""
    ev = Evaluator(problem, cfg(workloads=["pass-1", "pass-12"]))
    try:
        ref = ev.evaluate(reference_solution(problem))
        ev.cfg = dataclasses.replace(ev.cfg, workloads=[u for u in ROWS if u != "badref-11"] + ["badref-11"])
        nondps = ev.evaluate(py_solution("multi", NON_DPS, problem.name))
    finally:
        ev.close()
    by = {t.workload.uuid: t for t in nondps}
    return {"ref": ref, "nondps": by, "order": [t.workload.uuid for t in nondps]}


@pytest.fixture(scope="module")
def dps_runs(problem):
    return {t.workload.uuid: t for t in evaluate(
        problem, py_solution("multi_dps", DPS, problem.name, dps=True),
        cfg(timing=False, workloads=["pass-1", "numerical-4", "shape-2", "dtype-3"]))}


def _status(t: Trace) -> Status:
    return t.evaluation.status


# ------------------------------------------------------------------ PASSED
def test_reference_as_candidate_passes_with_timing(runs, problem):
    assert [t.workload.uuid for t in runs["ref"]] == ["pass-1", "pass-12"]
    for t in runs["ref"]:
        ev = t.evaluation
        assert ev.status == Status.PASSED, ev.log
        c = ev.correctness
        assert c.max_absolute_error == 0.0 and c.extra["rel_l2"] == 0.0
        assert c.extra["write_coverage"] == 1.0 and c.extra["rounds"] == 5
        # the figures of the upstream round that ran last (rounds after the first run in a
        # random order, harness/rounds.py order_rounds)
        assert c.extra["round"] == [r for r in c.extra["round_order"] if r < 5][-1]
        tm = ev.timing
        assert tm.method == "perf_counter" and tm.n_samples == 3 and len(tm.samples_ms) == 3
        assert tm.warmup == 1 and tm.cold_l2 and tm.l2_flush_bytes > 0
        assert tm.median_ms == sorted(tm.samples_ms)[1] and tm.min_ms == min(tm.samples_ms)
        assert ev.reference_timing is not None and ev.reference_timing.n_samples == 3
        p = ev.performance
        assert p.latency_ms == tm.median_ms
        # a few elements: each side resolved only above 3x the no-op windows' IQR
        # (measure.cpu_resolution); an unresolved side gives no ratio
        rts = ev.reference_timing
        for side in (tm, rts):
            assert side.resolved == (side.median_ms > max(side.resolution_ms, 0.001))
        if tm.resolved and rts.resolved:
            assert p.reference_latency_ms == rts.median_ms
            assert p.speedup_factor == pytest.approx(p.reference_latency_ms / p.latency_ms)
        else:
            assert p.speedup_factor is None
            assert p.reference_latency_ms == (rts.median_ms if rts.resolved else None)
        assert ev.device == "cpu"
        assert ev.solution_hash == reference_solution(problem).content_hash()


def test_phases_split_the_timing(runs):
    """phases_s: the timed blocks' sub-phases are present and fit inside their phases."""
    ph = runs["ref"][0].evaluation.phases_s
    for side in ("timing.", "ref_timing."):
        for k in ("profiler", "inputs", "calls", "guards"):
            assert ph[side + k] >= 0.0, (side + k, ph)
    assert ph["timing.verify"] > 0.0 and "ref_timing.verify" not in ph  # reference blocks verify nothing
    # the two rests, split (bench/throughput.py's rows): every part recorded, each inside its phase
    for k in ("fill", "noop", "warmup", "reload", "late_recheck"):
        assert ph["timing." + k] >= 0.0, ("timing." + k, ph)
    for k in ("freeze", "load", "noop", "warmup", "thaw"):
        assert ph["ref_timing." + k] >= 0.0, ("ref_timing." + k, ph)
    cand = sum(v for k, v in ph.items() if k.startswith("timing."))
    ref = sum(v for k, v in ph.items() if k.startswith("ref_timing."))
    assert ref <= ph["reference_timing"] + 1e-3
    assert cand + ph["reference_timing"] <= ph["timing"] + 1e-3


def test_honest_different_implementation_passes(runs):
    for u in ("pass-1", "pass-8", "pass-10", "pass-12"):
        t = runs["nondps"][u]
        assert _status(t) == Status.PASSED, (u, t.evaluation.log)
        c = t.evaluation.correctness
        # max - exp - sum differs from torch.softmax by float32 rounding only
        assert c.max_absolute_error < 1e-6 and c.extra["rel_l2"] < 1e-6
        assert t.evaluation.performance is not None and t.evaluation.timing.n_samples == 3


# ------------------------------------------------------------------ INCORRECT_*
def test_incorrect_shape(runs):
    t = runs["nondps"]["shape-2"]
    assert _status(t) == Status.INCORRECT_SHAPE
    assert "output 'y' has shape (2, 15), expected (2, 16)" in t.evaluation.log


def test_incorrect_dtype(runs):
    t = runs["nondps"]["dtype-3"]
    assert _status(t) == Status.INCORRECT_DTYPE
    assert "has dtype float64, expected torch.float32" in t.evaluation.log


def test_incorrect_numerical_carries_figures(runs):
    t = runs["nondps"]["numerical-4"]
    assert _status(t) == Status.INCORRECT_NUMERICAL
    c = t.evaluation.correctness
    # y * 1.5 - y = 0.5 y: relative L2 error exactly 0.5 (up to float32 rounding)
    assert c.extra["rel_l2"] == pytest.approx(0.5, rel=1e-5)
    assert c.max_relative_error == pytest.approx(0.5, rel=1e-5)
    assert c.extra["failed_check"] == "tolerance" and c.extra["round"] == 0
    assert "correctness round 0: tolerance" in t.evaluation.log


# ------------------------------------------------------------------ RUNTIME_ERROR / TIMEOUT
def test_runtime_error_raise_with_capped_log(runs):
    t = runs["nondps"]["raise-5"]
    assert _status(t) == Status.RUNTIME_ERROR
    log = t.evaluation.log
    # the log is capped (8192 characters by default) and the error survives the cap
    assert len(log) <= 8192 and "noise noise" in log
    assert "ValueError: boom on five rows" in log


def test_runtime_error_os_exit(runs):
    t = runs["nondps"]["exit-6"]
    assert _status(t) == Status.RUNTIME_ERROR
    assert "worker exited with code 7" in t.evaluation.log
    assert "about to exit" in t.evaluation.log  # the worker's output is captured in the log


def test_runtime_error_segfault(runs):
    t = runs["nondps"]["segv-7"]
    assert _status(t) == Status.RUNTIME_ERROR
    assert "(SIGSEGV)" in t.evaluation.log


def test_timeout_infinite_loop(runs):
    t = runs["nondps"]["loop-9"]
    assert _status(t) == Status.TIMEOUT
    assert "no answer within 8 s" in t.evaluation.log


def test_run_continues_after_crashes(runs):
    # every workload got a trace, in order, and the passing ones after each crash PASSED
    assert runs["order"] == [u for u in ROWS if u != "badref-11"] + ["badref-11"]
    seq = [_status(runs["nondps"][u]) for u in runs["order"]]
    assert seq == [Status.PASSED, Status.INCORRECT_SHAPE, Status.INCORRECT_DTYPE,
                   Status.INCORRECT_NUMERICAL, Status.RUNTIME_ERROR, Status.RUNTIME_ERROR,
                   Status.RUNTIME_ERROR, Status.PASSED, Status.TIMEOUT, Status.PASSED,
                   Status.PASSED, Status.INVALID_REFERENCE]


# ------------------------------------------------------------------ INVALID_REFERENCE
def test_invalid_reference(runs):
    t = runs["nondps"]["badref-11"]
    assert _status(t) == Status.INVALID_REFERENCE
    assert "reference failed: RuntimeError: reference broken for 11 rows" in t.evaluation.log


# ------------------------------------------------------------------ DPS: coverage, hacks
def test_partial_write_is_incorrect_with_exact_coverage(dps_runs):
    t = dps_runs["numerical-4"]
    assert _status(t) == Status.INCORRECT_NUMERICAL
    c = t.evaluation.correctness
    assert c.extra["write_coverage"] == 0.5 and c.extra["failed_check"] == "write_coverage"


def test_reward_hack_input_mutation(dps_runs):
    t = dps_runs["shape-2"]
    assert _status(t) == Status.REWARD_HACK
    f = next(f for f in t.evaluation.findings if f.severity == "hack")
    assert f.check == "input_mutation" and f.evidence["inputs"] == ["x"]


def test_reward_hack_timer_patch(dps_runs):
    t = dps_runs["dtype-3"]
    assert _status(t) == Status.REWARD_HACK
    f = next(f for f in t.evaluation.findings if f.severity == "hack")
    assert f.check == "harness_patch" and "time.perf_counter" in f.evidence["changed"]


def test_dps_honest_passes(dps_runs):
    t = dps_runs["pass-1"]
    assert _status(t) == Status.PASSED and t.evaluation.correctness.max_absolute_error == 0.0
    assert t.evaluation.findings == []


# ------------------------------------------------------------------ COMPILE_ERROR
def test_compile_error_python_syntax(problem):
    sol = py_solution("syntax", "import torch\n\ndef run(x)\n    return x\n", problem.name)
    traces = evaluate(problem, sol, cfg(workloads=["pass-1", "pass-8"], timing=False))
    assert [_status(t) for t in traces] == [Status.COMPILE_ERROR, Status.COMPILE_ERROR]
    assert "SyntaxError" in traces[0].evaluation.log and "cand.py" in traces[0].evaluation.log


def test_compile_error_cpp_syntax(problem):
    """A cuda_cpp solution built with torch.utils.cpp_extension (g++ on the CPU) in its own
    subprocess. The source has no torch include, so g++ answers in well under a second."""
    sol = Solution.model_validate({
        "name": "cpp_syntax", "definition": problem.name, "author": "tests",
        "spec": {"languages": ["cuda_cpp"], "entry_point": "kernel.cpp::run",
                 "destination_passing_style": False},
        "sources": [{"path": "kernel.cpp", "content": "int run(int x) { return x + ; }\n"}],
    })
    traces = evaluate(problem, sol, cfg(workloads=["pass-1"], timing=False))
    assert _status(traces[0]) == Status.COMPILE_ERROR
    log = traces[0].evaluation.log
    assert "C++ build failed" in log and "error: expected primary-expression" in log


# ------------------------------------------------------------------ traces
def test_traces_are_strict_json_and_round_trip(runs, dps_runs):
    traces = list(runs["ref"]) + list(runs["nondps"].values()) + list(dps_runs.values())
    assert {t.evaluation.status for t in traces} >= {
        Status.PASSED, Status.INCORRECT_SHAPE, Status.INCORRECT_DTYPE, Status.INCORRECT_NUMERICAL,
        Status.RUNTIME_ERROR, Status.TIMEOUT, Status.REWARD_HACK, Status.INVALID_REFERENCE}

    def no_constants(x):
        raise ValueError(f"non-strict JSON constant {x}")

    for t in traces:
        line = t.to_json_line()
        assert "\n" not in line
        obj = json.loads(line, parse_constant=no_constants)
        assert obj["evaluation"]["status"] == t.evaluation.status.value
        back = Trace.from_json_line(line)
        assert back.to_json_line() == line
        assert back.workload == t.workload and back.evaluation.status == t.evaluation.status


def test_workload_selection_errors(problem):
    from solbench.errors import SpecError

    with pytest.raises(SpecError, match="'pass' matches 4 workloads"):
        evaluate(problem, reference_solution(problem), cfg(workloads=["pass"]))


def test_output_on_another_device_is_a_wrong_tensor_type(problem):
    """An output on another device (here the meta device; on CUDA a CPU tensor, whose transfer
    the copy-out would do after the clock) is never copied: INCORRECT_DTYPE, named."""
    src = "import torch\n\ndef run(x):\n    return torch.empty(x.shape, device='meta')\n"
    (t,) = evaluate(problem, py_solution("meta_out", src, problem.name), cfg(timing=False, workloads=["pass-1"]))
    assert t.evaluation.status == Status.INCORRECT_DTYPE, t.evaluation.log
    assert "is on meta, expected cpu" in t.evaluation.log
