"""The mid-block thread rule (harness/evidence.py, ``outlived_a_call``): a thread new after one
timed call counts as a background thread when it is still alive after a later call and ran in
it (its CPU time, read by the kernel, moved). Worked by hand with given CPU times, and the
CPU-time reading (``procfs.thread_run_ns``) checked on real threads."""
import os
import threading
import time

from solbench.harness.evidence import outlived_a_call
from solbench.proc import procfs


def test_only_threads_alive_that_ran_count():
    pid, me = os.getpid(), threading.get_native_id()  # a thread that exists: this one
    gone = 4194301  # above the kernel's largest pid (pid_max is at most 2**22): no such thread
    pending = {11: 100, 12: 100, 13: None, 14: 100, me: 100, gone: 100}
    after = {11: 100, 12: 150, 13: 7}  # 14 exited; me and gone cannot be read
    got = outlived_a_call(pid, pending, now={11, 12, 13, me, gone, 99}, run_ns=lambda p, t: after.get(t))
    # 11 alive but got no CPU: left pending; 12 ran; 13 unread before counts as run; 14 exited;
    # me unreadable but alive counts as run; gone listed but exited before its read does not;
    # 99 was not pending (new in this call: pending from now on, judged after the next call).
    # (11, 12, 13 are not threads of this process: only an unreadable CPU time looks at /proc)
    assert got == {12, 13, me}
    assert outlived_a_call(pid, {}, now={1, 2}, run_ns=lambda p, t: 0) == set()


def test_thread_run_ns_moves_only_while_the_thread_runs():
    pid = os.getpid()
    stop, hold = threading.Event(), threading.Event()

    def spin():
        while not stop.is_set():
            pass

    def wait():
        hold.wait()

    ts = [threading.Thread(target=f, daemon=True) for f in (spin, wait)]
    for t in ts:
        t.start()
    try:
        time.sleep(0.05)
        spin_tid, wait_tid = ts[0].native_id, ts[1].native_id
        a = procfs.thread_run_ns(pid, spin_tid), procfs.thread_run_ns(pid, wait_tid)
        if a[0] is None:  # a kernel without schedstat: the rule then counts every thread
            assert a[1] is None
            return
        time.sleep(0.1)
        b = procfs.thread_run_ns(pid, spin_tid), procfs.thread_run_ns(pid, wait_tid)
        assert b[0] > a[0]  # the spinning thread got CPU time (at least some of 100 ms)
        assert b[1] == a[1]  # the blocked one none
        assert procfs.thread_run_ns(pid, threading.get_native_id()) > 0
    finally:
        stop.set()
        hold.set()
        for t in ts:
            t.join()
    # gone (a joined thread's task can linger in /proc a moment after join returns)
    t_end = time.monotonic() + 5
    while procfs.thread_run_ns(pid, wait_tid) is not None and time.monotonic() < t_end:
        time.sleep(0.01)
    assert procfs.thread_run_ns(pid, wait_tid) is None
