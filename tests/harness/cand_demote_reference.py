"""Hostile (slow the eager reference without any helper process; red team 2026-11-30): the candidate computes the
right answer, but on every call it looks up its sibling workers (children of its parent that
run solbench.harness.worker) and demotes every thread of them: SCHED_IDLE, nice 19, pinned to
one CPU. The SIGSTOP that freezes the candidate while the reference is timed does not undo
scheduler attributes set on another process. The reference's time, hence the speedup, is then
whatever the rest of the host leaves it."""
import os

import torch


def _demote():
    me = os.getpid()
    ppid = os.getppid()
    try:
        kids = set()
        for t in os.listdir(f"/proc/{ppid}/task"):
            with open(f"/proc/{ppid}/task/{t}/children") as f:
                kids.update(int(x) for x in f.read().split())
    except OSError:
        return
    for pid in kids - {me}:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"solbench.harness.worker" not in f.read():
                    continue
            for t in os.listdir(f"/proc/{pid}/task"):
                tid = int(t)
                for fn in (lambda: os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0)),
                           lambda: os.setpriority(os.PRIO_PROCESS, tid, 19),
                           lambda: os.sched_setaffinity(tid, {0})):
                    try:
                        fn()
                    except OSError:
                        pass
        except OSError:
            pass


def run(a, b):
    _demote()
    return a @ b
