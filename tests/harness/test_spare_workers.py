"""Workers started ahead (SparePool) and timed windows: a spare never runs while anything is
timed, no two timed windows of one device overlap, a spare is handed out once (every
candidate still gets a fresh process), spares started while a candidate crashed are dropped,
and state a candidate leaves in its worker does not carry into another verdict.

Every evaluation spawns real sandboxed worker processes on the CPU (small configs)."""

import os
import subprocess
import sys
import threading
import time

import pytest

from solbench.harness import EvalConfig, Evaluator
from solbench.harness import timed as timed_mod
from solbench.harness.workers import TIMED_WINDOWS, SparePool, timed_window
from solbench.spec import Status, load_problem, reference_solution
from solbench.run.session import make_default_evaluator

from harness_helpers import py_solution, write_problem

REF = "import torch\n\ndef run(x):\n    return torch.softmax(x, dim=-1)\n"
DEF = {"name": "spare_softmax", "axes": {"rows": {"type": "var"}, "cols": {"type": "const", "value": 16}},
       "inputs": {"x": {"shape": ["rows", "cols"], "dtype": "float32"}},
       "outputs": {"y": {"shape": ["rows", "cols"], "dtype": "float32"}}, "reference": REF}

#: honest, but leaves marks everywhere in its own process a later candidate could look
LEAVER = """import builtins, os, sys, types
import torch

def run(x):
    builtins.SOLBENCH_LEFTOVER = os.getpid()
    sys.modules.setdefault("solbench_leftover", types.ModuleType("solbench_leftover"))
    os.environ["SOLBENCH_LEFTOVER"] = "1"
    torch.SOLBENCH_LEFTOVER = True
    return torch.softmax(x, dim=-1)
"""

#: honest unless its process holds any mark LEAVER leaves: then all zeros (INCORRECT)
DETECTOR = """import builtins, os, sys
import torch

def _left():
    return [n for n, hit in (("builtins", hasattr(builtins, "SOLBENCH_LEFTOVER")),
                             ("sys.modules", "solbench_leftover" in sys.modules),
                             ("environ", "SOLBENCH_LEFTOVER" in os.environ),
                             ("torch", hasattr(torch, "SOLBENCH_LEFTOVER"))) if hit]

AT_IMPORT = _left()

def run(x):
    if AT_IMPORT or _left():
        return torch.zeros_like(x)
    return torch.softmax(x, dim=-1)
"""

#: correct on its first workload, then replays that output (state kept in its worker)
REPLAY = """import torch

_seen = []

def run(x):
    if _seen:
        return _seen[0].clone()
    y = torch.softmax(x, dim=-1)
    _seen.append(y.clone())
    return y
"""

CRASH = "import os\n\ndef run(x):\n    os._exit(9)\n"


@pytest.fixture(scope="module")
def problem(tmp_path_factory, solbench_cache):
    wls = [{"uuid": f"w{i}", "axes": {"rows": 4}, "inputs": {"x": {"type": "random"}}} for i in range(2)]
    return load_problem(write_problem(tmp_path_factory.mktemp("spare_softmax"), DEF, wls))


def cfg(**kw) -> EvalConfig:
    base = dict(device="cpu", rounds=5, iters=3, warmup=1, seed=11, first_call_timeout_s=30.0,
                call_timeout_s=30.0, build_timeout_s=120.0)
    base.update(kw)
    return EvalConfig(**base)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, utime + stime in clock ticks) of ``pid``; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return rest[0], int(rest[11]) + int(rest[12])


def _wait_ready(pool: SparePool, n: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while pool.ready() < n:
        assert time.monotonic() < deadline, "spares did not start"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def test_a_spare_asked_for_inside_a_timed_window_waits_to_fork(solbench_cache):
    """No fork of the parent inside a window (it slows the parent's own round trips): the
    spare's process appears only after the window closes, then it starts."""
    pool = SparePool("cpu", 1)
    h = None
    try:
        with timed_window("cpu", "test: spare inside"):
            pool.fill()
            time.sleep(1.5)
            assert pool.pids() == [] and pool.ready() == 0
        _wait_ready(pool, 1)
        h = pool.take()  # the window closed: it started
        assert h is not None and h.alive and getattr(h, "profiler_warm", False)
        assert _stat(h.pid)[0] != "T"
        assert pool.take() is None  # handed out once; the pool is empty until filled
    finally:
        pool.close()
        if h is not None:
            h.close()


def test_a_spare_dropped_while_starting_is_killed_not_waited_for(solbench_cache, monkeypatch):
    """close() (and discard()) end a spare still starting by killing its process tree: it
    never finishes its start (no profiler warm-up reply), and nothing of it is left."""
    from solbench.harness import protocol

    warmed: list[int] = []
    real = protocol.request

    def spy(h, req, **kw):
        rep = real(h, req, **kw)
        if isinstance(req, protocol.WarmProfiler):
            warmed.append(h.pid)
        return rep

    monkeypatch.setattr(protocol, "request", spy)
    pool = SparePool("cpu", 2)
    try:
        pool.fill()
        deadline = time.monotonic() + 60
        while len(pool._boxes) < 2 or any(b["proc"] is None for b in pool._boxes):
            assert time.monotonic() < deadline, "spares did not spawn"
            time.sleep(0.01)
        procs = [b["proc"] for b in pool._boxes]
        tree = set(pool.pids())
    finally:
        pool.close()
    assert warmed == [], "close() waited for a spare to finish starting"
    assert all(p.poll() is not None for p in procs)
    deadline = time.monotonic() + 30  # a SIGKILLed process is gone once the kernel reaps it
    while [p for p in tree if _alive(p)] and time.monotonic() < deadline:
        time.sleep(0.05)
    from solbench.harness import guards

    left = [p for p in tree if _alive(p)]
    assert not left, {p: guards.cmdline(p) for p in left}


def test_a_started_spare_is_stopped_for_a_whole_window(solbench_cache):
    pool = SparePool("cpu", 1)
    try:
        pool.fill()
        deadline = time.monotonic() + 60
        while not pool.pids():  # spawned, still starting or started
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with timed_window("cpu", "test: spare stopped"):
            before = {p: _stat(p) for p in pool.pids()}
            time.sleep(1.0)
            after = {p: _stat(p) for p in pool.pids()}
            assert set(after) == set(before), "a stopped process forked"
            for p, st in after.items():
                assert st is not None and st[0] == "T", (p, st)
                assert st[1] == before[p][1], f"pid {p} used CPU while stopped"
        _wait_ready(pool, 1)
    finally:
        pool.close()


def test_timed_windows_of_one_device_never_overlap():
    inside = threading.Event()
    spans: dict[str, tuple[float, float]] = {}

    def hold(name: str, wait: threading.Event | None) -> None:
        if wait is not None:
            wait.wait()
        with timed_window("cpu", name):
            t0 = time.monotonic()
            inside.set()
            time.sleep(0.3)
            spans[name] = (t0, time.monotonic())

    a = threading.Thread(target=hold, args=("a", None))
    b = threading.Thread(target=hold, args=("b", inside))
    a.start()
    b.start()
    a.join()
    b.join()
    assert spans["b"][0] >= spans["a"][1]  # b waited for a's window to close
    with timed_window("cpu", "outer"):
        with pytest.raises(RuntimeError, match="inside another"):
            with timed_window("cpu", "inner"):
                pass
    with timed_window("cuda:1", "other device"):  # another device's window is independent
        with timed_window("cpu", "cpu inside cuda:1"):
            pass


def test_spares_are_stopped_during_every_timed_window_of_an_evaluation(problem, monkeypatch):
    pool = SparePool("cpu", 3)  # one is left in the pool while the first window opens
    seen: list[list[tuple[int, str]]] = []
    real = timed_mod.TimedBlocks.time

    def spy(self):
        seen.append([(p, (_stat(p) or ("gone", 0))[0]) for p in pool.pids()])
        return real(self)

    monkeypatch.setattr(timed_mod.TimedBlocks, "time", spy)
    try:
        pool.fill()
        _wait_ready(pool, 3)
        n0 = len(TIMED_WINDOWS)
        ev = Evaluator(problem, cfg(), spares=pool)
        try:
            traces = ev.evaluate(reference_solution(problem))
        finally:
            ev.close()
        assert [t.evaluation.status for t in traces] == [Status.PASSED, Status.PASSED]
        assert pool.handed_out == 2  # the candidate's worker and the reference's
        assert len(seen) == 2 and all(seen), "no spare was there to check"
        for states in seen:
            assert all(s == "T" for _, s in states), states
        mine = [w for w in list(TIMED_WINDOWS)[n0:] if w[0] == "cpu"]
        assert len(mine) == 2
        for (_, a0, a1, _), (_, b0, b1, _) in zip(mine, mine[1:]):
            assert b0 >= a1
        _wait_ready(pool, 3)  # refilled during the run, and running now
        assert all(_stat(p)[0] != "T" for p in pool.pids() if _stat(p))
    finally:
        pool.close()


def test_detector_sees_what_the_leaver_leaves(tmp_path):
    """The state-reset test below can fail: in one process the detector sees the marks."""
    (tmp_path / "leaver.py").write_text(LEAVER)
    (tmp_path / "detector.py").write_text(DETECTOR)
    code = ("import sys, torch; sys.path.insert(0, sys.argv[1]); import leaver; "
            "x = torch.randn(4, 16); leaver.run(x); import detector; "
            "print(bool((detector.run(x) == 0).all()))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "True", out.stderr[-2000:]


def test_state_left_in_a_worker_does_not_reach_the_next_candidate(problem):
    """One run (the suite runner's evaluator, spares on): the leaver passes, then the
    detector gets workers from the same pool and still passes: no spare it got had run the
    leaver's code, and the kept reference worker never runs candidate code."""
    ev = make_default_evaluator(EvalConfig(rounds=5, iters=3, warmup=1, seed=11, spare_workers=2))
    try:
        left = ev(problem, py_solution("leaver", LEAVER, problem.name), "cpu", ["w0", "w1"])
        pool = ev.spares
        assert [t.evaluation.status for t in left] == [Status.PASSED, Status.PASSED]
        _wait_ready(pool, 2)
        det = ev(problem, py_solution("detector", DETECTOR, problem.name), "cpu", ["w0", "w1"])
        assert [t.evaluation.status for t in det] == [Status.PASSED, Status.PASSED], \
            [t.evaluation.log[-500:] for t in det]
        # the leaver's and the reference's workers started with the run; the detector's is a
        # spare started while the leaver ran (the reference's worker is kept)
        assert pool.handed_out == 1
    finally:
        ev.close()


def test_workers_started_ahead_of_the_first_pair_are_handed_out_once(problem):
    """start_ahead (the demo's) starts the pool before any pair: the first pair's candidate
    and reference workers are both taken from it, each once; the next candidate still gets
    a worker that never ran the first one's code (the detector passes)."""
    ev = make_default_evaluator(EvalConfig(rounds=5, iters=3, warmup=1, seed=11, spare_workers=2))
    try:
        ev.start_ahead("cpu", [(problem, ["w0"])])  # no SOL on the CPU: only the pool
        pool = ev.spares
        assert pool is not None and pool.started == 2 and pool.handed_out == 0
        left = ev(problem, py_solution("leaver", LEAVER, problem.name), "cpu", ["w0"])
        assert [t.evaluation.status for t in left] == [Status.PASSED]
        assert pool.handed_out == 2 and ev.spares is pool  # candidate and reference, from it
        _wait_ready(pool, 2)
        det = ev(problem, py_solution("detector", DETECTOR, problem.name), "cpu", ["w0"])
        assert [t.evaluation.status for t in det] == [Status.PASSED], [t.evaluation.log[-500:] for t in det]
        assert pool.handed_out == 3
    finally:
        ev.close()


def test_state_kept_across_workloads_of_one_worker_does_not_pass(problem):
    """The candidate's worker serves all its workloads; what it keeps from one (a replayed
    output) meets fresh inputs in the next."""
    ev = Evaluator(problem, cfg(timing=False))
    try:
        traces = ev.evaluate(py_solution("replay", REPLAY, problem.name))
    finally:
        ev.close()
    # caught either way: a wrong answer, or, since harness/replay.py, the replayed output
    # named a cache (cached_output)
    assert len(traces) == 2
    assert all(t.evaluation.status in (Status.INCORRECT_NUMERICAL, Status.REWARD_HACK) for t in traces), \
        [t.evaluation.status for t in traces]


def test_spares_started_while_a_candidate_crashed_are_dropped(problem):
    pool = SparePool("cpu", 3)
    try:
        pool.fill()
        _wait_ready(pool, 3)
        before = pool.pids()
        ev = Evaluator(problem, cfg(workloads=["w0"]), spares=pool)
        try:
            traces = ev.evaluate(py_solution("crash", CRASH, problem.name))
        finally:
            ev.close()
        assert traces[0].evaluation.status == Status.RUNTIME_ERROR
        time.sleep(0.5)
        assert not [p for p in before if _alive(p)], "a spare of the crashed candidate's time lives on"
        assert not set(pool.pids()) & set(before)
    finally:
        pool.close()
    assert not pool.pids()
