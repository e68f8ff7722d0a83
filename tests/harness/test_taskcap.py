"""The bound on a sandbox's processes and threads (harness/taskcap.py) binds in every sandbox
mode, ``userns`` with a root harness included, where RLIMIT_NPROC does not bind.

Real hostile candidates (``cand_taskbomb_threads.py``, ``cand_taskbomb_fork.py``: endless
threads / forks in their first call, retrying at EAGAIN) end as RUNTIME_ERROR with the
``task_limit`` finding within seconds (a bound that did not bind would end them as TIMEOUT at
the call limit, far later), the run goes on (an honest candidate PASSES next), and nothing of
theirs is left on the host (every thread/process of theirs names itself, and none is found
in /proc afterwards; their cgroup is gone). Honest thread pools joined in the call PASS
under the default limit. Skipped where bubblewrap cannot build the mode's sandbox here."""

import os
import time
from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate, sandbox, taskcap
from solbench.spec import Status, load_solution

from harness_helpers import matmul_problem

HERE = Path(__file__).parent
BOMB_NAMES = {"sbx-taskbomb", "sbx-forkbomb"}
#: the test's limit: far above an honest worker's tasks on this host (about 20: the
#: interpreter, torch's intra-op threads, the harness's threads), far below what would hurt it
LIMIT = 256
#: the call limit: a bomb whose bound did not bind blocks at its safety cap until then
CALL_TIMEOUT_S = 240


def _problem(root: Path):
    return matmul_problem(root, (128,), uuid="w")


def _bomb_tasks() -> list[str]:
    """Every task on the host named by the hostile candidates (host-wide /proc scan)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                comm = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            except OSError:
                continue
            if comm in BOMB_NAMES:
                out.append(f"{pid}/{tid}")
    return out


def _our_cgroups() -> list[str]:
    base = taskcap.probe()["base"]
    if base is None:
        return []
    return [n for n in os.listdir(base) if n.startswith(f"{taskcap.PREFIX}{os.getpid()}-")]


def _mode_or_skip(monkeypatch, mode: str, mechanism: str) -> None:
    monkeypatch.setenv("SOLBENCH_SANDBOX", mode)
    got, why = sandbox.resolve_mode("cpu")
    if got != mode:
        pytest.skip(f"no {mode} sandbox here: {why}")
    if mechanism == "watchdog":
        monkeypatch.setenv("SOLBENCH_SANDBOX_PIDS_CGROUP", "0")
    elif taskcap.probe()["mechanism"] == "watchdog":
        pytest.skip(f"no pids cgroup here: {taskcap.probe()['reason']}")


# ------------------------------------------------------------------ parsing (no worker)
HYBRID_MOUNTINFO = """\
24 31 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
25 24 0:23 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
33 24 0:31 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
34 24 0:32 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
"""
HYBRID_CGROUP = "9:name=systemd:/\n8:pids:/job/7\n4:memory:/x\n0::/\n"
V2_MOUNTINFO = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev - cgroup2 cgroup2 rw,nsdelegate\n"
V2_CGROUP = "0::/user.slice/user-0.slice/session-3.scope\n"


def test_parse_cgroup_layouts():
    """Mount points and own paths read as the kernel writes them (values of a hybrid host
    like this one, and of a cgroup2-only systemd host, written by hand)."""
    assert taskcap.parse_mountinfo(HYBRID_MOUNTINFO) == {"v2": "/sys/fs/cgroup/unified",
                                                         "v1:pids": "/sys/fs/cgroup/pids"}
    assert taskcap.parse_proc_cgroup(HYBRID_CGROUP) == {"v2": "/", "v1:pids": "/job/7"}
    assert taskcap.parse_mountinfo(V2_MOUNTINFO) == {"v2": "/sys/fs/cgroup"}
    assert taskcap.parse_proc_cgroup(V2_CGROUP) == {"v2": "/user.slice/user-0.slice/session-3.scope"}


def _fake_v2(tmp_path, monkeypatch, controllers: str, subtree: str, write_error: int | None):
    """A cgroup2-only host's files under tmp_path (what the kernel would show), the process in
    /job.scope; ``write_error``: the errno the kernel answers a write to subtree_control."""
    d = tmp_path / "job.scope"
    d.mkdir(parents=True)
    (d / "cgroup.controllers").write_text(controllers + "\n")
    (d / "cgroup.subtree_control").write_text(subtree + "\n")
    (d / "cgroup.procs").write_text("")
    proc = {"/proc/self/mountinfo": f"30 23 0:26 / {tmp_path} rw - cgroup2 cgroup2 rw\n",
            "/proc/self/cgroup": "0::/job.scope\n"}
    real_read, real_write = taskcap._read, taskcap._write
    monkeypatch.setattr(taskcap, "_read", lambda path: proc.get(path) or real_read(path))

    def write(path, text):
        if write_error is not None and path.endswith("cgroup.subtree_control"):
            raise OSError(write_error, os.strerror(write_error))
        real_write(path, text)

    monkeypatch.setattr(taskcap, "_write", write)
    return str(d)


def test_cgroup2_delegation_decides(tmp_path, monkeypatch):
    """On a cgroup2-only host the harness's own cgroup is the base when pids is delegated (or
    can be enabled in its subtree_control); when the kernel refuses that (EBUSY: processes in
    a non-root cgroup) or pids is not among its controllers, there is no base and the reason
    names the file's answer."""
    import errno

    d = _fake_v2(tmp_path / "a", monkeypatch, "cpu memory pids", "pids", None)
    assert taskcap._own_base() == ("cgroup_v2", d, "")
    d = _fake_v2(tmp_path / "b", monkeypatch, "cpu memory pids", "", None)
    assert taskcap._own_base() == ("cgroup_v2", d, "")
    assert Path(d, "cgroup.subtree_control").read_text() == "+pids"  # enabled by the probe
    _fake_v2(tmp_path / "c", monkeypatch, "cpu memory pids", "", errno.EBUSY)
    kind, base, why = taskcap._own_base()
    assert kind is None and base is None and "pids not delegated (EBUSY" in why
    _fake_v2(tmp_path / "e", monkeypatch, "cpu memory", "", None)
    kind, base, why = taskcap._own_base()
    assert kind is None and "no pids controller (controllers: cpu memory)" in why


def test_status_names_what_binds(monkeypatch):
    """sandbox_status (the trace's environment.sandbox) says what bounds the tasks: in
    ``userns`` mode never RLIMIT_NPROC (it does not bind for a root-uid worker), in ``uid``
    mode RLIMIT_NPROC too, and the watchdog only where no cgroup is made."""
    monkeypatch.setenv("SOLBENCH_SANDBOX_NPROC", str(LIMIT))
    cg = taskcap.probe()["mechanism"]
    for mode in ("uid", "userns"):
        st = taskcap.status(mode)
        assert st["limit"] == LIMIT
        assert ("RLIMIT_NPROC" in st["bound_by"]) == (mode == "uid")
        if cg != "watchdog":
            assert st["bound_by"][0] == f"{cg} pids.max" and st["kernel_enforced"]
    monkeypatch.setenv("SOLBENCH_SANDBOX_PIDS_CGROUP", "0")
    st = taskcap.status("userns")
    assert st["bound_by"] == ["watchdog"] and not st["kernel_enforced"]
    assert st["cgroup_unavailable"] == "SOLBENCH_SANDBOX_PIDS_CGROUP=0"


# ------------------------------------------------------------------ real workers
@pytest.mark.parametrize("mode,mechanism,cand", [
    ("userns", "cgroup", "cand_taskbomb_threads.py"),
    ("userns", "cgroup", "cand_taskbomb_fork.py"),
    ("userns", "watchdog", "cand_taskbomb_threads.py"),
    ("userns", "watchdog", "cand_taskbomb_fork.py"),
    ("uid", "cgroup", "cand_taskbomb_threads.py"),
    ("uid", "watchdog", "cand_taskbomb_fork.py"),
])
def test_bomb_ends_as_recorded_status(tmp_path, solbench_cache, monkeypatch, mode, mechanism, cand):
    _mode_or_skip(monkeypatch, mode, mechanism)
    monkeypatch.setenv("SOLBENCH_SANDBOX_NPROC", str(LIMIT))
    assert not _bomb_tasks(), "left over from an earlier run"
    # cgroups of workers this process still runs for other tests (an Evaluator not yet closed)
    # are theirs: this test answers for the ones made from here on
    earlier = set(_our_cgroups())
    p = _problem(tmp_path)
    cfg = EvalConfig(device="cpu", iters=4, rounds=1, first_call_timeout_s=CALL_TIMEOUT_S)
    t0 = time.monotonic()
    (t,) = evaluate(p, load_solution(HERE / cand, p), cfg)
    took = time.monotonic() - t0
    ev = t.evaluation
    assert ev.status == Status.RUNTIME_ERROR, (ev.status, ev.log[-600:], ev.findings)
    (f,) = [f for f in ev.findings if f.check == "task_limit"]
    want = taskcap.probe()["mechanism"] if mechanism == "cgroup" else "watchdog"
    assert f.evidence["mechanism"] == want and f.evidence["limit"] == LIMIT
    if want == "watchdog":
        assert f.evidence["tasks"] >= LIMIT
    else:  # the kernel refused forks at pids.max: the sandbox never held more than the limit
        assert f.evidence["refused_forks"] >= 1 and f.evidence["tasks"] <= LIMIT
    assert f"limit of {LIMIT} processes/threads" in ev.log
    # the sandbox's tasks bound: the environment says by what
    assert ev.environment.sandbox["mode"] == mode
    assert ev.environment.sandbox["tasks"]["bound_by"][0] == (
        "watchdog" if want == "watchdog" and mode == "userns" else
        "RLIMIT_NPROC" if want == "watchdog" else f"{want} pids.max")
    # within seconds of the call, not at the call limit (worker starts included; loaded host)
    assert took < CALL_TIMEOUT_S / 2, took
    # nothing of it left: no named task anywhere on the host, no cgroup of this process
    deadline = time.monotonic() + 10
    while (_bomb_tasks() or set(_our_cgroups()) - earlier) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _bomb_tasks() == [] and set(_our_cgroups()) - earlier == set()
    # the run goes on: the next candidate, an honest thread pool joined in the call (one
    # thread per CPU after the fork bomb), PASSES
    honest = "cand_futures_per_call.py" if "fork" in cand else "cand_threadpool_per_call.py"
    (t2,) = evaluate(p, load_solution(HERE / honest, p),
                     EvalConfig(device="cpu", iters=4, rounds=1, timing=False))
    assert t2.evaluation.status == Status.PASSED, (t2.evaluation.log[-600:], t2.evaluation.findings)
    assert not [f for f in t2.evaluation.findings if f.check == "task_limit"]


def test_worker_is_in_its_cgroup_from_the_start(solbench_cache, monkeypatch):
    """In ``userns`` mode the worker and the sandbox's init are in the worker's own pids
    cgroup by its hello (the launcher joined it before exec'ing bwrap), pids.max is the
    limit, and closing the worker removes the cgroup."""
    _mode_or_skip(monkeypatch, "userns", "cgroup")
    from solbench.harness.process import WorkerHandle

    h = WorkerHandle("cpu")
    try:
        path = h.taskcap.path
        assert path and h.sandbox["tasks"]["cgroup"] == path
        assert Path(path, "pids.max").read_text().strip() == str(taskcap.default_limit())
        procs = {int(x) for x in Path(path, "cgroup.procs").read_text().split()}
        assert {h.pid, h.init_pid, h.proc.pid} <= procs
        assert 3 <= h.taskcap.tasks() < 200  # an idle worker: a handful of threads
    finally:
        h.close()
    assert not os.path.exists(path)


# ------------------------------------------------------------------ a release that times out
FREEZER = Path("/sys/fs/cgroup/freezer")

FROZEN_CHILD = r"""
import os, subprocess, sys, threading, time
from solbench.harness import taskcap
cap = taskcap.TaskCap(limit=64)
p = subprocess.Popen(cap.wrap(["sleep", "60"]))
time.sleep(0.3)
cap.watch(p.pid)
fz = sys.argv[1]
open(fz + "/cgroup.procs", "w").write(str(p.pid))
open(fz + "/freezer.state", "w").write("FROZEN")
cap.release(timeout_s=0.3)
print(cap.path, os.path.exists(cap.path), flush=True)
if sys.argv[2] == "thaw-later":
    def thaw():
        time.sleep(0.3)
        open(fz + "/freezer.state", "w").write("THAWED")
    threading.Thread(target=thaw).start()
else:
    open(fz + "/freezer.state", "w").write("THAWED")
    time.sleep(0.2)
    print(taskcap.retry_pending(), os.path.exists(cap.path), flush=True)
"""


@pytest.mark.parametrize("when", ["next-release", "at-exit"])
def test_cgroup_whose_release_timed_out_is_removed_later(tmp_path, when):
    """A task that does not die at SIGKILL within release's timeout (a frozen one here, as a
    worker stuck in a driver call at teardown) keeps its cgroup (EBUSY): the cgroup is removed
    once the task can die, by the next release (``retry_pending``) or at the harness's exit,
    not left on the host."""
    if taskcap.probe()["mechanism"] != "cgroup_v1" or not os.access(FREEZER, os.W_OK):
        pytest.skip("needs a writable cgroup v1 pids and freezer hierarchy")
    import subprocess
    import sys

    fz = FREEZER / f"solbench-test-{os.getpid()}-{when}"
    fz.mkdir()
    try:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parents[1] / "src"),
                                                            os.environ.get("PYTHONPATH", "")]))
        r = subprocess.run([sys.executable, "-c", FROZEN_CHILD, str(fz),
                            "thaw-now" if when == "next-release" else "thaw-later"],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        lines = r.stdout.split("\n")
        path, existed = lines[0].split()
        assert existed == "True"  # the timed-out release left it
        if when == "next-release":
            assert lines[1] == "[] False"
        assert not os.path.exists(path)
    finally:
        for pid in (fz / "cgroup.procs").read_text().split():
            os.kill(int(pid), 9)
        (fz / "freezer.state").write_text("THAWED")
        time.sleep(0.2)
        fz.rmdir()
