"""``solbench eval`` starts the workers one evaluation takes at its process start (a one-shot
spare pool: on CUDA by default, ``--spare-workers N`` elsewhere), so a worker's start overlaps
the parent's own imports and loading. The verdict is the one a late start gives; a device
the machine lacks still ends with one line, and no worker outlives the command."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from workers_below import my_workers as _my_workers, subreaper as _subreaper  # noqa: E402


def _eval(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "solbench", "eval", "l1/relu_fp32", "-w", "0", "--device", "cpu",
                           "--rounds", "1", "--iters", "4", "--seed", "7", "--json", *args],
                          capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.slow
def test_early_workers_give_the_late_start_verdict():
    late = _eval()
    early = _eval("--spare-workers", "2")
    assert late.returncode == 0 and early.returncode == 0, (late.stderr[-2000:], early.stderr[-2000:])
    [lt], [et] = json.loads(late.stdout), json.loads(early.stdout)
    assert lt["evaluation"]["status"] == et["evaluation"]["status"] == "PASSED"
    assert lt["workload"]["uuid"] == et["workload"]["uuid"]
    # a worker started when it was needed reports its start's steps; one taken from the
    # pool started before the evaluation asked for it, and reports none
    assert "worker_start.imports" in lt["evaluation"]["phases_s"]
    assert not any(k.startswith("worker_start.") for k in et["evaluation"]["phases_s"])


@pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="needs a machine without CUDA")
def test_a_missing_device_ends_with_one_line_and_no_worker_left():
    _subreaper()
    before = _my_workers()
    r = subprocess.run([sys.executable, "-m", "solbench", "eval", "l1/relu_fp32", "--device", "cuda:3",
                        "--spare-workers", "2"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert r.returncode != 0
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "--device" in lines[0] and "cuda:3" in lines[0], r.stderr
    time.sleep(0.5)  # a killed tree's last processes are reaped and gone
    assert _my_workers() - before == set()


@pytest.mark.slow
def test_a_counting_child_started_early_counts_the_bound_and_none_is_left(tmp_path):
    """With early workers and a named hardware, ``solbench eval`` starts its SOL counting child
    at process start too. Cold counts cache: the child counts the bound (refined: relu over
    8,000 fp32 elements reads 32,000 bytes and writes 32,000, at the H200's 4.8 TB/s 13.3 ns);
    filled cache: the child is not needed and is ended. Either way no counting child outlives
    the command."""
    _subreaper()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    sols = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-m", "solbench", "eval", "l1/relu_fp32", "-w", "0", "--device", "cpu",
                            "--rounds", "1", "--iters", "4", "--seed", "7", "--json", "--spare-workers", "2",
                            "--hardware", "H200"], capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        [t] = json.loads(r.stdout)
        sols.append(t["evaluation"]["sol"])
        time.sleep(0.5)
        assert _my_workers(b"solbench.sol.isolated") == set()
    assert sols[0]["sol_ms"] == sols[1]["sol_ms"] == pytest.approx(64_000 / 4.8e12 * 1e3, rel=1e-9)


def test_the_counting_child_is_started_early_only_when_a_count_will_be_needed(tmp_path, monkeypatch):
    """``_early_counter`` spawns no child when the counts cache covers every selected workload
    (a child for nothing imports torch beside the parent and the workers), nor with SOL off,
    nor on the CPU without ``--hardware``; ``_cached_counts_cover`` is true once the counts of
    the selected workloads are in the default cache, and only for those."""
    from solbench.cli import evaluate as ev
    from solbench.run.sol_cache import counts_cache
    from solbench.sol import count_workload, isolated
    from solbench.spec import load_problem
    from solbench.suites import resolve_problem

    calls = []
    monkeypatch.setattr(isolated, "prestart", lambda registry=None: calls.append(registry))
    pool = object()
    ev._early_counter(pool, "H200", "cpu", lambda: True)
    ev._early_counter(pool, "none", "cuda", lambda: False)
    ev._early_counter(pool, None, "cpu", lambda: False)
    ev._early_counter(None, "H200", "cuda", lambda: False)
    assert calls == []
    ev._early_counter(pool, None, "cuda:0", lambda: False)
    ev._early_counter(pool, "H200", "cpu", lambda: False)
    assert len(calls) == 2

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("SOLBENCH_SOL_CACHE", raising=False)
    path = resolve_problem("l1/relu_fp32")
    assert not ev._cached_counts_cover(path, "0", None, None)
    p = load_problem(path)
    counts_cache().put(p, p.workloads[0], count_workload(p, p.workloads[0]))
    assert ev._cached_counts_cover(path, "0", None, None)
    if len(p.workloads) > 1:
        assert not ev._cached_counts_cover(path, None, None, None)  # the others are not cached
