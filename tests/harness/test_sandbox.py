"""OS isolation of the worker (harness/sandbox.py), with real hostile candidates evaluated
through the real harness: each route out of the worker that issue 11 observed (or that leads
there) works on an unsandboxed worker and is closed in the sandbox; honest candidates that
need writable caches or build dirs still PASS; killing solbench leaves no worker alive.

Skipped where bubblewrap cannot build a sandbox on this host (the status says why)."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import solbench
from solbench.harness import EvalConfig, evaluate, sandbox
from solbench.harness.guards import descendants, proc_state
from solbench.spec import Status, load_solution

from harness_helpers import matmul_problem

HERE = Path(__file__).parent
SRC = Path(solbench.__file__).resolve().parents[1]
PROBE_PYC = Path(solbench.__file__).parent / "__pycache__" / "solbench_sandbox_probe.cpython-311.pyc"

sandboxed = pytest.mark.skipif(sandbox.resolve_mode("cpu")[0] == "none",
                               reason=f"no sandbox here: {sandbox.resolve_mode('cpu')[1]}")


def _matmul_problem(root: Path):
    return matmul_problem(root, (128,), uuid="w")


@pytest.fixture
def keydir(monkeypatch):
    """A trace-key folder outside /tmp (the sandbox's /tmp is private anyway), where
    solbench looks for it ($XDG_DATA_HOME/solbench), holding a 0600 key file."""
    base = Path(tempfile.mkdtemp(prefix="solbench-xdg-", dir="/var/tmp"))
    d = base / "solbench"
    d.mkdir()
    (d / "trace.key").write_bytes(os.urandom(32))
    os.chmod(d / "trace.key", 0o600)
    monkeypatch.setenv("XDG_DATA_HOME", str(base))
    monkeypatch.setenv("SOLBENCH_TEST_KEYDIR", str(d))
    monkeypatch.setenv("SOLBENCH_TEST_PARENT_PID", str(os.getpid()))
    yield d
    import shutil

    shutil.rmtree(base, ignore_errors=True)


def _escape(tmp_path):
    p = _matmul_problem(tmp_path)
    s = load_solution(HERE / "cand_sandbox_escape.py", p)
    try:
        (t,) = evaluate(p, s, EvalConfig(device="cpu", iters=4, rounds=1))
    finally:
        found = PROBE_PYC.exists()
        PROBE_PYC.unlink(missing_ok=True)
    return t, found


def test_unsandboxed_worker_escapes(tmp_path, solbench_cache, keydir, monkeypatch):
    """The routes are real: without the sandbox the same candidate reaches the package, the
    parent's memory, the reference worker, cgroupfs and the key folder (so the test below
    can fail)."""
    monkeypatch.setenv("SOLBENCH_SANDBOX", "off")
    t, planted = _escape(tmp_path)
    log = t.evaluation.log or ""
    assert t.evaluation.status == Status.RUNTIME_ERROR, log
    assert planted and "LEAK" in log
    for route in ("for writing", "__pycache__", "/mem of the parent", "signalled worker",
                  "created cgroup", "trace.key"):
        assert route in log, (route, log[-3000:])


@sandboxed
def test_sandboxed_worker_reaches_nothing_trusted(tmp_path, solbench_cache, keydir):
    t, planted = _escape(tmp_path)
    assert not planted
    assert t.evaluation.status == Status.PASSED, t.evaluation.log
    assert "LEAK" not in (t.evaluation.log or "")


@sandboxed
def test_status_names_the_isolation():
    st = sandbox.sandbox_status("cpu")
    assert st["mode"] in ("uid", "userns") and st["warning"] is None
    assert {"mount", "pid", "ipc", "net"} <= set(st["namespaces"])
    if st["mode"] == "uid":
        assert st["uid"] != os.geteuid()


def test_status_warns_when_off(monkeypatch):
    monkeypatch.setenv("SOLBENCH_SANDBOX", "off")
    st = sandbox.sandbox_status("cpu")
    assert st["mode"] == "none" and st["namespaces"] == [] and "SANDBOX DISABLED" in st["warning"]


@sandboxed
def test_worker_identity_and_limits(solbench_cache):
    """The candidate's and the reference's workers, alive together, run under different
    uids (uid mode), with no capability, no_new_privs, the resource limits and a private
    scratch; the harness's files are out of reach."""
    from solbench.harness.process import WorkerHandle

    a, b = WorkerHandle("cpu"), WorkerHandle("cpu")
    try:
        sa = Path(f"/proc/{a.pid}/status").read_text()
        sb = Path(f"/proc/{b.pid}/status").read_text()
        uid_a = int(sa.split("Uid:")[1].split()[0])
        uid_b = int(sb.split("Uid:")[1].split()[0])
        if a.sandbox["mode"] == "uid":
            assert uid_a != uid_b and os.geteuid() not in (uid_a, uid_b)
        assert "CapEff:\t0000000000000000" in sa and "NoNewPrivs:\t1" in sa
        if a.sandbox["seccomp"]:  # ptrace, process_vm_readv, perf_event_open, ... denied
            assert "Seccomp:\t2" in sa
        limits = Path(f"/proc/{a.pid}/limits").read_text()
        assert f"{sandbox.NPROC}" in [ln for ln in limits.splitlines() if ln.startswith("Max processes")][0]
        # its own pid namespace, under bwrap's init (pid 1)
        # pause() stops the worker (its process group is its init's: bwrap --new-session)
        a.pause()
        deadline = time.monotonic() + 5
        while proc_state(a.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc_state(a.pid) == "T"
        a.resume()
        assert a.request("ping", timeout_s=30)[0] == "ok"
        nspid = [ln for ln in sa.splitlines() if ln.startswith("NSpid:")][0].split()
        assert len(nspid) == 3 and nspid[1] == str(a.pid) and nspid[2] == "2"
    finally:
        a.close()
        b.close()


@sandboxed
def test_reference_cannot_be_stopped_or_demoted(tmp_path, solbench_cache):
    """The red-team stoppers find no reference to act on: the demoter (SCHED_IDLE, nice,
    affinity on the sibling worker) is harmless and its honest matmul PASSES with an
    untouched reference; the SIGSTOP loop's helper still runs beside the reference (it
    looks for its target while the reference is timed) and the parent's process check
    flags that, but the reference is never reached (the parent-side checks they trip
    unsandboxed are tested in test_hidden_work.py)."""
    p = _matmul_problem(tmp_path)
    for cand, ok in (("cand_demote_reference.py", {Status.PASSED}),
                     ("cand_ref_stopper.py", {Status.PASSED, Status.REWARD_HACK})):
        s = load_solution(HERE / cand, p)
        (t,) = evaluate(p, s, EvalConfig(device="cpu", iters=6, rounds=2))
        ev = t.evaluation
        assert ev.status in ok, (cand, ev.log, ev.findings)
        assert not [f for f in ev.findings if f.check == "reference_tampered"], cand


@sandboxed
@pytest.mark.slow
@pytest.mark.parametrize("cand", ["cand_sandbox_compile.py", "cand_sandbox_load_inline.py",
                                  "cand_threadpool_per_call.py"])
def test_honest_candidates_pass_in_the_sandbox(tmp_path, solbench_cache, cand):
    p = _matmul_problem(tmp_path)
    s = load_solution(HERE / cand, p)
    (t,) = evaluate(p, s, EvalConfig(device="cpu", iters=6, rounds=2))
    assert t.evaluation.status == Status.PASSED, (t.evaluation.log, t.evaluation.findings)


# ---------------------------------------------------------------- process lifetime
def _cli(args, cwd, **kw):
    env = dict(os.environ, PYTHONPATH=str(SRC))
    return subprocess.Popen([sys.executable, "-c", "from solbench.cli import main; main()", *args],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)


def _wait_for_spinner(parent: int, timeout_s: float = 240) -> set[int]:
    """Descendants of ``parent`` once the spinning candidate's stopped helper exists."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        kids = descendants(parent)
        if any(proc_state(k) == "T" for k in kids):
            return kids
        time.sleep(0.5)
    raise AssertionError("the spinning candidate never started")


def _alive(pids) -> list[int]:
    return [p for p in pids if proc_state(p) not in (None, "Z", "X")]


def _gone_within(pids, seconds=15.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _alive(pids)


@pytest.mark.slow
def test_sigkill_of_the_parent_leaves_no_worker(tmp_path, solbench_cache):
    """A parent evaluating a candidate that spins forever and left a SIGSTOPped helper in
    its own session; the worker itself is SIGSTOPped too. SIGKILL the parent: every
    descendant dies (bwrap --die-with-parent and the pid namespace; unsandboxed, the
    worker's PR_SET_PDEATHSIG only covers the worker)."""
    p = _matmul_problem(tmp_path)
    script = (
        "import sys; from solbench.harness import EvalConfig, evaluate;"
        "from solbench.spec import load_problem, load_solution;"
        f"p = load_problem({str(p.path)!r}); s = load_solution({str(HERE / 'cand_sandbox_spin.py')!r}, p);"
        "evaluate(p, s, EvalConfig(device='cpu', iters=4, rounds=1, reference_timing=False))")
    parent = subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ, PYTHONPATH=str(SRC)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        kids = _wait_for_spinner(parent.pid)
        workers = [k for k in kids if b"solbench.harness.worker" in Path(f"/proc/{k}/cmdline").read_bytes()]
        for w in workers:
            os.kill(w, signal.SIGSTOP)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        left = _gone_within(kids)
        if sandbox.resolve_mode("cpu")[0] != "none":
            assert not left, [(k, proc_state(k)) for k in left]
    finally:
        for k in _alive(descendants(parent.pid)):
            os.kill(k, signal.SIGKILL)


@sandboxed
@pytest.mark.slow
def test_sigterm_of_solbench_eval_leaves_nothing(tmp_path, solbench_cache):
    p = _matmul_problem(tmp_path)
    cli = _cli(["eval", str(p.path), "-s", str(HERE / "cand_sandbox_spin.py"), "--device", "cpu",
                "--rounds", "1", "--no-timing"], cwd=tmp_path)
    try:
        kids = _wait_for_spinner(cli.pid)
        cli.send_signal(signal.SIGTERM)
        assert cli.wait(30) == 128 + signal.SIGTERM
        assert not _gone_within(kids, 5)
    finally:
        if cli.poll() is None:
            cli.kill()


@sandboxed
@pytest.mark.slow
def test_candidate_cannot_append_to_the_results_file(tmp_path, solbench_cache):
    p = _matmul_problem(tmp_path)
    out = tmp_path / "results.jsonl"
    cli = _cli(["eval", str(p.path), "-s", str(HERE / "cand_sandbox_results.py"), "--device", "cpu",
                "--rounds", "1", "--no-timing", "-o", "results.jsonl"], cwd=tmp_path)
    log = cli.communicate(timeout=400)[0].decode(errors="replace")
    lines = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    assert lines, log
    assert not [x for x in lines if "forged_by" in x], log


def _pairs(a, flag):
    return [(a[i + 1], a[i + 2]) for i, x in enumerate(a) if x == flag]


def test_cuda_command_binds_the_driver_and_keeps_host_shm(monkeypatch, tmp_path):
    """The CUDA worker's bwrap command: bwrap's minimal /dev plus the driver's device nodes
    (found by CUDA_DEVICE_GLOBS, and $SOLBENCH_SANDBOX_DEV_BIND for a host that keeps them
    elsewhere), the host's /dev/shm (legacy CUDA IPC fails behind a private one:
    bench/sandbox_ipc_matrix.py on the H200), a net namespace by default, and every other
    layer as on CPU. Built, not run (no GPU here; bench/sandbox_device.py runs it there)."""
    for name in ("nvidiactl", "nvidia0", "nvidia-uvm"):
        (tmp_path / name).write_text("")
    extra = tmp_path / "extra-node"
    extra.write_text("")
    monkeypatch.setattr(sandbox, "CUDA_DEVICE_GLOBS", (str(tmp_path / "nvidia*"),))
    monkeypatch.setenv("SOLBENCH_SANDBOX_DEV_BIND", f"{extra}{os.pathsep}/nonexistent/node")
    monkeypatch.delenv("SOLBENCH_SANDBOX_NET", raising=False)
    cuda = sandbox._bwrap_args("userns", "cuda", "/bin/bwrap")
    cpu = sandbox._bwrap_args("userns", "cpu", "/bin/bwrap")

    def tmpfs_targets(a):
        return {a[i + 1] for i, x in enumerate(a) if x == "--tmpfs"}

    assert "/dev/shm" in tmpfs_targets(cpu) and "/dev/shm" not in tmpfs_targets(cuda)
    assert ("/dev/shm", "/dev/shm") in _pairs(cuda, "--bind") and ("/dev/shm", "/dev/shm") not in _pairs(cpu, "--bind")
    assert tmpfs_targets(cpu) - {"/dev/shm"} == tmpfs_targets(cuda)  # /tmp, hidden dirs
    want = sorted([(str(tmp_path / n),) * 2 for n in ("nvidia-uvm", "nvidia0", "nvidiactl")] + [(str(extra),) * 2])
    assert sorted(_pairs(cuda, "--dev-bind")) == want and _pairs(cpu, "--dev-bind") == []
    for a in (cuda, cpu):  # never the host's whole /dev or /
        assert ("/dev", "/dev") not in _pairs(a, "--dev-bind") and ("/", "/") not in _pairs(a, "--ro-bind")
    for flag in ("--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-user",
                 "--disable-userns", "--die-with-parent", "--new-session"):
        assert flag in cuda and flag in cpu
    monkeypatch.setenv("SOLBENCH_SANDBOX_NET", "0")
    assert "--unshare-net" not in sandbox._bwrap_args("userns", "cuda", "/bin/bwrap")


def test_every_trace_says_how_its_worker_was_isolated(tmp_path, solbench_cache, monkeypatch):
    """The trace's environment carries the sandbox status; an unisolated worker's trace has
    the advisory not_sandboxed (never silently), and the verdict is unchanged by it."""
    from solbench.harness import sandbox as sb

    prob = _matmul_problem(tmp_path)
    f = tmp_path / "honest_matmul_env.py"
    f.write_text("import torch\n\ndef run(a, b):\n    return a @ b\n")
    honest = load_solution(f, prob)
    monkeypatch.setenv("SOLBENCH_SANDBOX", "off")
    (t,) = evaluate(prob, honest, EvalConfig(device="cpu", rounds=1, timing=False))
    ev = t.evaluation
    assert ev.status == Status.PASSED, ev.log
    assert ev.environment.sandbox["mode"] == "none" and "SANDBOX DISABLED" in ev.environment.sandbox["warning"]
    assert [f.check for f in ev.findings] == ["not_sandboxed"]
    assert ev.findings[0].severity == "advisory"
    monkeypatch.delenv("SOLBENCH_SANDBOX")
    if sb.resolve_mode("cpu")[0] != "none":
        (t,) = evaluate(prob, honest, EvalConfig(device="cpu", rounds=1, timing=False))
        assert t.evaluation.environment.sandbox["mode"] in ("uid", "userns")
        assert t.evaluation.environment.sandbox["warning"] is None
        assert not [f for f in t.evaluation.findings if f.check == "not_sandboxed"]


def test_seccomp_filter_does_not_force_speculation_mitigations(tmp_path):
    """On x86 kernels whose speculation mitigations default to "seccomp" (before 5.16), a
    filter loaded without SECCOMP_FILTER_FLAG_SPEC_ALLOW forces Speculative Store Bypass
    Disable on the worker ("thread force mitigated"), slowing all of its host code, the
    launches of a multi-kernel call included. The filter sets the flag. Judged only where the
    kernel is in that mode (elsewhere a filter forces nothing either way)."""
    mode = Path("/sys/devices/system/cpu/vulnerabilities/spec_store_bypass")
    if not mode.exists() or "seccomp" not in mode.read_text():
        pytest.skip(f"speculation mitigations not in seccomp mode here: {mode.read_text().strip() if mode.exists() else '-'}")
    code = ("import ctypes, sys; ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)\n"
            "from solbench.harness.sandbox import seccomp_filter\n"
            "assert seccomp_filter()\n"
            "print([l for l in open('/proc/self/status') if l.startswith('Speculation_Store_Bypass')][0])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "force" not in out, out
