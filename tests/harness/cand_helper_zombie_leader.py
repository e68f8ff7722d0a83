"""Attack 1c: the reference stopper in a plain `python -c` helper (own session) whose main thread
calls pthread_exit() after starting the stopper thread: /proc/<pid>/stat then says Z (zombie)
and /proc/<pid>/cmdline is empty, so _unfrozen(), unexplained_children() and stray_children()
all skip it while its other thread keeps running."""
import os
import subprocess
import sys
import tempfile

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

def syscw(pid):
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("syscw:"):
                    return int(line.split()[1])
    except OSError:
        return None

# the parent measures the reference's no-op round trip (5 requests after a "load") in the same
# stopped window and subtracts it: leave the reference alone until it has answered the load and
# the no-ops (6 replies, one write each), then duty-cycle it (later windows: after the load only)
t_end = time.monotonic() + 600
windows = 0
refs = []
skip_until = None
try:
    while time.monotonic() < t_end:
        s = state(wpid)
        if s is None:
            break
        if s == "T":
            if not refs:
                refs = siblings()
                if refs:
                    w0 = syscw(refs[0]) or 0
                    skip_until = w0 + (6 if windows == 0 else 1)
                    windows += 1
            if refs and (syscw(refs[0]) or 0) >= skip_until:
                for r in refs:
                    os.kill(r, signal.SIGSTOP)
                time.sleep(0.009)
                for r in refs:
                    os.kill(r, signal.SIGCONT)
                time.sleep(0.001)
            else:
                time.sleep(0.0002)
        else:
            for r in refs:
                os.kill(r, signal.SIGCONT)
            refs = []
            time.sleep(0.0003)
finally:
    for r in refs:
        try:
            os.kill(r, signal.SIGCONT)
        except OSError:
            pass
"""

_helper = [None]


def _ensure_helper():
    if _helper[0] is not None:
        return
    code = ("import threading, ctypes, sys\ndef _body():\n" + "".join("    " + l + "\n" for l in HELPER.splitlines())
            + "threading.Thread(target=_body).start()\nctypes.CDLL(None).pthread_exit(None)\n")
    _helper[0] = subprocess.Popen([sys.executable, "-c", code, str(os.getpid()), str(os.getppid())],
                                  start_new_session=True, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


_ensure_helper()  # at import: ready long before the first reference block


def run(a, b):
    return a @ b
