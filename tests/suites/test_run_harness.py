"""`solbench run` on a small CPU subset of l1 with the real harness, resumed half-way.
Skipped (with the reason) while solbench.harness.evaluate does not exist yet."""

import json
import shutil

import pytest
from typer.testing import CliRunner

from solbench.suites import DATA_ROOT

try:
    from solbench.harness import EvalConfig, evaluate  # noqa: F401
    HARNESS = None
except ImportError as e:  # pragma: no cover - depends on the harness landing
    HARNESS = str(e)

pytestmark = pytest.mark.skipif(HARNESS is not None, reason=f"harness not available: {HARNESS}")

CANDS = {
    "relu_fp32": ("import torch\n\ndef run(x):\n    return torch.relu(x)\n",
                  "import torch\n\ndef run(x):\n    return torch.zeros_like(x)\n"),
    "cumsum_fp32": ("import torch\n\ndef run(x):\n    return torch.cumsum(x, dim=1)\n", None),
}


def _write_candidates(sols):
    """:data:`CANDS` as candidate files under ``sols``: eager.py (and trivial.py) per problem."""
    for name, (good, trivial) in CANDS.items():
        (sols / name).mkdir(parents=True)
        (sols / name / "eager.py").write_text(good)
        if trivial:
            (sols / name / "trivial.py").write_text(trivial)
    return sols


def test_run_small_cpu_subset_with_resume(tmp_path):
    from solbench.cli import app

    sols = _write_candidates(tmp_path / "sols")
    out = tmp_path / "res.jsonl"
    base = ["run", "l1", "--solutions", str(sols), "-o", str(out), "--tag", "cpu",
            "--device", "cpu", "--json", "--iters", "3", "--rounds", "2"]
    # half: the first problem
    r1 = CliRunner().invoke(app, base + ["--problem", "relu_fp32"])
    assert r1.exit_code == 0, (r1.stdout, r1.stderr if hasattr(r1, "stderr") else "")
    assert json.loads(r1.stdout)["evaluated_now"] == 2
    r2 = CliRunner().invoke(app, base + ["--problem", "relu_fp32", "--problem", "cumsum_fp32",
                                         "--resume"])
    assert r2.exit_code == 0, r2.output
    d = json.loads(r2.stdout)
    assert d["evaluated_now"] == 1  # only cumsum's eager candidate
    s = d["summary"]
    assert s["eager"]["correct_rate"] == 1.0
    assert s["trivial"]["correct_rate"] == 0.0 and s["trivial"]["win_rate"] == 0.0
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    assert d["summary"]["eager"]["units"] == 2 and d["summary"]["all"]["units"] == 3


def test_candidates_of_one_problem_share_the_reference_worker(tmp_path, monkeypatch):
    """Three candidates of relu_fp32 with reference timing: 3 candidate workers + 1 reference
    worker (not 3); after a candidate that cheats, the reference worker is started afresh."""
    from solbench.harness import process
    from solbench.spec import load_problem
    from solbench.run import plan as R
    from solbench.run.executors.local import execute
    from solbench.suites.runner import write_eager_candidates

    started = []
    real_init = process.WorkerHandle.__init__

    def counting_init(self, *a, **k):
        started.append(1)
        return real_init(self, *a, **k)

    monkeypatch.setattr(process.WorkerHandle, "__init__", counting_init)
    sols = tmp_path / "sols" / "relu_fp32"
    sols.mkdir(parents=True)
    good = CANDS["relu_fp32"][0]
    (sols / "a.py").write_text(good)
    (sols / "b.py").write_text(good + "# b\n")
    (sols / "c.py").write_text(good + "# c\n")
    paths = [DATA_ROOT / "l1" / "relu_fp32"]
    plan = R.plan_run(paths, tmp_path / "sols", set(), tags=["cpu"])
    assert len(plan.pairs) == 3
    # every worker started is counted: no spares (started ahead, some never used; their
    # handing out is tests/harness/test_spare_workers.py's)
    from solbench.harness import EvalConfig

    cfg = EvalConfig(iters=3, rounds=2, spare_workers=0)
    out = execute(plan, tmp_path / "r.jsonl", "cpu", config=cfg)
    assert [t.evaluation.status.value for t in out.traces] == ["PASSED"] * 3
    assert all(t.evaluation.reference_timing is not None for t in out.traces)
    assert len(started) == 4
    # a cheating candidate in the middle: its REWARD_HACK drops the shared reference worker
    started.clear()
    (sols / "b.py").write_text("import time\nimport torch\n\ndef run(x):\n"
                               "    time.perf_counter = lambda: 0.0\n    return torch.relu(x)\n")
    plan = R.plan_run(paths, tmp_path / "sols", set(), tags=["cpu"])
    out = execute(plan, tmp_path / "r2.jsonl", "cpu", config=cfg)
    assert [t.evaluation.status.value for t in out.traces] == ["PASSED", "REWARD_HACK", "PASSED"]
    assert len(started) == 5  # a, ref, b, c, a fresh ref for c


def test_a_run_counts_every_problems_sol_bounds_in_one_child_before_timing(tmp_path, monkeypatch):
    """Two problems, three candidates: the SOL bounds of every workload to evaluate are
    counted in one call of the counting child (not one child per problem), before the first
    pair is evaluated, and each PASSED trace's SOL block carries them. SOL is priced for the
    H200 here (on the CPU a run has none)."""
    from solbench.harness import EvalConfig
    from solbench.run import sol as run_sol
    from solbench.run import plan as R
    from solbench.run.executors.local import execute
    from solbench.suites.runner import write_eager_candidates

    events = []
    real_count = run_sol._count

    def spy(items, hw, *rest):
        events.append(("count", sorted((p.name, len(ws)) for p, ws in items)))
        return real_count(items, hw, *rest)

    monkeypatch.setattr(run_sol, "resolve_hardware", lambda device, hw: "H200")
    monkeypatch.setattr(run_sol, "_count", spy)
    sols = _write_candidates(tmp_path / "sols")
    paths = [DATA_ROOT / "l1" / n for n in CANDS]
    plan = R.plan_run(paths, sols, set(), tags=["cpu"])
    assert len(plan.pairs) == 3
    n_wl = {p.problem.name: len(p.todo) for p in plan.pairs}
    out = execute(plan, tmp_path / "r.jsonl", "cpu",
                    config=EvalConfig(iters=3, rounds=2, spare_workers=0),
                    on_trace=lambda pair, t: events.append(("trace", pair.problem.name)))
    assert events[0] == ("count", sorted(n_wl.items()))
    assert [e for e in events if e[0] == "count"] == [events[0]]
    passed = [t for t in out.traces if t.evaluation.status.value == "PASSED"]
    assert len(passed) == sum(n_wl.values())  # both eager candidates, every workload
    assert all(t.evaluation.sol and t.evaluation.sol.sol_ms > 0 for t in passed)
