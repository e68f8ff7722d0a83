"""The sandbox's seccomp filter is checked where it runs: after loading it, the worker makes a
call the filter denies (``setns(-1, 0)``: EBADF unfiltered, EPERM filtered) and says in its
hello whether it was refused; a worker whose filter is not in force gets its traces marked
(advisory ``seccomp_missing``, ``environment.sandbox.seccomp`` false with the reason), where
before the trace said what the parent guessed (pyseccomp imports here). On the H100 host of
session 22 a CPU worker held a System V segment that the filter should have refused
(bench/results/device_s22_h100/reds21_call3.log)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate, sandbox
from solbench.spec import Status

from harness_helpers import matmul_problem, py_solution

ROOT = Path(__file__).resolve().parents[2]

#: a pyseccomp whose filter loads without error and filters nothing: what a broken libseccomp,
#: a kernel that ignores the filter or a binding that drops every rule amounts to
FAKE = '''
import enum
ALLOW = 0x7FFF0000
def ERRNO(e):
    return 0x00050000 | e
class Attr(enum.IntEnum):
    CTL_SSB = 10
class SyscallFilter:
    def __init__(self, defaction):
        pass
    def set_attr(self, attr, value):
        pass
    def add_rule(self, action, name):
        pass
    def load(self):
        pass
'''

CAND = '''
import os, sys, torch
print("PROBE", [ln.strip() for ln in open("/proc/self/status") if ln.startswith("Seccomp:")], file=sys.stderr)
def run(a, b):
    return a @ b
'''


def test_the_real_filter_is_in_force_in_a_child():
    code = ("import ctypes; ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)\n"
            "from solbench.harness import sandbox\n"
            "ok = sandbox.seccomp_filter()\n"
            "print(ok, sandbox.SECCOMP_FAILURE)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *sys.path[1:]])})
    if "No module named 'pyseccomp'" in r.stdout or "libseccomp" in r.stdout:
        pytest.skip(f"no pyseccomp / libseccomp here: {r.stdout.strip()}")
    assert r.stdout.split() == ["True", "None"], (r.stdout, r.stderr[-500:])


def test_a_filter_that_filters_nothing_is_reported(monkeypatch, tmp_path):
    (tmp_path / "pyseccomp.py").write_text(FAKE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pyseccomp", raising=False)
    monkeypatch.setattr(sandbox, "SECCOMP_FAILURE", None)
    try:
        assert sandbox.seccomp_filter() is False
        assert "setns(-1, 0) returned -1, errno EBADF" in sandbox.SECCOMP_FAILURE
    finally:
        sys.modules.pop("pyseccomp", None)  # the fake: later imports find the real one again


@pytest.mark.skipif(sandbox.resolve_mode("cpu")[0] == "none", reason="no sandbox here")
def test_a_worker_without_its_filter_has_its_traces_marked(tmp_path, solbench_cache, monkeypatch):
    if not sandbox.sandbox_status("cpu")["seccomp"]:
        pytest.skip("no seccomp filter here (pyseccomp / libseccomp missing)")
    fake = tmp_path / "fake"
    (fake / "pyseccomp-0.0.dist-info").mkdir(parents=True)
    (fake / "pyseccomp.py").write_text(FAKE)
    p = matmul_problem(tmp_path, (16,), tol=1e-3)
    sol = py_solution("probe", CAND, p.definition.name)
    cfg = EvalConfig(device="cpu", rounds=1, timing=False)
    (t,) = evaluate(p, sol, cfg)  # the real filter: in force, nothing said
    # the probe prints a list's repr: the status line's tab reads as backslash-t
    assert "Seccomp:\\t2" in t.evaluation.log
    assert t.evaluation.environment.sandbox["seccomp"] is True
    assert not [f for f in t.evaluation.findings if f.check == "seccomp_missing"]

    monkeypatch.syspath_prepend(str(fake))  # the worker's import path takes it first
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")]))
    (t,) = evaluate(p, sol, cfg)
    ev = t.evaluation
    assert ev.status == Status.PASSED
    assert "Seccomp:\\t0" in ev.log, ev.log[-500:]
    f = [x for x in ev.findings if x.check == "seccomp_missing"]
    assert f and f[0].severity == "advisory" and "EBADF" in f[0].evidence["why"]
    assert ev.environment.sandbox["seccomp"] is False and "EBADF" in ev.environment.sandbox["seccomp_failure"]


ORDER = r'''
import os, sys, resource
import solbench.harness.worker  # noqa: F401  (torch loaded, as in a worker when it enters)
from solbench.harness import sandbox
vm = int([l for l in open("/proc/self/status") if l.startswith("VmData")][0].split()[1]) * 1024
os.environ.update({"SOLBENCH_SANDBOX_MODE": "uid", "SOLBENCH_SANDBOX_MEM_RLIMIT": "1",
                   "SOLBENCH_SANDBOX_MEM": str(vm - (64 << 20))})
if sys.argv[1] == "limits first":
    for name, (s, h) in sandbox.limits("cpu").items():
        resource.setrlimit(getattr(resource, name), (s, h))
sandbox.enter_in_worker("cpu")
print(os.environ.get("SOLBENCH_SANDBOX_SECCOMP_LOADED"), sandbox.SECCOMP_FAILURE)
'''


def test_the_filter_loads_before_a_memory_cap_below_what_the_worker_has_mapped():
    """The memory cap without a cgroup is RLIMIT_DATA, and a worker that has imported torch's
    CUDA build can already map more than the cap: set first, it made every new mapping fail,
    libseccomp's among them, and the filter never loaded (the H100 host of session 22: a
    768 MiB cap, ``failed to map segment from shared object``). Here the cap is 64 MiB below
    what the process has mapped: with the limits set first (the old order) the filter does not
    load; ``enter_in_worker`` loads it before the limits, and it is in force."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *sys.path[1:]])}
    got = {}
    for arm in ("limits first", "enter_in_worker"):
        r = subprocess.run([sys.executable, "-c", ORDER, arm], capture_output=True, text=True, env=env)
        got[arm] = r.stdout.strip()
    if "No module named 'pyseccomp'" in got["enter_in_worker"]:
        pytest.skip("no pyseccomp here")
    assert got["limits first"].startswith("0 the filter did not load"), got
    assert got["enter_in_worker"] == "1 None", got
