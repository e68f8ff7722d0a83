"""SOL bounds are counted in a child process (sol/isolated.py): a reference that kills the
counting process (SIGSEGV, os._exit) or hangs costs that workload's SOL block, never the run;
the workloads after it are counted by a fresh child; what the reference prints cannot pass for
a reply; the bounds equal those counted in this process.

n elements of y = 2 x in fp32 on the H200: T_SOL = 8 n / BW (read x, write y)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from solbench.run.session import evaluate_and_score
from sol_helpers import judged
from solbench.sol import bound, count_workload
from solbench.sol.isolated import CountFailed, bounds_isolated
from solbench.spec import load_problem
from solbench.spec.solution import Solution
from solbench.spec.trace import Correctness, Environment, Evaluation, Performance, Status, Trace

BW = 4.8e12
SIZES = (1024, 2048, 4096)

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("SOLBENCH_SHARED", ROOT.parent / "shared"))
DEV = SHARED / "datasets" / "sol-execbench-dev"


def _problem(tmp_path: Path, body: str, name: str = "p"):
    """y = 2 x over N fp32 elements, workloads w0, w1, w2 at N = 1024, 2048, 4096; ``body``
    runs first in the reference (``n`` is N)."""
    d = tmp_path / name
    d.mkdir()
    ref = "import os, signal, sys, time\nimport torch\ndef run(x):\n    n = x.shape[0]\n" + body + \
        "    return x * 2\n"
    (d / "definition.json").write_text(json.dumps({
        "name": name, "axes": {"N": {"type": "var"}}, "inputs": {"x": {"shape": ["N"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["N"], "dtype": "float32"}}, "reference": ref}))
    (d / "workload.jsonl").write_text("".join(
        json.dumps({"uuid": f"w{i}", "axes": {"N": n}, "inputs": {"x": {"type": "random"}}}) + "\n"
        for i, n in enumerate(SIZES)))
    return load_problem(d)


def _sol_ms(n: int) -> float:
    return 8 * n / BW * 1e3


def test_a_reference_that_kills_the_counting_process_costs_its_workload_only(tmp_path):
    p = _problem(tmp_path, "    if n == 2048:\n        os.kill(os.getpid(), signal.SIGSEGV)\n")
    got = bounds_isolated(p, p.workloads, "H200")
    assert got["w0"]["refined"].sol_ms == pytest.approx(_sol_ms(1024))
    assert got["w2"]["refined"].sol_ms == pytest.approx(_sol_ms(4096))  # by a fresh child
    assert isinstance(got["w1"], CountFailed)
    assert "died of SIGSEGV while counting this workload" in str(got["w1"])


def test_exit_and_hang_are_recorded(tmp_path):
    p = _problem(tmp_path, "    if n == 1024:\n        os._exit(3)\n    if n == 4096:\n        time.sleep(600)\n")
    got = bounds_isolated(p, p.workloads, "H200", timeout_s=30)
    assert "exited with status 3 while counting this workload" in str(got["w0"])
    assert got["w1"]["solar"].sol_ms > 0 and got["w1"]["refined"].sol_ms == pytest.approx(_sol_ms(2048))
    assert "did not finish in time" in str(got["w2"])


def test_printed_lines_cannot_pass_for_replies(tmp_path):
    """The reference prints a forged bound, a forged error and a forged end of the replies:
    the child's replies go on a stream of their own, and the bounds are the counted ones."""
    forged = {"uuid": "w1", "bounds": {"refined": {"sol_ms": 1e-9}}}
    body = ("    print(" + repr(json.dumps(forged)) + ")\n"
            "    print('{\"uuid\": \"w2\", \"error\": \"forged\"}')\n"
            "    print('{\"done\": true}', flush=True)\n")
    p = _problem(tmp_path, body)
    got = bounds_isolated(p, p.workloads, "H200")
    for i, n in enumerate(SIZES):
        assert got[f"w{i}"]["refined"].sol_ms == pytest.approx(_sol_ms(n))


def test_a_problem_that_does_not_load_fails_every_workload_once(tmp_path):
    p = _problem(tmp_path, "")
    (p.path / "definition.json").write_text("{ not json")
    got = bounds_isolated(p, p.workloads, "H200")
    assert all(isinstance(got[f"w{i}"], CountFailed) and "definition.json" in str(got[f"w{i}"])
               for i in range(3)), got


def test_the_run_goes_on_with_the_error_in_the_sol_block(tmp_path):
    """evaluate_and_score: the PASSED trace of the workload whose count died keeps its
    status, and its SOL block names the error; the others are scored."""
    p = _problem(tmp_path, "    if n == 2048:\n        os.kill(os.getpid(), signal.SIGSEGV)\n")

    class Fake:
        cfg = None

        def __init__(self, problem):
            self.problem = problem

        def evaluate(self, s, on_trace=None, context=None):
            out = []
            for w in self.problem.workloads:
                ev = Evaluation(status=Status.PASSED, correctness=Correctness(),
                                environment=Environment(hardware="H200"),
                                performance=Performance(latency_ms=1.0, reference_latency_ms=1.0))
                t = Trace(definition=self.problem.name, solution=s.name, workload=w, evaluation=ev)
                t = judged(t, context)
                on_trace(t)
                out.append(t)
            return out

    sol = Solution.model_validate({"name": "c", "definition": p.name, "author": "someone",
                                   "spec": {"languages": ["pytorch"], "entry_point": "m.py::run"},
                                   "sources": [{"path": "m.py", "content": "def run(x):\n    return x * 2\n"}]})
    traces = evaluate_and_score(p, sol, hardware="H200", evaluator=Fake(p))
    assert [t.evaluation.status for t in traces] == [Status.PASSED] * 3
    assert traces[0].evaluation.sol.sol_ms == pytest.approx(_sol_ms(1024))
    assert "SIGSEGV" in traces[1].evaluation.sol.error
    assert traces[2].evaluation.sol.sol_ms == pytest.approx(_sol_ms(4096))


@pytest.mark.skipif(not DEV.exists(), reason="needs ../shared/datasets/sol-execbench-dev")
def test_isolated_bounds_equal_the_in_process_bounds():
    """Two dev problems (one counted on meta tensors, one on real tensors): every field of
    both models' bounds, counted in the child, equals the bound counted here."""
    for rel in ("L1/001_attention_softmax_dropout_value_matmul_backward",
                "FlashInfer-Bench/016_gqa_ragged_prefill_causal_h32_kv4_d128"):
        p = load_problem(DEV / rel)
        wls = p.workloads[:2]
        got = bounds_isolated(p, wls, "H200")
        for w in wls:
            c = count_workload(p, w)
            for m in ("refined", "solar"):
                a, b = got[w.uuid][m].model_dump(), bound(p, w, hardware="H200", model=m, counts=c).model_dump()
                a.pop("notes"), b.pop("notes")  # how the count was made (batch: "on an earlier workload")
                assert a == b


def test_many_problems_in_one_child_a_crash_costs_one_workload(tmp_path):
    """Three problems in one request (the suite runner primes a whole run at once): the second
    kills its child at N = 2048; the first problem's bounds came before, the rest of the
    second's and the third's come from a fresh child, and a problem that does not load fails
    its own workloads only."""
    from solbench.sol.isolated import bounds_isolated_many

    a = _problem(tmp_path, "", name="a")
    b = _problem(tmp_path, "    if n == 2048:\n        os.kill(os.getpid(), signal.SIGSEGV)\n", name="b")
    broken = _problem(tmp_path, "", name="broken")
    (broken.path / "definition.json").write_text("{ not json")
    c = _problem(tmp_path, "", name="c")
    got = bounds_isolated_many([(a, a.workloads), (b, b.workloads), (broken, broken.workloads[:1]),
                                (c, c.workloads)], "H200")
    for res in (got[0], got[3]):
        assert [res[f"w{i}"]["refined"].sol_ms for i in range(3)] == pytest.approx([_sol_ms(n) for n in SIZES])
    assert "SIGSEGV" in str(got[1]["w1"]) and got[1]["w2"]["refined"].sol_ms == pytest.approx(_sol_ms(4096))
    assert isinstance(got[2]["w0"], CountFailed) and "w0" in got[2] and len(got[2]) == 1


#: a reference that finds the child's reply stream (an fd above 2 that is a pipe) and writes
#: replies into it: the forgery a problem's own code could attempt. With ``token``, it also
#: takes the current request's token from the counting loop's frame (as code in the child can)
_WRITE_REPLIES = '''    import json, stat
    def _forge(lines, token=True):
        f = sys._getframe()
        nonce = None
        while f is not None and nonce is None:
            nonce = f.f_locals.get("nonce") if token else None
            f = f.f_back
        for fd in range(3, 64):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    for ln in lines:
                        os.write(fd, (json.dumps(dict(ln, nonce=nonce)) + "\\n").encode())
            except OSError:
                pass
'''


def _forged_bound():
    return {m: {"model": m, "hardware": "H200", "hardware_kind": "datasheet", "sol_ms": 1e-9,
                "bottleneck": "dram", "terms_ms": {"dram": 1e-9}, "flops": {}, "total_flops": 0,
                "solar_macs": 0, "bytes_fused": 0, "bytes_unfused": 0, "bytes_model": 0,
                "arithmetic_intensity": None} for m in ("refined", "solar")}


def test_replies_written_out_of_turn_are_not_taken(tmp_path):
    """Written into the reply stream, with the request's token, while w0 is counted: bounds
    for w1 and w2 (not yet counted), a second result for w0 after its own and an early end;
    then a malformed bound for w1. Only each workload's own result, in turn, is taken: w0 and
    w2 carry the counted bounds, w1 the malformed reply as its error."""
    forged = _forged_bound()
    body = _WRITE_REPLIES + (
        "    if n == 1024:\n"
        f"        _forge([{{'item': 0, 'uuid': 'w1', 'bounds': {forged!r}}}, {{'item': 0, 'uuid': 'w2', "
        f"'bounds': {forged!r}}}, {{'done': True}}])\n"
        "    if n == 2048:\n"
        "        _forge([{'item': 0, 'uuid': 'w1', 'bounds': {'refined': {'sol_ms': 'x'}}}])\n")
    p = _problem(tmp_path, body)
    got = bounds_isolated(p, p.workloads, "H200")
    assert got["w0"]["refined"].sol_ms == pytest.approx(_sol_ms(1024))
    assert "malformed" in str(got["w1"])
    assert got["w2"]["refined"].sol_ms == pytest.approx(_sol_ms(4096))


def test_replies_without_the_requests_token_are_not_taken(tmp_path):
    """The same forgery in turn (w1's counting line, then a tiny bound, and a malformed one)
    but without the request's token: not taken, so every workload keeps its counted bound."""
    forged = _forged_bound()
    body = _WRITE_REPLIES + (
        "    if n == 2048:\n"
        f"        _forge([{{'counting': [0, 'w1']}}, {{'item': 0, 'uuid': 'w1', 'bounds': {forged!r}}}], token=False)\n"
        "    if n == 4096:\n"
        "        _forge([{'item': 0, 'uuid': 'w2', 'bounds': {'refined': {'sol_ms': 'x'}}}], token=False)\n")
    p = _problem(tmp_path, body)
    got = bounds_isolated(p, p.workloads, "H200")
    assert [got[f"w{i}"]["refined"].sol_ms for i in range(3)] == pytest.approx([_sol_ms(n) for n in SIZES])


def test_a_forked_process_cannot_answer_for_the_next_problem_nor_hold_the_run(tmp_path):
    """Problem a's reference forks a process that keeps the reply stream and, later, writes
    an error and a tiny bound for problem b's workloads; another forks one that only sleeps.
    The child kills its descendants between problems and at the end (it is their subreaper),
    so b's bounds are the counted ones, and nothing waits for the sleeper."""
    import time

    from solbench.sol.isolated import bounds_isolated_many

    forged = _forged_bound()
    body = _WRITE_REPLIES + (
        "    if n == 4096 and os.fork() == 0:\n"
        "        time.sleep(3)\n"
        f"        _forge([{{'item': 1, 'uuid': 'w0', 'error': 'forged'}}, {{'item': 1, 'uuid': 'w1', 'bounds': {forged!r}}}])\n"
        "        os._exit(0)\n"
        "    if n == 1024 and os.fork() == 0:\n"
        "        time.sleep(120)\n"
        "        os._exit(0)\n")
    a = _problem(tmp_path, body, name="a")
    b = _problem(tmp_path, "    time.sleep(1.5)\n", name="b")
    t0 = time.monotonic()
    got = bounds_isolated_many([(a, a.workloads), (b, b.workloads)], "H200", timeout_s=60)
    assert time.monotonic() - t0 < 50  # not the sleeper's 120 s, nor a workload's 60
    for res in got:
        assert [res[f"w{i}"]["refined"].sol_ms for i in range(3)] == pytest.approx([_sol_ms(n) for n in SIZES])


#: writes raw bytes into every pipe the child holds above fd 2 (its reply stream among them)
_WRITE_RAW = '''    import stat
    def _raw(data, times=1):
        for fd in range(3, 64):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    for _ in range(times):
                        os.write(fd, data)
            except OSError:
                pass
'''


def test_malformed_flooded_and_endless_reply_lines_cost_their_workload_only(tmp_path, monkeypatch):
    """Into the reply stream: a line of JSON nested past the recursion limit (it once raised
    RecursionError out of the parent), a flood of junk lines for longer than the workload's
    time (the deadline was only checked when no line was waiting) and a line with no end
    (buffered whole in the parent). The first workload keeps its bound; the flooding and
    endless ones end at their time, with bounded memory in the parent (measured in a process
    of its own)."""
    from solbench.sol import isolated

    monkeypatch.setattr(isolated, "PER_WORKLOAD_S", 6.0)
    body = _WRITE_RAW + (
        "    if n == 1024:\n        _raw(b'[' * 200000 + b'\\n')\n"
        "    if n == 2048:\n"
        "        t0 = time.time()\n"
        "        while time.time() - t0 < 30:\n            _raw(b'0\\n' * 32768)\n"
        "    if n == 4096:\n        _raw(b'a' * (1 << 20), times=400)\n        time.sleep(60)\n")
    p = _problem(tmp_path, body)
    code = ("import json, sys, time\n"
            "from solbench.sol import isolated\nfrom solbench.spec import load_problem\n"
            "isolated.PER_WORKLOAD_S = 6.0\n"
            "p = load_problem(sys.argv[1])\n"
            "t0 = time.monotonic()\n"
            "got = isolated.bounds_isolated(p, p.workloads, 'H200')\n"
            # VmHWM: this process image's peak (ru_maxrss keeps the peak of the process that
            # forked it, here pytest's, across exec)
            "hwm = next(int(ln.split()[1]) for ln in open('/proc/self/status') if ln.startswith('VmHWM:'))\n"
            "print(json.dumps({'s': time.monotonic() - t0, 'rss_mb': hwm / 1024,"
            " 'got': {u: (str(g) if isinstance(g, Exception) else g['refined'].sol_ms) for u, g in got.items()}}))\n")
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-c", code, str(p.path)], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["got"]["w0"] == pytest.approx(_sol_ms(1024))
    assert "did not finish in time" in res["got"]["w1"]
    assert "did not finish in time" in res["got"]["w2"]
    # each stuck workload ends at its 6 s (+ the child's start and the kill's reaping)
    assert res["s"] < 60 + 2 * 6 + 30
    assert res["rss_mb"] < 1000  # 400 MB of one endless line, none of it kept


def test_the_callers_working_directory_is_not_on_the_childs_import_path(tmp_path, monkeypatch):
    """A secrets.py (or any module name the child imports) in the directory solbench runs
    from is not imported by the counting child."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "secrets.py").write_text("raise SystemExit(9)\n")
    monkeypatch.chdir(cwd)
    p = _problem(tmp_path, "")
    got = bounds_isolated(p, p.workloads, "H200")
    assert [got[f"w{i}"]["refined"].sol_ms for i in range(3)] == pytest.approx([_sol_ms(n) for n in SIZES])


def test_a_process_that_left_the_session_is_killed_when_the_child_dies(tmp_path):
    """The reference forks a process that leaves the child's session (setsid) and sleeps,
    holding the reply pipe, then kills its counting process: the parent sees the death within
    a second or so (it waited out the workload's 120 s for an end of the pipe that the sleeper
    held back), and the sleeper is killed: not by killing the session, which it left, but by
    the token every process of the child carries."""
    import time
    pidfile = tmp_path / "sleeper.pid"
    body = (f"    if n == 2048:\n"
            f"        if os.fork() == 0:\n"
            f"            os.setsid()\n"
            f"            if os.fork() == 0:\n"
            f"                open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
            f"                time.sleep(300)\n"
            f"            os._exit(0)\n"
            f"        time.sleep(1)\n"
            f"        os.kill(os.getpid(), signal.SIGKILL)\n")
    p = _problem(tmp_path, body)
    t0 = time.monotonic()
    got = bounds_isolated(p, p.workloads, "H200")
    assert time.monotonic() - t0 < 60
    assert "died of SIGKILL while counting" in str(got["w1"])
    assert got["w2"]["refined"].sol_ms == pytest.approx(_sol_ms(4096))
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]


def test_a_tracer_that_never_waits_does_not_hold_the_parent(tmp_path, monkeypatch):
    """The reference has a process of its own (out of the session, with an empty environment,
    so neither the session kill nor the token finds it) ptrace-seize the counting child: the
    child stops at its next signal, a hang, and when it is killed its death goes to the tracer
    first, so the parent's final wait held forever. Now the workload ends at its time, the
    parent kills the tracer it finds in the child's /proc status, and the run goes on.
    Skipped where ptrace is not allowed."""
    import time

    from solbench.sol import isolated

    monkeypatch.setattr(isolated, "PER_WORKLOAD_S", 10.0)
    log = tmp_path / "seize.log"
    body = (f"    if n == 2048:\n"
            f"        import ctypes\n"
            f"        target = os.getpid()\n"
            f"        if os.fork() == 0:\n"
            f"            os.setsid()\n"
            f"            if os.fork() == 0:\n"
            f"                libc = ctypes.CDLL(None, use_errno=True)\n"
            f"                r = libc.ptrace(0x4206, target, 0, 0)\n"
            f"                open({str(log)!r}, 'w').write(f'{{r}} {{ctypes.get_errno()}} {{os.getpid()}}')\n"
            f"                os.execve('/bin/sleep', ['sleep', '300'], {{}})\n"
            f"            os._exit(0)\n"
            f"        time.sleep(2)\n"
            f"        os._exit(3)\n")
    p = _problem(tmp_path, body)
    t0 = time.monotonic()
    got = bounds_isolated(p, p.workloads, "H200")
    took = time.monotonic() - t0
    if not log.exists() or not log.read_text().startswith("0 "):
        pytest.skip(f"ptrace not allowed here ({log.read_text() if log.exists() else 'no log'})")
    assert took < 60  # the workload's 10 s, the kill, 5 s for the traced child's reaping
    assert isinstance(got["w1"], CountFailed)
    assert got["w2"]["refined"].sol_ms == pytest.approx(_sol_ms(4096))
    tracer = int(log.read_text().split()[2])
    assert not Path(f"/proc/{tracer}").exists() or "Z" in Path(f"/proc/{tracer}/stat").read_text().split(")")[1][:3]


def test_a_process_that_keeps_the_reply_pipe_and_clears_its_environment_does_not_hold_the_parent(tmp_path):
    """The reference hands the reply pipe to a process that leaves the session and replaces
    its environment (so neither the session kill nor the token reaches it), then kills its
    counting process: the parent still ends the workload at once (its stream was closed under
    a read blocked until that process ended, 40 s here). That process itself is not killed:
    out of reach without a sandbox (docs/sol-model.md)."""
    import time

    pidfile = tmp_path / "holder.pid"
    body = (f"    if n == 2048:\n"
            f"        fd = sys.modules['__main__']._PROTO.fileno()\n"
            f"        os.set_inheritable(fd, True)\n"
            f"        if os.fork() == 0:\n"
            f"            os.setsid()\n"
            f"            open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
            f"            os.execve('/bin/sleep', ['sleep', '40'], {{}})\n"
            f"        time.sleep(1)\n"
            f"        os.kill(os.getpid(), signal.SIGKILL)\n")
    p = _problem(tmp_path, body)
    t0 = time.monotonic()
    try:
        got = bounds_isolated(p, p.workloads, "H200")
        assert time.monotonic() - t0 < 30
    finally:
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except OSError:
                pass
    assert "died of SIGKILL while counting" in str(got["w1"])
    assert got["w2"]["refined"].sol_ms == pytest.approx(_sol_ms(4096))


def test_a_prestarted_child_is_taken_by_the_next_count_and_a_spare_nobody_takes_is_ended(tmp_path):
    """``prestart`` spawns the child before the hardware is known; the next CountingChild of the
    same registry sends it the header and counts with it (the same pid), with the bounds of a
    fresh child: y = 2 x is 8 n bytes at the H200's 4.8 TB/s. A spare of another registry is
    not taken, and ``discard_spare`` ends it (its process gone)."""
    from solbench.proc.registry import OwnProcesses
    from solbench.sol import isolated

    p = _problem(tmp_path, "")
    reg = OwnProcesses()
    isolated.prestart(registry=reg)
    pid = isolated._SPARE[0].pid
    assert pid in reg.helpers()
    with isolated.CountingChild("H200", registry=reg) as child:
        got = child.count(0, str(p.path), p.workloads)
        assert child._proc.pid == pid and isolated._SPARE is None
    for w, n in zip(p.workloads, SIZES):
        assert got[w.uuid]["refined"].sol_ms == pytest.approx(_sol_ms(n), rel=1e-9)
    assert pid not in reg.helpers()

    isolated.prestart(registry=reg)
    spare = isolated._SPARE[0]
    with isolated.CountingChild("H200", registry=OwnProcesses()) as other:
        other.count(0, str(p.path), p.workloads[:1])
        assert other._proc.pid != spare.pid
    assert isolated._SPARE is not None
    isolated.discard_spare()
    assert spare.poll() is not None and isolated._SPARE is None and spare.pid not in reg.helpers()
