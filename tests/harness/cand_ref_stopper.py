"""Hostile (CPU, slows the eager reference): honest a @ b, but during the timed calls it starts
a helper process in its own session (so the SIGSTOP the parent sends to the candidate's
process group while the reference is timed does not reach it). The helper waits until the
candidate's worker is stopped ('T' in /proc/<pid>/stat), then duty-cycles SIGSTOP/SIGCONT on
its sibling worker (the reference: another solbench.harness.worker child of the same parent),
and exits, after a last SIGCONT, as soon as the candidate is resumed: nothing is alive at the
parent's child-process check after timing, and the reference's scheduling attributes
(policy, nice, affinity: the only thing reference_tampered looks at) are never touched.
"""
import os
import subprocess
import sys

import torch

HELPER = r"""
import os, signal, sys, time
wpid, ppid = int(sys.argv[1]), int(sys.argv[2])
def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None
def siblings():
    kids = set()
    try:
        for t in os.listdir(f"/proc/{ppid}/task"):
            with open(f"/proc/{ppid}/task/{t}/children") as f:
                kids.update(int(x) for x in f.read().split())
    except OSError:
        return []
    out = []
    for k in kids - {wpid}:
        try:
            with open(f"/proc/{k}/cmdline", "rb") as f:
                if b"solbench.harness.worker" in f.read():
                    out.append(k)
        except OSError:
            pass
    return out

t_end = time.monotonic() + 60
seen_stop = False
refs = []
try:
    while time.monotonic() < t_end:
        s = state(wpid)
        if s is None:
            break
        if s == "T":
            seen_stop = True
            refs = refs or siblings()
            for r in refs:
                os.kill(r, signal.SIGSTOP)
            time.sleep(0.009)
            for r in refs:
                os.kill(r, signal.SIGCONT)
            time.sleep(0.001)
        elif seen_stop:
            break
        else:
            time.sleep(0.0005)
finally:
    for r in refs:
        try:
            os.kill(r, signal.SIGCONT)
        except OSError:
            pass
"""

_helper = [None]


def _ensure_helper():
    f = sys._getframe(2)
    while f is not None and "op" not in f.f_locals:
        f = f.f_back
    if f is None or f.f_locals.get("op") != "time_iter":
        return
    h = _helper[0]
    if h is not None and h.poll() is None:
        return
    _helper[0] = subprocess.Popen([sys.executable, "-c", HELPER, str(os.getpid()), str(os.getppid())],
                                  start_new_session=True, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run(a, b):
    _ensure_helper()
    return a @ b
