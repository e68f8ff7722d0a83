"""Red team of session 21 (docs/threats.md, "Red team of session 21 (CPU)"): memory the sandbox holds
outside what the watchdog without a cgroup counted, each with its real candidate under
tests/harness/, and the honest counterparts that must not be flagged."""

import mmap
import os
from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate, memcap, sandbox, shm
from solbench.proc import procfs
from solbench.spec import Status, load_solution

from harness_helpers import matmul_problem, py_solution

HERE = Path(__file__).resolve().parent
CAP = 768 << 20
MIB = 1 << 20

sandboxed = pytest.mark.skipif(sandbox.resolve_mode("cpu")[0] == "none",
                               reason=f"no sandbox here: {sandbox.resolve_mode('cpu')[1]}")
needs_memfd = pytest.mark.skipif(procfs.shm_dev() is None, reason="no memfd_create on this host")


def _mode(problem, mode: str):
    s = load_solution(HERE / "cand_mem_shmem.py", problem)
    src = s.sources[0].content.replace("MODE = 1.0", f"MODE = {mode!r}")
    return s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})


@needs_memfd
def test_shmem_objects_counts_memfds_and_shared_mappings_once():
    """Worked by hand in this process: a memfd with 3 MiB written and never mapped, a shared
    anonymous mapping of 8 MiB with 2 MiB of it touched, and that memfd mapped as well: the
    memfd counts 3 MiB once (fd and mapping are one inode), the mapping 2 MiB (its pages, not
    its length); a closed, unmapped memfd is gone from the count."""
    fd = os.memfd_create("t")
    os.write(fd, b"\1" * (3 * MIB))
    m = mmap.mmap(-1, 8 * MIB, flags=mmap.MAP_SHARED)
    for i in range(0, 2 * MIB, mmap.PAGESIZE):
        m[i] = 1
    mf = mmap.mmap(fd, 3 * MIB, flags=mmap.MAP_SHARED)
    gone = os.memfd_create("gone")
    os.write(gone, b"\1" * MIB)
    gone_ino = os.fstat(gone).st_ino
    os.close(gone)
    try:
        objs = procfs.shmem_objects(os.getpid())
        assert objs[os.fstat(fd).st_ino] == 3 * MIB
        assert gone_ino not in objs
        mine = {k: v for k, v in objs.items() if k != os.fstat(fd).st_ino}
        if os.access(f"/proc/{os.getpid()}/map_files", os.R_OK) and os.geteuid() == 0:
            assert 2 * MIB in mine.values(), mine
    finally:
        mf.close()
        m.close()
        os.close(fd)


def test_the_harness_buffers_are_its_own():
    """The memfds of the harness's buffers are listed as its own (left out of a worker's
    share) while they exist, and no longer once closed."""
    import torch

    arena = shm.ShmArena()
    if not arena.sealed:
        pytest.skip("no sealed memfds here")
    t, desc = arena.tensor((1024,), None, torch.float32)
    ino = os.fstat(shm.MEMFDS[desc["path"].removeprefix("memfd:")]).st_ino
    assert ino in shm.OWN_INODES
    arena.close()
    assert ino not in shm.OWN_INODES


@sandboxed
@needs_memfd
@pytest.mark.parametrize("mode", ["shared_anon", "memfd", "shared_child", "memfd_closed"])
def test_shmem_past_the_cap_is_killed_without_a_cgroup(tmp_path, solbench_cache, monkeypatch, mode):
    """The candidate holds 1.5 caps (1.125 GiB against 768 MiB) in a shared anonymous mapping,
    in memfds written and never mapped, in a shared mapping a forked child filled before it
    exited, or in memfds mapped untouched with their fds closed (the last two: pages no live
    process has faulted in, so no RssShmem shows them). Old code: PASSED on both workloads,
    no finding (``HELD 1207959552`` in the log): RLIMIT_DATA binds private mappings only and
    the watchdog summed anonymous memory and the two tmpfs. Now the watchdog counts the shmem
    objects of the sandbox's processes (their fds every look, their maps every 10th):
    RUNTIME_ERROR, ``memory_limit`` mechanism ``watchdog`` with the shmem bytes seen; both
    workloads get their trace."""
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM", str(CAP))
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM_CGROUP", "0")
    p = matmul_problem(tmp_path, (32, 48), tol=1e-3)
    traces = evaluate(p, _mode(p, mode), EvalConfig(device="cpu", rounds=1, timing=False))
    assert len(traces) == 2
    for t in traces:
        ev = t.evaluation
        assert ev.status == Status.RUNTIME_ERROR, (ev.status, (ev.log or "")[-800:])
        f = [x for x in ev.findings if x.check == "memory_limit"]
        assert f and f[0].evidence["mechanism"] == "watchdog", (ev.findings, (ev.log or "")[-1500:])
        assert f[0].evidence["cap_bytes"] == CAP < f[0].evidence["held_bytes"]
        assert f[0].evidence["shmem_bytes"] > CAP // 2, f[0].evidence
        assert f"exceeded its memory cap of {memcap.gib(CAP)}" in ev.log


@sandboxed
def test_a_detached_system_v_segment_is_refused(tmp_path, solbench_cache, monkeypatch):
    """A System V segment, touched then detached, is held by no process, fd or mapping of the
    sandbox (only its IPC namespace): no count can see it. Old code: PASSED holding 1.5 caps.
    Now ``shmget`` is among the system calls the sandbox's seccomp filter refuses: the call
    fails (RUNTIME_ERROR) before a byte is held."""
    if not sandbox.sandbox_status("cpu")["seccomp"]:
        pytest.skip("no seccomp filter here (pyseccomp / libseccomp missing)")
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM", str(CAP))
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM_CGROUP", "0")
    p = matmul_problem(tmp_path, (32,), tol=1e-3)
    (t,) = evaluate(p, _mode(p, "sysv"), EvalConfig(device="cpu", rounds=1, timing=False))
    ev = t.evaluation
    assert ev.status == Status.RUNTIME_ERROR, (ev.status, (ev.log or "")[-800:], ev.findings, ev.environment.sandbox)
    assert "HELD" not in (ev.log or "") and "shmget" in (ev.log or ""), ev.log


@sandboxed
@needs_memfd
def test_inputs_beyond_the_cap_and_shared_memory_of_its_own_pass(tmp_path, solbench_cache, monkeypatch):
    """The harness's input buffers are memfds mapped in the worker, and a timed run keeps many
    input sets: 2048^2 fp32 (16 MiB a tensor, three a set) timed under a 512 MiB cap holds more
    than the cap in them alone (checked: with the harness's own inodes counted, the watchdog
    kills this candidate). An honest matmul that also keeps a 32 MiB shared mapping and a
    16 MiB memfd of its own (a workspace) PASSES with no memory finding: the watchdog leaves
    the harness's buffers out and counts the candidate's 48 MiB."""
    cap = 512 << 20
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM", str(cap))
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM_CGROUP", "0")
    p = matmul_problem(tmp_path, (2048,), tol=1e-3)
    src = ("import mmap, os\nimport torch\n\n"
           "_ws = mmap.mmap(-1, 32 << 20, flags=mmap.MAP_SHARED)\n_fd = os.memfd_create('ws')\n"
           "for _i in range(32):\n    _ws.write(b'\\1' * (1 << 20))\n"
           "    if _i < 16:\n        os.write(_fd, b'\\1' * (1 << 20))\n\n"
           "def run(a, b):\n    return torch.matmul(a, b)\n")
    (t,) = evaluate(p, py_solution("mm_ws", src, "mm"),
                    EvalConfig(device="cpu", rounds=2, iters=4, reference_timing=False))
    assert t.evaluation.status == Status.PASSED, (t.evaluation.status, t.evaluation.findings,
                                                  (t.evaluation.log or "")[-800:])
    assert not [x for x in t.evaluation.findings if x.check == "memory_limit"]


def _userns(monkeypatch) -> None:
    monkeypatch.setenv("SOLBENCH_SANDBOX", "userns")
    mode, why = sandbox.resolve_mode("cpu")
    if mode != "userns":
        pytest.skip(f"no userns sandbox here: {why}")


@pytest.mark.parametrize("where", ["/", "/dev"])
def test_files_on_the_sandbox_root_are_refused_in_userns_mode(tmp_path, solbench_cache, monkeypatch, where):
    """``userns`` mode (every CUDA worker's): the candidate is uid 0 of its namespace and owns
    bwrap's root and /dev tmpfs mounts. It writes 1.5 caps of files there. Old code: PASSED
    on the workload, ``HELD 1207959552`` (no cgroup: the watchdog reads /tmp and /dev/shm
    only, RLIMIT_DATA binds no file). Now both are remounted read-only after the sandbox is
    built: the first write fails (EROFS), RUNTIME_ERROR, nothing held."""
    _userns(monkeypatch)
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM", str(CAP))
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM_CGROUP", "0")
    p = matmul_problem(tmp_path, (32,), tol=1e-3)
    s = load_solution(HERE / "cand_mem_root_tmpfs.py", p)
    src = s.sources[0].content.replace("DIR = 1.0", f"DIR = {where!r}")
    s = s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})
    (t,) = evaluate(p, s, EvalConfig(device="cpu", rounds=1, timing=False))
    ev = t.evaluation
    assert ev.status == Status.RUNTIME_ERROR, (ev.status, (ev.log or "")[-800:])
    assert "HELD" not in ev.log and "Read-only file system" in ev.log, ev.log[-800:]


def test_honest_work_in_userns_mode_with_a_read_only_root(tmp_path, solbench_cache, monkeypatch):
    """What honest code writes in a ``userns`` sandbox still works with the root and /dev
    read-only: a temporary file (TMPDIR), HOME, /dev/null through a subprocess, /dev/shm
    (a multiprocessing lock), torch.compile's cache: PASSED."""
    _userns(monkeypatch)
    p = matmul_problem(tmp_path, (64,), tol=1e-3)
    src = ("import os, subprocess, sys, tempfile, multiprocessing\nimport torch\n\n"
           "_mm = torch.compile(torch.matmul)\n\n"
           "def run(a, b):\n"
           "    with tempfile.NamedTemporaryFile() as f:\n        f.write(b'x')\n"
           "    with open(os.path.join(os.path.expanduser('~'), 'note'), 'w') as f:\n        f.write('x')\n"
           "    subprocess.run([sys.executable, '-c', 'print(1)'], stdout=subprocess.DEVNULL, check=True)\n"
           "    with multiprocessing.Lock():\n        pass\n"
           "    return _mm(a, b)\n")
    (t,) = evaluate(p, py_solution("mm_userns", src, "mm"),
                    EvalConfig(device="cpu", rounds=2, iters=4, reference_timing=False))
    assert t.evaluation.status == Status.PASSED, (t.evaluation.status, (t.evaluation.log or "")[-1500:])


L1 = Path(__file__).resolve().parents[2] / "src" / "solbench" / "suites" / "data" / "l1"


@pytest.mark.parametrize("seed", [1, 2])
def test_one_pass_layer_norm_fails_the_bundled_l1_problem(solbench_cache, seed):
    """l1/layer_norm_fp32 (tolerance 1e-4), its 16 x 256 workload. Old code: PASSED 11 of 12
    evaluations (and under --seed 1 and 2): the stress round was dropped because torch's own
    float32 layer norm missed the fp64 truth there (gamma and beta offset by hundreds, rows
    of offset / spread up to 10^4). Now the stress rows hold the reference to 1e-4 and the
    round is judged: INCORRECT_NUMERICAL."""
    from solbench.spec import load_problem

    p = load_problem(L1 / "layer_norm_fp32")
    (t,) = evaluate(p, load_solution(HERE / "cand_layernorm_one_pass_l1.py", p),
                    EvalConfig(device="cpu", timing=False, workloads=["0"], seed=seed))
    ev = t.evaluation
    assert ev.status == Status.INCORRECT_NUMERICAL, (ev.status, ev.correctness.extra.get("extra_rounds"))
