"""What a candidate's worker can see and use of the host (issue 30, items 2, 3, 5 and 6),
with real hostile candidates evaluated through the real harness:

- item 2: the sandbox is an allow-list (the interpreter, the package, the system's
  libraries and compilers): a candidate walking the file system finds no results file,
  earlier trace, other solution, problem folder, repository or home; the base seed under
  ``--seed`` is never written, so a candidate that reads earlier traces cannot rebuild later
  inputs;
- item 3: workers start from an allow-list of variables; a token the user exported never
  reaches the trace's log;
- item 5: a killed worker leaves nothing in the host's temp folder;
- item 6: a memory cap per worker (cgroup, else RLIMIT_DATA and tmpfs sizes): a candidate
  that allocates without end, or fills its tmpfs, ends RUNTIME_ERROR naming the cap, and the
  run goes on.

Skipped where bubblewrap cannot build a sandbox on this host (the status says why)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import solbench
from solbench.harness import EvalConfig, evaluate, memcap, sandbox
from solbench.spec import Status, load_problem, load_solution

from harness_helpers import matmul_problem, write_problem

HERE = Path(__file__).parent
SRC = Path(solbench.__file__).resolve().parents[1]
ADV = HERE.parent / "adversarial"

sandboxed = pytest.mark.skipif(sandbox.resolve_mode("cpu")[0] == "none",
                               reason=f"no sandbox here: {sandbox.resolve_mode('cpu')[1]}")


@pytest.fixture
def outside_tmp():
    """A folder outside /tmp (the worker's /tmp is private anyway), like a user's work dir."""
    d = Path(tempfile.mkdtemp(prefix="solbench-view-", dir="/var/tmp"))
    os.chmod(d, 0o755)  # as a work dir usually is: the ``uid`` mode's worker could read it
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _cli(args, cwd, env=None, timeout=600):
    e = dict(os.environ if env is None else env, PYTHONPATH=str(SRC))
    p = subprocess.run([sys.executable, "-c", "from solbench.cli import main; main()", *args],
                       cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace")


# ---------------------------------------------------------------- item 2: the file system
@sandboxed
def test_walking_candidate_finds_nothing_of_the_user(outside_tmp, solbench_cache, monkeypatch):
    """The user's work dir (outside /tmp): a problem folder, an earlier results file, another
    candidate's solution, a home with a file. The candidate looks for them where they are
    and walks / for results files, definitions, solutions and solbench's pyproject; on the
    read-only view of the whole host it found them all (RUNTIME_ERROR ``LEAK``)."""
    work = outside_tmp / "work"
    p = matmul_problem(work, (64,), uuid="w")
    results = work / "results.jsonl"
    results.write_text(json.dumps({"definition": "mm", "evaluation": {"status": "PASSED",
                                                                      "input_seed": "abc"}}) + "\n")
    other = work / "solutions" / "rival" / "solution.json"
    other.parent.mkdir(parents=True)
    other.write_text('{"name": "rival"}')
    home = outside_tmp / "home"
    (home / ".config").mkdir(parents=True)
    (home / ".config" / "token").write_text("hunter2")
    planted = {"results file": str(results), "other solution": str(other),
               "problem definition": str(p.path / "definition.json"),
               "home file": str(home / ".config" / "token"), "work dir": str(work)}
    monkeypatch.setenv("SOLBENCH_TEST_PLANTED", json.dumps(planted))
    monkeypatch.setenv("HOME", str(home))
    s = load_solution(HERE / "cand_sandbox_walk.py", p)
    (t,) = evaluate(p, s, EvalConfig(device="cpu", rounds=1, timing=False))
    assert "LEAK" not in (t.evaluation.log or ""), t.evaluation.log[-3000:]
    assert t.evaluation.status == Status.PASSED, t.evaluation.log[-3000:]


def test_walking_candidate_finds_the_planted_files_unsandboxed(outside_tmp, solbench_cache, monkeypatch):
    """The control: the same candidate, unsandboxed, reads each planted file (so the test
    above can fail, and fails on a sandbox that binds the host)."""
    work = outside_tmp / "work"
    p = matmul_problem(work, (64,), uuid="w")
    results = work / "results.jsonl"
    results.write_text(json.dumps({"evaluation": {"status": "PASSED"}}) + "\n")
    monkeypatch.setenv("SOLBENCH_TEST_PLANTED", json.dumps({"results file": str(results)}))
    monkeypatch.setenv("SOLBENCH_SANDBOX", "off")
    s = load_solution(HERE / "cand_sandbox_walk.py", p)
    (t,) = evaluate(p, s, EvalConfig(device="cpu", rounds=1, timing=False))
    assert t.evaluation.status == Status.RUNTIME_ERROR
    assert f"read results file at {results}" in t.evaluation.log
    assert f"walk found {results}" in t.evaluation.log


def test_bind_list_is_an_allow_list(monkeypatch):
    """The command binds nothing of / wholesale: system folders, a few /etc files, the
    interpreter and the package; never the working directory, the home, /var or /work."""
    a = sandbox._bwrap_args("uid", "cpu", "/bin/bwrap")
    binds = [a[i + 1] for i, x in enumerate(a) if x in ("--ro-bind", "--bind", "--dev-bind")]
    assert "/" not in binds and "/dev" not in binds
    cwd = os.path.realpath(os.getcwd())  # the repository root, under pytest
    assert not [b for b in binds if cwd == b or cwd.startswith(b + "/")], cwd
    for b in binds:
        assert b.startswith(("/usr", "/etc/", "/sys/", "/dev/")) or b in sandbox.code_paths(), b
    assert str(SRC) in binds  # the package the worker imports
    home = os.path.realpath(os.path.expanduser("~"))
    assert home not in binds
    monkeypatch.setenv("SOLBENCH_SANDBOX_BIND", "/var/lib")
    assert "/var/lib" in sandbox._bwrap_args("uid", "cpu", "/bin/bwrap")
    # a secret folder inside a bound one (the trace key kept under /usr/local, a cache in
    # the venv) gets an empty tmpfs over it
    monkeypatch.setenv("SOLBENCH_CACHE", "/usr/share")
    a = sandbox._bwrap_args("uid", "cpu", "/bin/bwrap")
    assert ("--tmpfs", "/usr/share") in list(zip(a, a[1:]))


# ---------------------------------------------------------------- item 2: the seed
GELU = json.loads((ADV / "problems" / "gelu_f32" / "definition.json").read_text())


def _gelu3(root: Path) -> Path:
    return write_problem(root / "gelu3", GELU, [
        {"uuid": f"g{m}", "axes": {"m": m}, "inputs": {"x": {"type": "random"}},
         "tolerance": {"max_atol": 0.01, "max_rtol": 0.01, "required_matched_ratio": 0.99}}
        for m in (16, 24, 32)])


def _statuses(results: Path) -> list[str]:
    return [json.loads(x)["evaluation"]["status"] for x in results.read_text().splitlines() if x.strip()]


@pytest.mark.slow
def test_recorded_seed_does_not_predict_later_workloads(outside_tmp, solbench_cache):
    """Unsandboxed (the sandbox hides the results file; this is the second line): a candidate
    reads the traces written so far under ``--seed``, rebuilds every input set with solbench's
    own generator and answers from a table. With the base in the trace (before) it PASSED
    every workload after the first; with the fingerprint nothing matches. The control gives it
    the base directly: then it passes, so the table itself is right."""
    from solbench.inputs.seeds import fingerprint

    base = 0x5EED5EED1234567
    prob = _gelu3(outside_tmp)
    env = dict(os.environ, SOLBENCH_SANDBOX="off")
    args = ["eval", str(prob), "-s", str(HERE / "cand_seed_from_results.py"), "--device", "cpu",
            "--rounds", "2", "--no-timing", "--seed", hex(base), "-o", "results.jsonl"]
    rc, log = _cli(args, outside_tmp, env)
    res = outside_tmp / "results.jsonl"
    traces = [json.loads(x) for x in res.read_text().splitlines() if x.strip()]
    assert len(traces) == 3, log
    assert [t["evaluation"]["status"] for t in traces] == ["INCORRECT_NUMERICAL"] * 3, log
    assert {t["evaluation"]["input_seed"] for t in traces} == {fingerprint(base)}
    text = res.read_text() + (res.with_name(res.name + ".manifest.json")).read_text()
    assert format(base, "x") not in text and str(base) not in text  # nowhere, manifest included
    # the control: the base given to it, the same candidate passes every workload
    res.unlink()
    res.with_name(res.name + ".manifest.json").unlink()
    rc, log = _cli(args, outside_tmp, dict(env, SOLBENCH_TEST_SEED_HINT=format(base, "x")))
    assert _statuses(res) == ["PASSED"] * 3, log


# ---------------------------------------------------------------- item 3: the environment
SECRETS = {"MY_API_TOKEN": "tok-7f3a9c1e", "OPENAI_API_KEY": "sk-test-5b2d8e",
           "AWS_SECRET_ACCESS_KEY": "aws-9e1f4c7a", "HF_TOKEN": "hf_0c4e8a2b"}


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_exported_tokens_never_reach_the_trace(tmp_path, solbench_cache, monkeypatch, mode):
    """The candidate prints its environment into its stdout (the trace's log): the user's
    tokens are not there, in the sandbox or without it; the variables it needs are."""
    if mode == "auto" and sandbox.resolve_mode("cpu")[0] == "none":
        pytest.skip("no sandbox here")
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SOLBENCH_SANDBOX", mode)
    p = matmul_problem(tmp_path, (32,), uuid="w")
    (t,) = evaluate(p, load_solution(HERE / "cand_env_dump.py", p), EvalConfig(device="cpu", rounds=1, timing=False))
    log = t.evaluation.log or ""
    assert t.evaluation.status == Status.PASSED, log[-2000:]
    assert "ENVDUMP" in log and "'PATH'" in log and "'PYTHONPATH'" in log
    for k, v in SECRETS.items():
        assert v not in log and k not in log, k
    assert json.loads(t.to_json_line())  # and so not in the results file either


def test_worker_env_allow_list():
    env = sandbox.worker_env({"PATH": "/usr/bin", "LANG": "C.UTF-8", "CUDA_VISIBLE_DEVICES": "1",
                              "TORCHINDUCTOR_MAX_AUTOTUNE": "1", "SOLBENCH_SANDBOX": "auto",
                              "OPENAI_API_KEY": "x", "AWS_ACCESS_KEY_ID": "y", "GITHUB_TOKEN": "z",
                              "PYTHONPATH": "/elsewhere", "PYTHONSTARTUP": "/evil.py",
                              "LD_PRELOAD": "/evil.so", "SOLBENCH_WORKER_AUTHKEY": "k"})
    assert env == {"PATH": "/usr/bin", "LANG": "C.UTF-8", "CUDA_VISIBLE_DEVICES": "1",
                   "TORCHINDUCTOR_MAX_AUTOTUNE": "1", "SOLBENCH_SANDBOX": "auto"}


# ---------------------------------------------------------------- item 5: leftovers
def _tmp_entries(d: Path) -> set[str]:
    return {x.name for x in d.iterdir()}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "off"])
def test_killed_workers_leave_nothing_in_tmp(tmp_path, solbench_cache, monkeypatch, mode):
    """RUNTIME_ERROR (os._exit), TIMEOUT (an endless first call) and REWARD_HACK (a patched
    timer), sandboxed or not: the parent's temp folder holds exactly what it held before (each
    worker's log was a 16 MiB-capped file left there; unsandboxed, the worker's bytecode
    folder too)."""
    monkeypatch.setenv("SOLBENCH_SANDBOX", mode)
    host_tmp = tmp_path / "host-tmp"
    host_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(host_tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    before = _tmp_entries(host_tmp)
    add = load_problem(ADV / "problems" / "add_f32")
    mm = matmul_problem(tmp_path, (32,), uuid="w")
    runs = [(add, ADV / "hostile" / "os_exit.py", Status.RUNTIME_ERROR),
            (mm, HERE / "cand_infinite_first_call.py", Status.TIMEOUT),
            (add, ADV / "hostile" / "timer_patch.py", Status.REWARD_HACK)]
    for prob, cand, want in runs:
        cfg = EvalConfig(device="cpu", rounds=1, iters=4, max_workloads=1)
        cfg = cfg.with_timeout(10)
        (t,) = evaluate(prob, load_solution(cand, prob), cfg)[:1]
        assert t.evaluation.status == want, (cand.name, t.evaluation.status, t.evaluation.log[-1500:])
        assert _tmp_entries(host_tmp) == before, (cand.name, _tmp_entries(host_tmp) - before)


# ---------------------------------------------------------------- item 6: memory
CAP = 768 << 20


@pytest.fixture
def small_cap(monkeypatch):
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM", str(CAP))
    monkeypatch.setenv("SOLBENCH_TEST_MEM_CEILING", str(2 << 30))


def _mem_eval(tmp_path, cand):
    p = matmul_problem(tmp_path, (32, 48), tol=1e-3)
    return evaluate(p, load_solution(HERE / cand, p), EvalConfig(device="cpu", rounds=1, timing=False))


@sandboxed
@pytest.mark.parametrize("cand", ["cand_mem_grow.py", "cand_mem_fill_tmpfs.py"])
def test_memory_cap_ends_the_worker_and_the_run_goes_on(tmp_path, solbench_cache, small_cap, cand):
    """A candidate that allocates (or fills its /tmp) without end, bounded only by a 2 GiB
    ceiling the unfixed harness let it reach (``NO CAP``): with a 768 MiB cap it ends
    RUNTIME_ERROR naming the cap (the cgroup's OOM kill) or, where only the tmpfs size bounds
    it, full at the cap; both workloads get their trace."""
    traces = _mem_eval(tmp_path, cand)
    assert len(traces) == 2
    for t in traces:
        log = t.evaluation.log or ""
        assert t.evaluation.status == Status.RUNTIME_ERROR, log[-2000:]
        assert "NO CAP" not in log, log[-2000:]
        held = [int(x.split()[1]) for x in log.splitlines() if x.startswith(("HELD ", "WROTE "))]
        assert not held or max(held) <= CAP, max(held)
        mech = memcap.probe()["mechanism"]
        if mech != "rlimit":
            assert f"exceeded its memory cap of {memcap.gib(CAP)}" in log, log[-2000:]
            f = [x for x in t.evaluation.findings if x.check == "memory_limit"]
            assert f and f[0].evidence["cap_bytes"] == CAP and f[0].evidence["oom_kills"] >= 1
    assert traces[0].evaluation.environment.sandbox["memory"]["cap_bytes"] == CAP


@sandboxed
def test_memory_cap_without_a_cgroup(tmp_path, solbench_cache, small_cap, monkeypatch):
    """Where no memory cgroup can be made, the worker's RLIMIT_DATA holds the cap: the
    allocation fails inside the call (torch's allocator error), RUNTIME_ERROR, under the cap."""
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM_CGROUP", "0")
    p = matmul_problem(tmp_path, (32,), uuid="w")
    (t,) = evaluate(p, load_solution(HERE / "cand_mem_grow.py", p), EvalConfig(device="cpu", rounds=1, timing=False))
    log = t.evaluation.log or ""
    assert t.evaluation.status == Status.RUNTIME_ERROR and "NO CAP" not in log, log[-2000:]
    held = [int(x.split()[1]) for x in log.splitlines() if x.startswith("HELD ")]
    assert held and max(held) <= CAP
    assert "allocate" in log.lower(), log[-2000:]
    assert t.evaluation.environment.sandbox["memory"]["bound_by"] == "RLIMIT_DATA"
    # the reason names the cap, and the advisory finding carries it (it decides nothing)
    assert f"refused at the worker's memory cap of {memcap.gib(CAP)}" in log, log[-600:]
    (f,) = [x for x in t.evaluation.findings if x.check == "memory_limit"]
    assert f.severity == "advisory" and f.evidence["cap_bytes"] == CAP
    assert f.evidence["mechanism"] == "rlimit" and "allocate memory" in f.evidence["error"]


def test_an_allocation_refusal_names_the_cap_only_under_rlimit():
    """The refusal is read from the failed call's message (the worker's words) only where no
    kernel counter can say it: never under a cgroup, never for device memory."""
    cap = memcap.MemCap(cap=0)
    cap.cap, cap.mechanism = CAP, "rlimit"
    torch_cpu = ("correctness round 0: RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. "
                 "DefaultCPUAllocator: can't allocate memory: you tried to allocate 67108864 bytes.")
    assert cap.refusal(torch_cpu)["cap_bytes"] == CAP
    assert cap.refusal("timed call 3: MemoryError")["error"] == "MemoryError"
    assert cap.refusal("OSError: [Errno 12] Cannot allocate memory")["mechanism"] == "rlimit"
    assert cap.refusal("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB") is None
    assert cap.refusal("ValueError: shapes differ") is None
    cap.mechanism = "cgroup_v2"
    assert cap.refusal(torch_cpu) is None


def test_cap_setting():
    assert memcap.parse_bytes("512M") == 512 << 20 and memcap.parse_bytes("1.5G") == 3 << 29
    assert memcap.parse_bytes("8GiB") == 8 << 30 and memcap.parse_bytes("4096") == 4096
    with pytest.raises(ValueError, match="SOLBENCH_SANDBOX_MEM"):
        memcap.parse_bytes("lots")
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert memcap.MIN_DEFAULT_BYTES <= memcap.default_cap() <= max(total, memcap.MIN_DEFAULT_BYTES)


def test_manifest_never_holds_the_base_seed():
    """The manifest is written while the run goes on: its command line carries the base
    seed's fingerprint, in both spellings of the option."""
    from solbench.inputs.seeds import fingerprint
    from solbench.store.manifest import redact_seed_argv

    argv = ["solbench", "eval", "p", "--seed", "0x5eed", "-o", "r.jsonl"]
    assert redact_seed_argv(argv) == ["solbench", "eval", "p", "--seed", fingerprint(0x5EED), "-o", "r.jsonl"]
    assert redact_seed_argv(["solbench", "run", "--seed=24301"]) == ["solbench", "run", "--seed=" + fingerprint(24301)]
    assert fingerprint(24301) == fingerprint(0x5EED) != fingerprint(24302)
