"""The default SOL counts cache (issue 29 goal 4): where it lives, that only entries signed
with the user's key are believed (a planted entry is a planted T_SOL), that a warm `solbench
sol` and a problem's second evaluation start no counting child, and that an evaluation's count
runs alongside it rather than before its first workload."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solbench.run.session import evaluate_and_score
from solbench.run import sol as run_sol
from solbench.sol import load_hardware
from solbench.sol.batch import problem_counts, problem_rows
from solbench.sol.cache import CountsCache, counts_to_json, default_cache_dir, workload_key
from solbench.sol.isolated import CountingChild

N = 1000  # fp32 elements: y = 2 x reads 4 kB and writes 4 kB


def test_default_cache_dir_follows_the_variable_then_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv("SOLBENCH_SOL_CACHE", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    for off in ("off", "0", "none", ""):
        monkeypatch.setenv("SOLBENCH_SOL_CACHE", off)
        assert default_cache_dir() is None
    monkeypatch.delenv("SOLBENCH_SOL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "solbench" / "sol-counts"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "solbench" / "sol-counts"


def _forge(cache_root: Path, problem, w, scale: float, mac: str | None = None) -> None:
    """Write at ``w``'s cache path a count of ``problem`` whose bytes are ``scale`` times the
    true ones (what a candidate writing into the cache folder would plant)."""
    (c,) = problem_counts(problem, [w])
    c.inputs = [(nm, n, b * scale, cls, r) for nm, n, b, cls, r in c.inputs]
    c.output_writes = [(n, b * scale, cls, wr, a) for n, b, cls, wr, a in c.output_writes]
    c.outputs = [(n, b * scale, cls) for n, b, cls in c.outputs]
    key = workload_key(problem, w)
    p = cache_root / key[:2] / f"{key}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    entry = {"counts": counts_to_json(c)}
    if mac is not None:
        entry["mac"] = mac
    p.write_text(json.dumps(entry))


def test_only_entries_signed_with_the_key_are_believed(tmp_path, scale_problem):
    p = scale_problem(N)
    (w,) = p.workloads
    hw = load_hardware("H200")
    key = bytes(range(32))
    cache = CountsCache(tmp_path / "c", key=key)
    true = problem_rows(p, hw, "refined")["workloads"][0]["sol_ms"]
    # hand-worked: 8 kB at the H200's 4.8 TB/s
    assert true == pytest.approx(2 * 4 * N / 4.8e12 * 1e3)

    # the forged entry matters: a cache that trusts unsigned entries prices the workload lower
    _forge(tmp_path / "open", p, w, 0.01)
    forged = problem_rows(p, hw, "refined", cache=CountsCache(tmp_path / "open"))["workloads"][0]["sol_ms"]
    assert forged < true / 1.5
    # a planted entry without a MAC, then with a made-up one: misses, counted afresh
    for mac in (None, "00" * 32):
        _forge(tmp_path / "c", p, w, 0.01, mac)
        assert cache.get(p, w) is None
        assert problem_rows(p, hw, "refined", cache=cache)["workloads"][0]["sol_ms"] == pytest.approx(true)
    # the count just stored is signed and read back; the same file under another key is a miss
    assert cache.get(p, w) is not None
    assert CountsCache(tmp_path / "c", key=bytes(32)).get(p, w) is None
    # an edited signed entry is a miss
    path = next((tmp_path / "c").rglob("*.json"))
    entry = json.loads(path.read_text())
    entry["counts"]["inputs"][0][2] *= 0.01
    path.write_text(json.dumps(entry))
    assert cache.get(p, w) is None


def test_a_warm_sol_command_starts_no_counting_child(tmp_path, scale_problem, monkeypatch):
    from solbench.cli import app

    p = scale_problem(N)
    monkeypatch.setenv("SOLBENCH_SOL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SOLBENCH_DATA_DIR", str(tmp_path / "data"))
    starts = []
    real_start = CountingChild._start

    def counted_start(self):
        starts.append(1)
        return real_start(self)

    monkeypatch.setattr(CountingChild, "_start", counted_start)
    args = ["sol", str(p.path), "--hardware", "H200", "--json"]
    cold = CliRunner().invoke(app, args)
    assert cold.exit_code == 0, cold.output
    assert len(starts) == 1
    warm = CliRunner().invoke(app, args)
    assert warm.exit_code == 0, warm.output
    assert len(starts) == 1  # nothing counted the second time
    row = lambda r: json.loads(r.stdout.splitlines()[0])["workloads"][0]  # noqa: E731
    assert row(warm)["sol_ms"] == row(cold)["sol_ms"] == pytest.approx(2 * 4 * N / 4.8e12 * 1e3)
    # --no-cache counts afresh
    again = CliRunner().invoke(app, args + ["--no-cache"])
    assert again.exit_code == 0 and len(starts) == 2


def _eval(p, **kw):
    from solbench.harness import EvalConfig
    from solbench.spec.problem import reference_solution

    cfg = EvalConfig(device="cpu", iters=3, rounds=2, spare_workers=0)
    return evaluate_and_score(p, reference_solution(p), cfg, hardware="H200", **kw)


@pytest.mark.slow
def test_the_count_runs_alongside_the_evaluation_and_a_second_one_counts_nothing(tmp_path, scale_problem,
                                                                                 monkeypatch):
    from solbench.harness import Evaluator

    p = scale_problem(N)
    monkeypatch.setenv("SOLBENCH_SOL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SOLBENCH_DATA_DIR", str(tmp_path / "data"))
    events: list[tuple[str, float]] = []
    real_prime, real_evaluate = run_sol.prime_sol_many, Evaluator.evaluate

    def slow_prime(*a, **k):
        time.sleep(3.0)  # a count slower than the evaluation's start
        real_prime(*a, **k)
        events.append(("counted", time.monotonic()))

    def spy_evaluate(self, *a, **k):
        events.append(("evaluating", time.monotonic()))
        return real_evaluate(self, *a, **k)

    monkeypatch.setattr(run_sol, "prime_sol_many", slow_prime)
    monkeypatch.setattr(Evaluator, "evaluate", spy_evaluate)
    (t,) = _eval(p)
    assert [e for e, _ in events] == ["evaluating", "counted"]
    assert t.evaluation.status.value == "PASSED"
    assert t.evaluation.sol.sol_ms == pytest.approx(2 * 4 * N / 4.8e12 * 1e3)

    # the second evaluation of the problem reads the bound from the cache: no child at all
    monkeypatch.setattr(run_sol, "prime_sol_many", real_prime)
    monkeypatch.setattr(CountingChild, "_start", lambda self: (_ for _ in ()).throw(
        AssertionError("a counting child was started for a cached bound")))
    (t2,) = _eval(p)
    assert t2.evaluation.sol.sol_ms == t.evaluation.sol.sol_ms
    assert not [th for th in threading.enumerate() if th.name == "solbench-sol-count"]
