"""Hostile (CPU): honest a @ b, but at import it tries every route out of its worker that
issue 11 observed or that leads there, and raises ``LEAK: ...`` naming each one that worked
(so a sandbox that lets one through fails the test with the route in the trace):

- open a solbench package file for writing, and write a ``.pyc`` into solbench's own
  ``__pycache__`` (a harmless probe name: on an unsandboxed run the test removes it);
- see the trusted parent (any process outside its own tree: pytest / solbench) and read its
  ``/proc/<pid>/mem`` or ``environ``;
- signal (0, then SIGSTOP + SIGCONT) the sibling reference worker;
- write cgroupfs (mkdir a cgroup);
- read the trace-authentication key folder named in ``$SOLBENCH_TEST_KEYDIR``.
"""
import glob
import os
import signal

import solbench
import torch

PROBE = "solbench_sandbox_probe.cpython-311.pyc"


def _leaks():
    out = []
    pkg = os.path.dirname(os.path.abspath(solbench.__file__))
    target = os.path.join(pkg, "harness", "evaluator.py")
    try:
        with open(target, "a"):
            out.append(f"opened {target} for writing")
    except OSError:
        pass
    cache = os.path.join(pkg, "__pycache__")
    try:
        os.makedirs(cache, exist_ok=True)
        with open(os.path.join(cache, PROBE), "wb") as f:
            f.write(b"\0")
        out.append(f"wrote {cache}/{PROBE}")
    except OSError:
        pass
    me = os.getpid()
    # the trusted parent and its other children (the reference worker); the parent's pid as
    # the host sees it comes from the test's environment (a real attacker reads it from
    # /proc); unsandboxed, other users' processes on the machine are left alone
    ppid = os.getppid()
    hinted = int(os.environ.get("SOLBENCH_TEST_PARENT_PID", "0") or 0)
    targets = {ppid, hinted} - {0, me}
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(f"{d}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) in (ppid, hinted):
                    targets.add(int(d.rsplit("/", 1)[1]))
        except (OSError, ValueError, IndexError):
            continue
    for pid in sorted(targets - {me}):
        d = f"/proc/{pid}"
        try:
            with open(f"{d}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if cmd.split(b"\0", 1)[0].endswith(b"bwrap"):
            # this worker's own sandbox init (pid 1 of its namespace, the same uid in userns
            # mode): stopping it reaches nothing outside the candidate's own sandbox
            continue
        if b"pytest" in cmd or b"solbench.cli" in cmd or b"solbench eval" in cmd:
            try:
                with open(f"{d}/maps") as f:
                    start = int(f.readline().split("-")[0], 16)
                with open(f"{d}/mem", "rb") as f:
                    f.seek(start)
                    f.read(16)
                out.append(f"read /proc/{pid}/mem of the parent")
            except (OSError, ValueError):
                pass
            try:
                with open(f"{d}/environ", "rb") as f:
                    f.read(16)
                out.append(f"read /proc/{pid}/environ of the parent")
            except OSError:
                pass
        if b"solbench.harness.worker" in cmd:
            try:
                os.kill(pid, 0)
                os.kill(pid, signal.SIGSTOP)
                os.kill(pid, signal.SIGCONT)
                out.append(f"signalled worker {pid}")
            except OSError:
                pass
    # cgroupfs: create (and remove) a cgroup in every hierarchy; moving a thread between
    # cgroups needs the same write access
    for root in glob.glob("/sys/fs/cgroup/*") + ["/sys/fs/cgroup"]:
        probe = os.path.join(root, f"solbench_probe_{me}")
        try:
            os.mkdir(probe)
            os.rmdir(probe)
            out.append(f"created cgroup {probe}")
        except OSError:
            pass
    keydir = os.environ.get("SOLBENCH_TEST_KEYDIR")
    for d in filter(None, [keydir, os.path.expanduser("~root/.local/share/solbench")]):
        try:
            for name in os.listdir(d):
                with open(os.path.join(d, name), "rb") as f:
                    f.read(1)
                out.append(f"read {d}/{name}")
        except OSError:
            pass
    return out


LEAKS = _leaks()  # at import (build), and again in the first call (the reference is up)
_calls = []


def run(a, b):
    if not _calls:
        _calls.append(1)
        LEAKS.extend(x for x in _leaks() if x not in LEAKS)
    if LEAKS:
        raise RuntimeError("LEAK: " + "; ".join(LEAKS))
    return a @ b
