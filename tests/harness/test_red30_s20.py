"""Red team of issue 30, session 20 (docs/threats.md, "Red team of issue 30 (session 20)"):
the holes it found, each with its real candidate under tests/harness/, and the honest
kernels it checked are not flagged."""

import re
from pathlib import Path

import pytest
import torch

from solbench.harness import EvalConfig, evaluate, memcap, sandbox
from solbench.harness.precision import flushed_denormals
from solbench.spec import Status, load_solution

from harness_helpers import bf16_matmul_here, matmul_problem
from test_flush_denormal import _softmax_problem

HERE = Path(__file__).resolve().parent
CFG = dict(device="cpu", iters=4, rounds=3, reference_timing=False)


def _with(path: Path, problem, **consts):
    """The candidate at ``path`` with its module constants ``NAME = 1.0`` set to ``consts``."""
    s = load_solution(path, problem)
    src = s.sources[0].content
    for k, v in consts.items():
        src = src.replace(f"{k} = 1.0", f"{k} = {v!r}")
    return s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})


def test_flush_rule_on_a_share_of_the_rows():
    """Worked by hand: 100 rows of 10 subnormals each; every third row (34 rows, 340 values)
    zeroed is a third of the positions, under the share of one half; in the top three
    binades (>= 2^-129) that is 34 x 5 = 170 flushed, far over 16."""
    ref = torch.empty(100, 10)
    ref[:, :5] = 2.0**-128  # top three binades of float32's subnormals
    ref[:, 5:] = 2.0**-135  # solid (>= 2^-139), not top
    out = ref.clone()
    out[::3] = 0.0
    ev = flushed_denormals(out, ref)
    assert ev is not None and ev["flushed"] == 340 and ev["positions"] == 1000
    assert ev["top_flushed"] == 170 and ev["top_positions"] == 500
    # the same share at the lower binades only (an honest kernel's underflowing
    # intermediate would hit the smallest values first): not evidence under half
    out = ref.clone()
    out[::3, 5:] = 0.0
    assert flushed_denormals(out, ref) is None
    # 15 zeros in the top binades: under the count
    out = ref.clone()
    out.view(-1)[torch.arange(0, 150, 10)] = 0.0
    assert flushed_denormals(out, ref) is None
    out.view(-1)[150] = 0.0
    assert flushed_denormals(out, ref)["top_flushed"] == 16


@pytest.mark.parametrize("temperature", [0.03, 1.0])
def test_flush_on_every_third_row_is_a_precision_downgrade(tmp_path, solbench_cache, temperature):
    """Old code: PASSED, no finding, at 0.03 and 1.0 (a third of the positions flushed, under
    the rule's share of one half). Now REWARD_HACK denormals_flushed with the top-binade count."""
    p = _softmax_problem(tmp_path, temperature)
    (t,) = evaluate(p, _with(HERE / "cand_flush_some_rows.py", p, TEMPERATURE=temperature), EvalConfig(**CFG))
    ev = t.evaluation
    f = [x for x in ev.findings if x.check == "denormals_flushed"]
    assert ev.status == Status.REWARD_HACK and f, (ev.status, ev.findings)
    assert f[0].evidence["top_flushed"] >= 16, f[0].evidence
    if temperature == 0.03:
        # every row holds subnormals, so a third of them are flushed: under the old rule's half.
        # At 1.0 only the stress round's low-temperature rows do, and which of them fall on
        # flushed rows depends on that round's seed (a share above one half in some runs)
        assert f[0].evidence["share"] < 0.5, f[0].evidence


@pytest.mark.parametrize("cand", ["cand_softmax_numpy.py",
                                  pytest.param("cand_softmax_compiled.py", marks=pytest.mark.slow)])
def test_honest_softmaxes_keep_their_subnormals(tmp_path, solbench_cache, cand):
    """numpy's SIMD exp and Inductor's generated C++ on a softmax whose outputs are 17%
    subnormal: PASSED, no finding (measured: no exact zero at any subnormal position)."""
    p = _softmax_problem(tmp_path, 0.03)
    (t,) = evaluate(p, _with(HERE / cand, p, TEMPERATURE=0.03), EvalConfig(**CFG))
    assert t.evaluation.status == Status.PASSED, (t.evaluation.status, t.evaluation.findings)


def test_flush_only_after_the_timed_loop_is_seen_by_the_late_recheck(tmp_path, solbench_cache):
    """A candidate exact for its first N calls flushes from then on; N is set from an exact
    run's count (its log) so that only the re-checks after the timed loop are flushed, the
    calls every candidate meets whatever N is. Old code: PASSED (the re-checks judged the
    tolerance, which a flush passes, and dropped the flush evidence). Now REWARD_HACK
    denormals_flushed, named at the re-check."""
    p = _softmax_problem(tmp_path, 0.03)
    cand = HERE / "cand_flush_after_rounds.py"
    (t,) = evaluate(p, _with(cand, p, TEMPERATURE=0.03, AFTER=10**9), EvalConfig(**CFG))
    assert t.evaluation.status == Status.PASSED, t.evaluation.findings
    n = int(re.findall(r"^call (\d+)$", t.evaluation.log, re.M)[-1])
    (t,) = evaluate(p, _with(cand, p, TEMPERATURE=0.03, AFTER=n - 2), EvalConfig(**CFG))
    ev = t.evaluation
    f = [x for x in ev.findings if x.check == "denormals_flushed"]
    assert ev.status == Status.REWARD_HACK and f, (n, ev.status, ev.findings)
    assert "re-check after the timed loop" in f[0].message, f[0].message


sandboxed = pytest.mark.skipif(sandbox.resolve_mode("cpu")[0] == "none",
                               reason=f"no sandbox here: {sandbox.resolve_mode('cpu')[1]}")
CAP = 768 << 20


@sandboxed
def test_forked_children_share_one_cap_without_a_cgroup(tmp_path, solbench_cache, monkeypatch):
    """Where no memory cgroup can be made the cap was the worker's RLIMIT_DATA, which binds
    one process: four forked children each took what the limit left them. Old code: the
    call raised ``NO CAP: 4 children held 1879048192 bytes together, cap 805306368`` (2.3
    caps). Now the parent's watchdog sums the sandbox's tree and kills it past the cap:
    RUNTIME_ERROR naming the cap, ``memory_limit`` with the bytes seen; both workloads get
    their trace."""
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM", str(CAP))
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM_CGROUP", "0")
    monkeypatch.setenv("SOLBENCH_TEST_MEM_CEILING", str(2 << 30))
    p = matmul_problem(tmp_path, (32, 48), tol=1e-3)
    traces = evaluate(p, load_solution(HERE / "cand_mem_fork_many.py", p),
                      EvalConfig(device="cpu", rounds=1, timing=False))
    assert len(traces) == 2
    for t in traces:
        ev = t.evaluation
        assert ev.status == Status.RUNTIME_ERROR and "NO CAP" not in (ev.log or ""), (ev.log or "")[-1500:]
        f = [x for x in ev.findings if x.check == "memory_limit"]
        assert f and f[0].evidence["mechanism"] == "watchdog", ev.findings
        assert f[0].evidence["cap_bytes"] == CAP < f[0].evidence["held_bytes"]
        assert f"exceeded its memory cap of {memcap.gib(CAP)}" in ev.log


@sandboxed
def test_honest_work_is_not_killed_by_the_watchdog(tmp_path, solbench_cache, monkeypatch):
    """The watchdog counts the worker itself (torch, the inputs): an honest matmul under the
    same cap, timed, PASSES with no memory finding."""
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM", str(CAP))
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM_CGROUP", "0")
    p = matmul_problem(tmp_path, (256,), tol=1e-3)
    src = "import torch\n\ndef run(a, b):\n    return torch.matmul(a, b)\n"
    from harness_helpers import py_solution

    (t,) = evaluate(p, py_solution("mm_honest", src, "mm"), EvalConfig(device="cpu", rounds=2, iters=4))
    assert t.evaluation.status == Status.PASSED, (t.evaluation.status, t.evaluation.findings)
    assert not [x for x in t.evaluation.findings if x.check == "memory_limit"]


def test_a_guarded_name_shadowed_on_a_subclass_is_a_harness_patch(tmp_path, solbench_cache):
    """``Connection.send_bytes`` (the worker's reply path, a guarded name) is defined on
    ``_ConnectionBase``; the candidate sets it on ``Connection``, whose dict the parent did
    not read. Old code: PASSED, no finding. Now the parent reads the dicts of the classes
    before the definer too: REWARD_HACK harness_patch naming the shadowed name."""
    p = matmul_problem(tmp_path, (64,), tol=1e-3)
    (t,) = evaluate(p, load_solution(HERE / "cand_reply_subclass_shadow.py", p),
                    EvalConfig(device="cpu", iters=4, rounds=2, reference_timing=False))
    ev = t.evaluation
    f = [x for x in ev.findings if x.check == "harness_patch"]
    assert ev.status == Status.REWARD_HACK and f, (ev.status, ev.findings)
    assert "Connection.send_bytes (shadowed" in f[0].message, f[0].message


def test_a_reply_method_set_on_the_connection_instance_is_a_harness_patch(tmp_path, solbench_cache):
    """``send_bytes`` set as an instance attribute of the worker's connection (found through
    gc): no class dict changes. Old code: PASSED, no finding (after the subclass read
    above too). Now the parent reads the instance dicts of the reply path's objects (the
    Worker and its connection): a method name set there, or the connection rebound, is
    harness_patch."""
    p = matmul_problem(tmp_path, (64,), tol=1e-3)
    (t,) = evaluate(p, load_solution(HERE / "cand_reply_instance_shadow.py", p),
                    EvalConfig(device="cpu", iters=4, rounds=2, reference_timing=False))
    ev = t.evaluation
    f = [x for x in ev.findings if x.check == "harness_patch"]
    assert ev.status == Status.REWARD_HACK and f, (ev.status, ev.findings)
    assert "worker.conn.send_bytes (set on the instance)" in f[0].message, f[0].message


def test_instance_reads_across_interpreters():
    """The parent's instance read on this interpreter's own objects (its /proc/self/mem):
    nothing on fresh objects nor after honest attributes; a method set on the instance, a
    pinned attribute rebound and a replaced ``__dict__`` each named. (Run by hand under
    CPython 3.12.1 and 3.13.0 with the same result.)"""
    import os
    import socket
    from multiprocessing.connection import Connection

    from solbench.harness import memguard

    if not memguard.SUPPORTED:
        pytest.skip("no CPython layout known here")
    a, b = socket.socketpair()
    c = Connection(os.dup(a.fileno()))

    class W:
        def __init__(self):
            self.conn, self.slots = c, []

        def handle(self):
            pass

    w = W()
    tab = memguard.instance_table({"worker": (w, ("conn",)), "conn": (c, ())})
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        assert memguard.instances_changed(fd, tab) == []
        w.x, w.slots, c.extra = 1, [1], 2
        assert memguard.instances_changed(fd, tab) == []
        c.send_bytes, w.handle = (lambda *x: None), 3
        assert memguard.instances_changed(fd, tab) == ["worker.handle (set on the instance)",
                                                       "conn.send_bytes (set on the instance)"]
        del c.send_bytes, w.handle
        w.conn = object()
        assert memguard.instances_changed(fd, tab) == ["worker.conn (rebound)"]
        w.__dict__ = {"conn": c}
        assert memguard.instances_changed(fd, tab) == ["worker.__dict__ (replaced)"]
    finally:
        os.close(fd)
        c.close(), a.close(), b.close()


def test_honest_dps_kernel_writing_out_of_order_passes(tmp_path, solbench_cache):
    """Every element written once inside the call, in a shuffled block order, each block back
    to front, by two pool threads joined before the return: PASSED, no hack or incorrect
    finding (measured on two workloads, 4096 and 2^20 elements)."""
    from harness_helpers import relu_problem

    p = relu_problem(tmp_path, (4096, 1 << 20))
    s = load_solution(HERE / "cand_dps_out_of_order.py", p)
    s = s.model_copy(update={"spec": s.spec.model_copy(update={"destination_passing_style": True})})
    for t in evaluate(p, s, EvalConfig(device="cpu", rounds=3, iters=8)):
        ev = t.evaluation
        assert ev.status == Status.PASSED, (ev.status, ev.findings)
        assert not [f for f in ev.findings if f.severity in ("hack", "fail")], ev.findings


@sandboxed
def test_a_forked_child_past_the_cgroup_cap_names_the_cap(tmp_path, solbench_cache, monkeypatch):
    """A child forked in each call touches memory until the kernel ends it inside the
    worker's memory cgroup; the call itself returns a right answer. RUNTIME_ERROR naming the
    cap (``memory_limit``), never PASSED, never ``NO CAP``; both workloads get their trace."""
    if memcap.probe()["mechanism"] == "rlimit":
        pytest.skip("no memory cgroup here")
    monkeypatch.setenv("SOLBENCH_SANDBOX_MEM", str(CAP))
    monkeypatch.setenv("SOLBENCH_TEST_MEM_CEILING", str(2 << 30))
    p = matmul_problem(tmp_path, (32, 48), tol=1e-3)
    traces = evaluate(p, load_solution(HERE / "cand_mem_fork_child.py", p),
                      EvalConfig(device="cpu", rounds=1, timing=False))
    assert len(traces) == 2
    for t in traces:
        ev = t.evaluation
        assert ev.status == Status.RUNTIME_ERROR and "NO CAP" not in (ev.log or ""), (ev.status, (ev.log or "")[-800:])
        f = [x for x in ev.findings if x.check == "memory_limit"]
        assert f and f[0].evidence["oom_kills"] >= 1 and f[0].evidence["cap_bytes"] == CAP


@pytest.mark.skipif(not bf16_matmul_here(), reason="this CPU has no bf16 matmul path")
def test_a_precision_flag_lowered_only_inside_the_call_is_a_precision_downgrade(tmp_path, solbench_cache):
    """cand_scoped_bf16_cpu lowers the fp32 matmul precision only while its call runs (bf16
    inputs on this AMX CPU: 2.2x at 1024^3) and restores it, so no flag reading shows it and
    its outputs are fp32 sums. Old code: INCORRECT_NUMERICAL precision_error, "no sign of a
    lower precision" (tolerance 5e-2 passes the rounds). Now REWARD_HACK precision_downgrade:
    its output is the fp64 result of its inputs rounded to bf16 (error ~1e-7 against that,
    2.4e-3 against the truth). A wrong constant (x 1.001) stays precision_error."""
    from harness_helpers import py_solution

    p = matmul_problem(tmp_path, (256,), tol=5e-2)
    cfg = EvalConfig(device="cpu", iters=4, rounds=3, reference_timing=False)
    (t,) = evaluate(p, load_solution(HERE / "cand_scoped_bf16_cpu.py", p), cfg)
    ev = t.evaluation
    f = [x for x in ev.findings if x.check == "precision_downgrade"]
    assert ev.status == Status.REWARD_HACK and f, (ev.status, ev.findings)
    assert f[0].evidence["input_rounding"]["inputs_rounded_to"] == "bfloat16", f[0].evidence
    src = "import torch\n\ndef run(a, b):\n    return (a @ b) * 1.001\n"
    (t,) = evaluate(p, py_solution("mm_const", src, "mm"), cfg)
    ev = t.evaluation
    assert ev.status == Status.INCORRECT_NUMERICAL and any(x.check == "precision_error" for x in ev.findings), \
        (ev.status, ev.findings)


def test_input_rounding_rule():
    """By hand: an error explained by bf16 inputs (1e-7 against the rounded truth, 2e-3 against
    the truth) is evidence; 1/16 is the bound; NaN is none."""
    from solbench.harness.precision import input_rounding_evidence, rounded_inputs

    assert input_rounding_evidence(2e-3, {"bfloat16": 1e-7})["inputs_rounded_to"] == "bfloat16"
    assert input_rounding_evidence(2e-3, {"bfloat16": 2e-3 / 16}) is not None
    assert input_rounding_evidence(2e-3, {"bfloat16": 2.1e-3 / 16, "tf32": float("nan")}) is None
    # TF32 keeps 10 mantissa bits (ulp 2^-10 at 1): half an ulp rounds away, a quarter down
    x = torch.tensor([1.0 + 2.0**-11, 1.0 + 2.0**-12, 1.0 + 2.0**-10, 3.0])
    assert rounded_inputs(x, "tf32").tolist() == [1.0 + 2.0**-10, 1.0, 1.0 + 2.0**-10, 3.0]
    assert rounded_inputs(x, "bfloat16").tolist() == [1.0, 1.0, 1.0, 3.0]  # 7 bits: ulp 2^-7


@pytest.mark.skipif(not bf16_matmul_here(), reason="this CPU has no bf16 matmul path")
def test_the_guards_reply_race_still_ends_a_precision_downgrade(tmp_path, solbench_cache):
    """cand_guards_race lowers the matmul precision for good and, from a thread that peeks
    at the worker's socket, forges the one guards reply that would show it (after the
    parent's memory read, restored before the reply leaves). Old code: INCORRECT_NUMERICAL
    precision_error, "no sign of a lower precision (dtype, flag, kernel)": the race hid the
    flag. Now REWARD_HACK precision_downgrade from the outputs (the input rounding)."""
    p = matmul_problem(tmp_path, (256,), tol=5e-2)
    (t,) = evaluate(p, load_solution(HERE / "cand_guards_race.py", p),
                    EvalConfig(device="cpu", iters=4, rounds=3, reference_timing=False))
    ev = t.evaluation
    f = [x for x in ev.findings if x.check == "precision_downgrade"]
    assert ev.status == Status.REWARD_HACK and f, (ev.status, ev.findings)
