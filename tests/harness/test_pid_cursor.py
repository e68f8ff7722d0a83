"""The pid cursor (procfs.pid_cursor) as the process check's fast path
(harness.evidence.process_check): it moves with every process and thread created here, it is
trusted only where the candidate cannot pick its own ids, and a candidate that starts a
process late, after many calls checked by the cursor alone, is still caught in that call."""
import os
import threading
import types
from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate, evidence, sandbox
from solbench.proc import procfs
from solbench.spec import Status, load_solution

from harness_helpers import matmul_problem

HERE = Path(__file__).resolve().parent

needs_cursor = pytest.mark.skipif(not procfs.pid_cursor_moves(),
                                  reason="/proc/loadavg's last pid does not move on this host")
sandboxed = pytest.mark.skipif(sandbox.resolve_mode("cpu")[0] == "none",
                               reason=f"no sandbox here: {sandbox.resolve_mode('cpu')[1]}")


@needs_cursor
def test_the_cursor_is_the_id_of_the_last_process_or_thread_made():
    """After a fork the cursor is the child's pid, after a thread's start its thread id,
    unless another task was made on the host in between (hence a few tries)."""
    def forked() -> tuple[int, int | None]:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        c = procfs.pid_cursor()
        os.waitpid(pid, 0)
        return pid, c

    def thread() -> tuple[int, int | None]:
        ids = []
        t = threading.Thread(target=lambda: ids.append(threading.get_native_id()))
        t.start()
        t.join()
        return ids[0], procfs.pid_cursor()

    for make in (forked, thread):
        seen = []
        for _ in range(10):
            before = procfs.pid_cursor()
            made, after = make()
            assert after != before, (make.__name__, before, after)  # it always moves
            seen.append((made, after))
            if made == after:
                break
        assert any(m == a for m, a in seen), (make.__name__, seen)


def test_a_cursor_that_never_moves_is_not_used(monkeypatch):
    monkeypatch.setattr(procfs, "_CURSOR_MOVES", [])
    monkeypatch.setattr(procfs, "pid_cursor", lambda: 4242)
    assert procfs.pid_cursor_moves() is False
    monkeypatch.setattr(procfs, "_CURSOR_MOVES", [])
    monkeypatch.setattr(procfs, "pid_cursor", lambda: None)
    assert procfs.pid_cursor_moves() is False


class _H:
    def __init__(self, mode, uid):
        self.sandbox = {"mode": mode, "uid": uid}


@needs_cursor
def test_the_cursor_is_trusted_only_where_the_candidate_cannot_pick_its_ids():
    """clone3's set_tid leaves the cursor where it was, and needs a capability over this
    process's user namespace: a candidate running as root here has it."""
    assert evidence._cursor_covers(_H("userns", 0))       # root only in a namespace of its own
    assert evidence._cursor_covers(_H("uid", 1001))
    assert not evidence._cursor_covers(_H("uid", 0))
    assert not evidence._cursor_covers(_H("none", 1001))  # unsandboxed: the harness's own rights
    assert not evidence._cursor_covers(object())


def _counting(monkeypatch) -> dict:
    n = {"cursor": 0, "checks": 0}
    nothing, check = evidence._nothing_started, evidence.process_check

    def counted_nothing(run):
        r = nothing(run)
        n["cursor"] += r
        return r

    def counted_check(*a, **k):
        n["checks"] += 1
        return check(*a, **k)

    monkeypatch.setattr(evidence, "_nothing_started", counted_nothing)
    monkeypatch.setattr(evidence, "process_check", counted_check)
    for mod in ("rounds", "timed", "recheck"):  # they hold the function by name
        import importlib

        m = importlib.import_module(f"solbench.harness.{mod}")
        if hasattr(m, "process_check"):
            monkeypatch.setattr(m, "process_check", counted_check)
    return n


@needs_cursor
@sandboxed
@pytest.mark.parametrize("mode", ["fork", "double"])
def test_a_process_started_late_is_caught_in_that_call(tmp_path, solbench_cache, monkeypatch, mode):
    """cand_late_child.py starts a process at its 20th call, a timed one, after every
    earlier call was checked by the cursor without a walk: ``child_process`` in that call
    (with the cursor ignored, every check skipped once a walk was clean: "double" PASSED,
    "fork" was seen only by the guard check after the timed blocks)."""
    n = _counting(monkeypatch)
    p = matmul_problem(tmp_path, (128,))
    s = load_solution(HERE / "cand_late_child.py", p)
    src = s.sources[0].content.replace('MODE = "fork"', f'MODE = "{mode}"')
    s = s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})
    (t,) = evaluate(p, s, EvalConfig(device="cpu", rounds=2, iters=40))
    ev = t.evaluation
    assert ev.status == Status.REWARD_HACK, (ev.status, ev.findings)
    f = [x for x in ev.findings if x.check == "child_process"]
    when = f[0].evidence.get("when", "") if f else ""
    assert "timed iteration" in when or "warm-up" in when, f
    assert n["cursor"] >= 5, n  # the calls before it were checked by the cursor


@needs_cursor
@sandboxed
def test_an_honest_candidate_is_checked_by_the_cursor_and_passes(tmp_path, solbench_cache, monkeypatch):
    n = _counting(monkeypatch)
    p = matmul_problem(tmp_path, (128,))
    s = load_solution(HERE / "cand_late_child.py", p)
    src = s.sources[0].content.replace("LATE = 20", "LATE = -1")
    s = s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})
    (t,) = evaluate(p, s, EvalConfig(device="cpu", rounds=2, iters=40))
    assert t.evaluation.status == Status.PASSED, (t.evaluation.status, t.evaluation.findings)
    assert n["cursor"] >= n["checks"] // 2, n


@pytest.mark.parametrize("mode", ["prove", "silent"])
def test_the_workers_request_spin_runs_no_code_of_the_candidates(tmp_path, solbench_cache, mode):
    """Red team 30: cand_red30_spin_hook.py rebinds the worker's ``_conn_fd`` (and, on the CPU,
    ``is_cuda``) to objects whose comparison or truth test runs its code. Before, the spin in
    ``Worker.loop`` read them before every request: the hook ran 46 times over 30 calls and the
    candidate PASSED. Now the loop reads both once, before any candidate code, and the parent's
    read of the worker's memory finds them rebound (``harness_patch``)."""
    p = matmul_problem(tmp_path, (128,))
    s = load_solution(HERE / "cand_red30_spin_hook.py", p)
    src = s.sources[0].content.replace('MODE = "silent"', f'MODE = "{mode}"').replace("PROVE_AT = 30", "PROVE_AT = 3")
    s = s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})
    (t,) = evaluate(p, s, EvalConfig(device="cpu", rounds=2, iters=40))
    ev = t.evaluation
    if mode == "prove":  # its third call says how often its hook ran
        assert "SPIN HOOK ran 0 times" in (ev.log or ""), (ev.status, (ev.log or "")[-500:])
    else:
        assert ev.status == Status.REWARD_HACK, (ev.status, ev.findings)
        f = [x for x in ev.findings if x.check == "harness_patch"]
        assert f and "worker._conn_fd" in f[0].message and "worker.is_cuda" in f[0].message, f


class _Run:
    def __init__(self):
        self.h = types.SimpleNamespace(pid=4242, sandbox={"mode": "uid", "uid": 1001},
                                       outside_worker_tree=lambda: [])
        self.findings, self.kids_seen, self.clean_mark = [], None, None


@needs_cursor
@pytest.mark.parametrize("during_walk, marked", [
    ((100, 50), True),    # nothing made or reaped on the host while the walk read its files
    ((100, 49), False),   # a task reaped meanwhile: a process may have moved between two files
    ((101, 51), False),   # a task made meanwhile
])
def test_a_walk_is_trusted_for_the_cursor_only_if_the_host_stood_still(monkeypatch, during_walk, marked):
    """Red team 30 (cand_red30_reparent_race.py): a child C of a candidate thread exits and is
    reaped while the parent reads the worker's ``children`` files one thread at a time; its
    child G, re-parented to the worker's leader (the subreaper) without a new id, was in no file
    the walk read, the walk looked clean, and the cursor never moved again (PASSED in 1 of 6
    tries, G alive through every timed call). The mark is now kept only when the host's task
    count and cursor (one read of /proc/loadavg) are the same before and after the walk."""
    marks = iter([(100, 50), during_walk])
    monkeypatch.setattr(procfs, "task_mark", lambda: next(marks))
    monkeypatch.setattr(procfs, "descendants", lambda pid: set())
    monkeypatch.setattr(evidence, "unregistered_children", lambda: [])
    run = _Run()
    assert evidence.process_check(run, set(), "in a test", late=True) is False
    assert run.findings == [] and run.kids_seen == set()
    assert run.clean_mark == (100 if marked else None)


def test_the_workers_changing_state_of_a_foreign_type_is_a_hack(tmp_path, solbench_cache):
    """The family of the spin's fd (red team 30), for the state that changes during a run and
    so cannot be pinned: ``markers`` replaced by a ``str`` subclass whose ``__eq__`` runs the
    candidate's code is ``interposition`` at the call after it was set."""
    p = matmul_problem(tmp_path, (128,))
    (t,) = evaluate(p, load_solution(HERE / "cand_state_str_subclass.py", p),
                    EvalConfig(device="cpu", rounds=2, iters=10))
    ev = t.evaluation
    assert ev.status == Status.REWARD_HACK, (ev.status, ev.findings)
    f = [x for x in ev.findings if x.check == "interposition"]
    assert f and "markers: " in str(f[0].evidence) and "_Markers" in str(f[0].evidence), f


def test_the_workers_state_types_at_start_are_all_allowed():
    """Every attribute the check reads holds an allowed type in a fresh worker (no candidate):
    the check flags nothing by itself."""
    class _Conn:
        def send_bytes(self, *a):
            pass

        def fileno(self):
            return -1

    from solbench.harness import worker as W

    w = W.Worker(_Conn(), "cpu")
    assert W.Worker._foreign_state(w) == []
    w.__dict__["timed_n"] = 3.0
    assert W.Worker._foreign_state(w) == ["timed_n: builtins.float"]
