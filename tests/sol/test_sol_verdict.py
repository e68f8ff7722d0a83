"""faster_than_sol only below the certain floor; sol_bound_violated (advisory, score capped at
1) between it and T_SOL; both bounds in the trace's SOL block; the CLI over many problems."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solbench.run.session import evaluate_and_score
from solbench.run.sol import prime_sol
from sol_helpers import judged
from solbench.run import sol as run_sol
from solbench.sol import classify_against_sol, sol_finding
from solbench.spec.solution import Solution
from solbench.spec.trace import Correctness, Environment, Evaluation, Performance, Status, Trace

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("SOLBENCH_SHARED", ROOT.parent / "shared"))
DEV = SHARED / "datasets" / "sol-execbench-dev"
BW = 4.8e12
L2 = 62_914_560


def test_classify_against_sol_by_hand():
    assert classify_against_sol(0.5, t_sol_ms=1.0, t_certain_ms=0.2) == "advisory"
    assert classify_against_sol(0.1, t_sol_ms=1.0, t_certain_ms=0.2) == "hack"
    assert classify_against_sol(1.5, t_sol_ms=1.0, t_certain_ms=0.2) is None
    assert classify_against_sol(0.1, t_sol_ms=1.0, t_certain_ms=0.0) == "advisory"  # no certain floor
    assert classify_against_sol(None, 1.0, 0.2) is None
    assert classify_against_sol(float("nan"), 1.0, 0.2) is None
    f = sol_finding("advisory", 0.5, {"hardware": "H200", "sol_ms": 1.0, "t_certain_ms": 0.2,
                                      "model": "refined", "bound": {"bottleneck": "dram",
                                                                    "terms_ms": {"dram": 1.0}}}, "w0")
    assert f["check"] == "sol_bound_violated" and f["severity"] == "advisory"
    assert "w0" in f["message"] and "dram 1" in f["message"]


def _evaluate(monkeypatch, problem, latency_ms):
    class FakeEvaluator:
        """Stands in for the harness: one PASSED trace at ``latency_ms``, streamed."""
        cfg = None

        def __init__(self, p):
            self.problem = p

        def evaluate(self, s, on_trace=None, context=None):
            ev = Evaluation(status=Status.PASSED, correctness=Correctness(), environment=Environment(hardware="H200"),
                            performance=Performance(latency_ms=latency_ms, reference_latency_ms=10.0))
            t = Trace(definition=self.problem.name, solution="cand", workload=self.problem.workloads[0], evaluation=ev)
            t = judged(t, context)
            if on_trace is not None:
                on_trace(t)
            return [t]

    sol = Solution.model_validate({"name": "cand", "definition": problem.name, "author": "reference",
                                   "spec": {"languages": ["pytorch"], "entry_point": "m.py::run"},
                                   "sources": [{"path": "m.py", "content": "def run(x):\n    return x * 2\n"}]})
    return evaluate_and_score(problem, sol, hardware="H200", evaluator=FakeEvaluator(problem))[0].evaluation


def test_between_the_certain_floor_and_t_sol_is_advisory_with_the_score_capped(scale_problem, monkeypatch):
    n = 64 << 20  # 256 MiB in, 256 MiB out
    p = scale_problem(n)
    t_sol = 8 * n / BW * 1e3                  # 0.1118 ms
    certain = (4 * n - L2) / BW * 1e3         # 0.0428 ms
    ev = _evaluate(monkeypatch, p, latency_ms=0.08)
    assert ev.status == Status.PASSED
    assert ev.sol.sol_ms == pytest.approx(t_sol) and ev.sol.t_certain_ms == pytest.approx(certain)
    assert ev.sol.t_sol_model == "refined" and set(ev.sol.bounds) == {"refined", "solar"}
    assert ev.sol.measured_over_sol == pytest.approx(0.08 / t_sol)
    assert ev.sol.score == 1.0
    f = [x for x in ev.findings if x.check == "sol_bound_violated"]
    assert len(f) == 1 and f[0].severity == "advisory" and "w0" in f[0].message
    assert f[0].evidence["terms_ms"]["dram"] == pytest.approx(t_sol)


def test_below_the_certain_floor_is_faster_than_sol_reward_hack(scale_problem, monkeypatch):
    p = scale_problem(64 << 20)
    ev = _evaluate(monkeypatch, p, latency_ms=0.01)
    assert ev.status == Status.REWARD_HACK and ev.performance is None
    assert [x.check for x in ev.findings if x.severity == "hack"] == ["faster_than_sol"]


def test_a_small_output_is_never_a_hack_only_advisory(scale_problem, monkeypatch):
    p = scale_problem(1 << 20)  # 4 MiB out: fits in L2, nothing certain
    ev = _evaluate(monkeypatch, p, latency_ms=1e-6)
    assert ev.status == Status.PASSED and ev.sol.t_certain_ms == 0.0
    assert [x.check for x in ev.findings] == ["sol_bound_violated"]


def test_cli_sol_many_problems_one_json_object_each(tmp_path):
    from solbench.cli import app

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    for d, n in ((a, 1024), (b, 4096)):
        (d / "p").mkdir()
        (d / "p" / "definition.json").write_text(json.dumps({
            "name": f"p{n}", "axes": {}, "inputs": {"x": {"shape": [n], "dtype": "float32"}},
            "outputs": {"y": {"shape": [n], "dtype": "float32"}},
            "reference": "import torch\ndef run(x):\n    return x * 2\n"}))
        (d / "p" / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": {}, "inputs": {"x": {"type": "random"}}}) + "\n")
    res = CliRunner().invoke(app, ["sol", str(a / "p"), str(b), "--json"])
    assert res.exit_code == 0, res.output
    objs = [json.loads(x) for x in res.stdout.splitlines() if x.strip()]
    assert [o["problem"] for o in objs] == ["p1024", "p4096"]
    w = objs[1]["workloads"][0]
    assert w["sol_ms"] == pytest.approx(8 * 4096 / BW * 1e3) and w["t_sol_model"] == "refined"
    assert set(w["sol_ms_by_model"]) == {"refined", "solar"}


@pytest.mark.skipif(not (DEV / "L1" / "069_rms_norm").exists(), reason="dev dataset absent")
def test_cli_b200_solar_reproduces_the_official_figures():
    from solbench.cli import app

    pdir = DEV / "L1" / "069_rms_norm"
    res = CliRunner().invoke(app, ["sol", str(pdir), "--hardware", "B200", "--model", "solar", "--json"])
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout.splitlines()[0])
    assert obj["hardware"] == "B200_SOLAR" and obj["hardware_requested"] == "B200"
    official = [w["sol_ms"] for w in json.loads((pdir / "metadata.json").read_text())["sol"]["per_workload"]]
    ours = [w["sol_ms"] for w in obj["workloads"]]
    assert all(0.95 <= o / f <= 1.05 for o, f in zip(ours, official))


def test_one_sol_count_per_workload_shared_by_the_candidates_of_a_run(scale_problem, tmp_path, monkeypatch):
    """The bounds depend on the problem and the workload, not the candidate: with one cache
    for the run (the suite runner's, filled ahead by prime_sol) a workload is counted once,
    every candidate's block still carries T_SOL = 8 n / BW, and a different problem whose
    workload has the same uuid gets its own bound. (Counted in a child process: the calls
    are those of ``run_sol._count``, one per workload it is asked for.)"""
    calls = []
    real = run_sol._count

    def counting(items, hardware, *rest):
        calls.extend((problem.name, problem.path, w.uuid) for problem, workloads in items for w in workloads)
        return real(items, hardware, *rest)

    monkeypatch.setattr(run_sol, "_count", counting)
    n = 1 << 20
    p = scale_problem(n)
    cache: dict = {}
    prime_sol(p, ["w0", "no-such-workload"], "H200", cache)
    assert len(calls) == 1
    prime_sol(p, ["w0"], None, cache)  # no hardware (CPU): nothing counted
    assert len(calls) == 1

    class Fake:
        cfg = None

        def __init__(self, problem):
            self.problem = problem

        def evaluate(self, s, on_trace=None, context=None):
            ev = Evaluation(status=Status.PASSED, correctness=Correctness(), environment=Environment(hardware="H200"),
                            performance=Performance(latency_ms=1.0, reference_latency_ms=1.0))
            t = Trace(definition=self.problem.name, solution=s.name, workload=self.problem.workloads[0], evaluation=ev)
            t = judged(t, context)
            on_trace(t)
            return [t]

    def cand(name):
        return Solution.model_validate({"name": name, "definition": p.name, "author": "someone",
                                        "spec": {"languages": ["pytorch"], "entry_point": "m.py::run"},
                                        "sources": [{"path": "m.py", "content": "def run(x):\n    return x * 2\n"}]})

    for name in ("a", "b"):
        ev = evaluate_and_score(p, cand(name), hardware="H200", evaluator=Fake(p),
                                         sol_cache=cache)[0].evaluation
        assert ev.sol.sol_ms == pytest.approx(8 * n / BW * 1e3)
    assert len(calls) == 1  # both candidates used the primed count
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    q = scale_problem(4 * n, root=other_dir)  # same name and workload uuid, another problem
    ev = evaluate_and_score(q, cand("c"), hardware="H200", evaluator=Fake(q),
                                     sol_cache=cache)[0].evaluation
    assert ev.sol.sol_ms == pytest.approx(8 * 4 * n / BW * 1e3) and len(calls) == 2
