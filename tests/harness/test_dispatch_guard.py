"""The worker's dispatcher-table guard (guards.DispatchGuard): a kernel of the candidate's for
an aten operator (torch.library ``Library("aten", "IMPL")``, or TORCH_LIBRARY_IMPL in a C++
extension) runs inside the worker's own steps after the clock (copy-out, poisoning, end
marker) without changing any Python object. The worker records the dispatcher's computed
table before the candidate is imported and reports a changed kernel as ``interposition``.

The Worker-level tests build a Worker in this process (no connection is needed for the
checks) and undo every registration they make (``Library._destroy``)."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from solbench.harness import EvalConfig, correctness, evaluate, guards
from solbench.harness.worker import Worker
from solbench.spec import Status, load_problem

from harness_helpers import py_solution, write_problem


@pytest.fixture
def worker():
    return Worker(None, "cpu")


def _line_of(marker: str) -> int:
    """1-based line of this file that holds ``marker``."""
    lines = Path(__file__).read_text().splitlines()
    return 1 + next(i for i, s in enumerate(lines) if s.rstrip().endswith(marker))


def test_clean_worker_reports_nothing(worker):
    assert Worker._interposition(worker) == []
    assert Worker._interposition(worker, full=True) == []
    assert len(worker.dispatch.cheap_ops) == len(guards.POST_CLOCK_OPS)  # all exist in torch
    assert len(worker.dispatch._base) > 3000  # aten + prims + profiler operators


def test_aten_override_is_reported_with_its_op_key_and_place(worker):
    lib = torch.library.Library("aten", "IMPL")  # LIB-LINE
    try:
        lib.impl("copy_", lambda dst, src, non_blocking=False: dst, "CPU")
        lib.impl("fill_.Scalar", lambda self, value: self, "CUDA")
        where = f"registered at test_dispatch_guard.py:{_line_of('# LIB-LINE')}"
        want = [f"dispatcher: aten::copy_ CPU kernel replaced ({where})",
                # a CPU-only build has no CUDA fill_ kernel: "added"; a CUDA build: "replaced"
                f"dispatcher: aten::fill_.Scalar CUDA kernel "
                f"{'replaced' if torch.cuda.is_available() else 'added'} ({where})"]
        assert sorted(Worker._interposition(worker)) == sorted(want)
        assert sorted(Worker._interposition(worker, full=True)) == sorted(want)
    finally:
        lib._destroy()
    assert Worker._interposition(worker) == []
    assert Worker._interposition(worker, full=True) == []


def test_override_of_an_op_outside_the_cheap_list_is_seen_by_the_full_check(worker):
    lib = torch.library.Library("aten", "IMPL")
    try:
        lib.impl("sin", lambda x: x, "AutogradCPU")
        assert Worker._interposition(worker) == []  # not an operator the worker runs itself
        (msg,) = Worker._interposition(worker, full=True)
        assert msg.startswith("dispatcher: aten::sin AutogradCPU kernel replaced (registered at ")
    finally:
        lib._destroy()
    assert Worker._interposition(worker, full=True) == []


def test_python_dispatcher_left_on_is_reported(worker):
    key = torch._C.DispatchKey.PythonDispatcher
    torch._C._dispatch_tls_set_dispatch_key_included(key, True)
    try:
        assert Worker._interposition(worker) == [
            "dispatch_keys_included: added ['PythonDispatcher'], removed []"]
    finally:
        torch._C._dispatch_tls_set_dispatch_key_included(key, False)
    assert Worker._interposition(worker) == []


def test_honest_registrations_do_not_trip_the_guard(worker):
    """What honest candidates do after the baseline: torch.compile (dynamo imports the
    functional collectives, which register Autograd and Meta kernels in their own
    namespaces), torch.func (batching rules for aten operators, FuncTorchBatched), custom
    operators in the candidate's own namespace."""
    f = torch.compile(lambda x: torch.nn.functional.gelu(x) * 2 + x.sum(), backend="aot_eager")
    x = torch.randn(8, 8)
    torch.testing.assert_close(f(x), torch.nn.functional.gelu(x) * 2 + x.sum())
    torch.func.vmap(lambda v: v.sin().sum())(torch.randn(4, 3))
    torch.func.grad(lambda v: v.sin().sum())(torch.randn(3))

    @torch.library.custom_op("solbench_guard_test::twice", mutates_args=())
    def twice(t: torch.Tensor) -> torch.Tensor:
        return t * 2

    twice.register_fake(lambda t: torch.empty_like(t))
    assert torch.equal(twice(x), x * 2)
    assert Worker._interposition(worker) == []
    assert Worker._interposition(worker, full=True) == []


def test_post_clock_ops_cover_what_the_worker_dispatches(worker):
    """Every operator the worker's own steps after a call dispatch (profiled on the CPU,
    nested calls included) is in POST_CLOCK_OPS, so the per-call check covers them."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(64, 32)
    outs = [torch.empty(64, 32), torch.empty(32, 64)]
    worker.slots = [{"inputs": [x], "outputs": outs}]
    worker.flush_buf = torch.empty(1024, dtype=torch.int32)
    ret = (torch.randn(64, 32), torch.randn(64, 32).t())  # one contiguous, one transposed
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with torch.no_grad():
            worker._flush(1)
            meta = worker._copy_out(worker.slots[0], ret, [x])
            for o in ret:
                c = o.clone()
                correctness.bits_equal(o, c)
            worker.handle("noop", {"slot": 0})
    assert torch.equal(outs[1], ret[1]) and not torch.equal(outs[0], ret[0])  # ret[0] poisoned
    seen = {e.name for e in prof.events() if "::" in e.name and not e.name.startswith("solbench::")}
    covered = {n.split(".")[0] for n in guards.POST_CLOCK_OPS}
    assert seen and seen <= covered, sorted(seen - covered)


#: a C++ extension overriding aten::copy_ for the CPU key (TORCH_LIBRARY_IMPL), loaded after
#: the worker's baseline; run in a child interpreter (a C++ registration cannot be undone)
CPP_OVERRIDE = r'''
import json, sys
import torch
from torch.utils.cpp_extension import load_inline
from solbench.harness.worker import Worker

w = Worker(None, "cpu")
src = """
#include <torch/library.h>
#include <ATen/ATen.h>
at::Tensor& my_copy(at::Tensor& self, const at::Tensor& src, bool non_blocking) { return self; }
TORCH_LIBRARY_IMPL(aten, CPU, m) { m.impl("copy_", &my_copy); }
"""
load_inline("solbench_guard_cpp_override", cpp_sources=src, is_python_module=False)
print(json.dumps([Worker._interposition(w), Worker._interposition(w, full=True)]))
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler")
def test_cpp_extension_override_is_reported(tmp_path):
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(tmp_path / "ext"))
    r = subprocess.run([sys.executable, "-c", CPP_OVERRIDE], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    cheap, full = json.loads(r.stdout.strip().splitlines()[-1])
    # load_inline writes main.cpp with its own #include first: the TORCH_LIBRARY_IMPL line is 6
    want = "dispatcher: aten::copy_ CPU kernel replaced (registered at main.cpp:6)"
    assert cheap == [want] and full == [want]


DEF = {
    "name": "relu_f32",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x):\n    return torch.relu(x)\n",
}

#: an override of an operator the worker never runs itself, installed at import: the per-call
#: check does not look at it, the check after the workload does
SIN_OVERRIDE = """import torch

_orig = torch.library.get_kernel("aten::sin", "CPU")
_lib = torch.library.Library("aten", "IMPL")
_lib.impl("sin", lambda ks, x: _orig.call_boxed(ks, x), "CPU", with_keyset=True)


def run(x):
    return torch.relu(x)
"""


@pytest.mark.parametrize("timing", [True, False])
def test_override_outside_the_cheap_list_is_a_hack_after_the_workload(tmp_path, solbench_cache, timing):
    """The whole dispatcher is read at a workload's last check: after the timed blocks, or
    after the correctness rounds when nothing is timed (the check after correctness reads
    only the operators the worker runs itself when a full one follows)."""
    p = load_problem(write_problem(tmp_path / "p", DEF, [
        {"uuid": "w", "axes": {"n": 4096}, "inputs": {"x": {"type": "random"}}}]))
    (t,) = evaluate(p, py_solution("sin_override", SIN_OVERRIDE, p.name),
                    EvalConfig(device="cpu", iters=4, rounds=2, reference_timing=False, timing=timing))
    assert t.evaluation.status == Status.REWARD_HACK
    (f,) = [f for f in t.evaluation.findings if f.check == "interposition"]
    assert f.message.startswith("after timing: " if timing else "after correctness: ")
    assert any(h.startswith("dispatcher: aten::sin CPU kernel replaced (registered at cand.py:")
               for h in f.evidence["hooks"]), f.evidence


def test_the_guards_request_reads_the_whole_dispatcher_only_when_asked(worker):
    """``Guards(full=False)`` (the check after correctness when a full one follows) reads the
    operators around a call and the backend fallbacks; ``Guards()`` every covered operator."""
    from solbench.harness import protocol

    lib = torch.library.Library("aten", "IMPL")
    try:
        orig = torch.library.get_kernel("aten::sin", "CPU")
        lib.impl("sin", lambda ks, x: orig.call_boxed(ks, x), "CPU", with_keyset=True)
        _, cheap = worker.handle("guards", protocol.Guards(full=False).model_dump())
        _, full = worker.handle("guards", protocol.Guards().model_dump())
        lib2 = torch.library.Library("aten", "IMPL")
        try:  # an operator the worker runs itself is read by both
            orig_copy = torch.library.get_kernel("aten::copy_", "CPU")
            lib2.impl("copy_", lambda ks, *a: orig_copy.call_boxed(ks, *a), "CPU", with_keyset=True)
            _, cheap_copy = worker.handle("guards", protocol.Guards(full=False).model_dump())
        finally:
            lib2._destroy()
    finally:
        lib._destroy()
    assert cheap["interposition"] == []
    assert [h for h in full["interposition"] if "aten::sin" in h], full
    assert [h for h in cheap_copy["interposition"] if "aten::copy_ CPU kernel replaced" in h], cheap_copy


def test_override_under_a_forged_site_is_reported(worker):
    """A kernel registered at the alias key the original was registered at, under the
    original's own file and line (``torch._C._dispatch_library`` takes them as arguments):
    the computed table prints exactly what it printed before (what the guard compared until
    2026-12-06, which therefore saw nothing), the registrations show two kernels there."""
    import re

    dump = torch._C._dispatch_dump("aten::copy_")
    site, line = re.search(r"^CompositeExplicitAutograd\[alias\]: registered at (\S+):(\d+) ", dump,
                           re.M).groups()
    table = torch._C._dispatch_dump_table("aten::copy_")
    orig = torch.library.get_kernel("aten::copy_", "CPU")
    m = torch._C._dispatch_library("IMPL", "aten", "", site, int(line))
    try:
        m.impl("copy_", "CompositeExplicitAutograd",
               lambda ks, dst, src, non_blocking=False: orig.call_boxed(ks, dst, src, non_blocking), True)
        assert torch._C._dispatch_dump_table("aten::copy_") == table  # the old reading: unchanged
        want = [f"dispatcher: aten::copy_ CompositeExplicitAutograd kernel replaced (registered at "
                f"{os.path.basename(site)}:{line}; 2 kernels registered there, was 1)"]
        assert Worker._interposition(worker) == want
        assert Worker._interposition(worker, full=True) == want
    finally:
        m.reset()
    assert Worker._interposition(worker, full=True) == []


def test_backend_fallback_is_reported_after_every_call(worker):
    """A backend fallback (``Library("_", "IMPL").fallback``) runs for every operator without a
    kernel of its own at that key; no registrations dump shows it, the sentinel operator's
    computed table (one dump, part of the per-call check) does."""
    lib = torch.library.Library("_", "IMPL")  # FALLBACK-LINE
    try:
        lib.fallback(lambda *a, **k: None, "CPU")
        want = [f"dispatcher: backend fallback for CPU added (registered at "
                f"test_dispatch_guard.py:{_line_of('# FALLBACK-LINE')})"]
        assert Worker._interposition(worker) == want
        assert Worker._interposition(worker, full=True) == want
    finally:
        lib._destroy()
    assert Worker._interposition(worker, full=True) == []


#: operators of each kind of registration: a direct CPU kernel and the Autograd alias (sin), a
#: CompositeExplicitAutograd kernel (copy_, zeros_like), CompositeImplicitAutograd only
#: (linear, matmul: the AutogradOther / AutogradCPU choice depends on the backend keys),
#: BackendSelect (empty), a prims operator, ones without any CPU kernel (fallbacks reach them)
SAMPLE_OPS = ("aten::copy_", "aten::sin", "aten::linear", "aten::matmul", "aten::empty.memory_format",
              "aten::fill_.Scalar", "aten::add.Tensor", "aten::view", "aten::zeros_like",
              "aten::_to_copy", "aten::clone", "prims::add", "aten::_nested_get_values",
              "aten::hardsigmoid.out", "aten::mkldnn_max_pool2d")


def _computed(ops) -> dict[str, str]:
    """The kernels that run at DISPATCH_KEYS, as the computed tables print them (the reading
    the guard compared until 2026-12-06): the independent method this test checks against."""
    return {n: guards._exec_lines(torch._C._dispatch_dump_table(n)) for n in ops}


def _registration_sweep() -> dict:
    """For each sampled operator and every dispatch key torch accepts a kernel at (runtime,
    per-backend functionality and alias keys), and for a backend fallback at every key:
    register a kernel, compare the computed table at DISPATCH_KEYS with the one before, ask the
    guard, destroy the registration. Returns how many registrations changed a running kernel,
    those the guard missed, and whether everything read as before at the end.

    Runs in a child process (test below): ``Library._destroy`` does not undo everything torch
    keeps per process. A Python kernel registered at ``Meta`` for ``aten::add.Tensor`` and
    destroyed leaves fake-tensor ``add`` returning None for the rest of the process (torch
    2.13), which broke later fake-mode tests that ran in the same pytest process."""
    import warnings

    g = guards.DispatchGuard(cheap=SAMPLE_OPS)
    assert g.cheap_ops == list(SAMPLE_OPS)
    keys = [k for k in torch._C.DispatchKey.__members__ if not k.startswith(("StartOf", "EndOf"))]
    keys += ["MkldnnCPU", "Tracer", "Batched", "VmapMode"]
    base = _computed(SAMPLE_OPS)
    changed, missed = 0, []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
        for what in [("impl", op, k) for op in SAMPLE_OPS for k in keys] + [("fallback", None, k) for k in keys]:
            kind, op, key = what
            lib = torch.library.Library("_" if op is None else op.split("::")[0], "IMPL")
            try:
                if op is None:
                    lib.fallback(lambda *a, **k: None, key)
                else:
                    lib.impl(op.split("::")[1], lambda *a, **k: None, key)
            except Exception:  # noqa: BLE001 - a key torch refuses here (or one with a fallback)
                lib._destroy()
                continue
            try:
                now = _computed(SAMPLE_OPS)
                seen = g.changes()
            finally:
                lib._destroy()
            if now != base:
                changed += 1
                if not seen:
                    missed.append([*what, [n for n in SAMPLE_OPS if now[n] != base[n]]])
    restored = g.changes(full=True) == [] and _computed(SAMPLE_OPS) == base
    return {"changed": changed, "missed": missed, "restored": restored}


_SWEEP_IN_A_CHILD = """import json, sys
sys.path[:0] = [sys.argv[1]]
import test_dispatch_guard as t
print(json.dumps(t._registration_sweep()))
"""


def test_every_registration_that_changes_a_running_kernel_is_reported():
    """Every registration :func:`_registration_sweep` makes that changes the computed table is
    reported by the guard. (The first version of the registration filter missed a kernel at
    the ``Dense`` functionality key, which changes aten::linear's AutogradCPU kernel.)"""
    here = str(Path(__file__).parent)
    r = subprocess.run([sys.executable, "-c", _SWEEP_IN_A_CHILD, here], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["missed"] == [] and got["restored"], got
    # measured (torch 2.13, CPU): 522 of the registrations change a kernel that runs
    assert got["changed"] > 100, got["changed"]


def test_a_meta_kernel_destroyed_leaves_fake_add_broken_in_torch():
    """Why the sweep runs in a child: when a Meta kernel for ``aten::add.Tensor`` is registered
    and destroyed before the process first uses fake tensors, fake-tensor ``add`` goes on calling
    it (torch 2.13). Two children, one without the registration as the control; if a torch
    release fixes this, the test says so and the sweep could come back in process."""
    code = """import logging, sys, warnings, torch
from torch._subclasses.fake_tensor import FakeTensorMode
warnings.simplefilter("ignore"); logging.disable(logging.CRITICAL)
if sys.argv[1] == "register":
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("add.Tensor", lambda *a, **k: None, "Meta")
    lib._destroy()
try:
    with FakeTensorMode():
        print(list((torch.randn(4, 8) + 1e-6).shape))
except Exception as e:
    print(type(e).__name__)
"""
    got = {}
    for arm in ("control", "register"):
        r = subprocess.run([sys.executable, "-c", code, arm], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        got[arm] = r.stdout.strip().splitlines()[-1]
    assert got["control"] == "[4, 8]", got
    if got["register"] == "[4, 8]":
        pytest.xfail(f"torch {torch.__version__} restores fake add after the Meta kernel is destroyed")
    assert got["register"] == "AttributeError", got


#: registers a kernel of its own for aten::sin (no operator the worker runs itself, so only the
#: check after a workload looks at it) in its fifth call: with 2 correctness rounds and 4
#: timed iterations that is the first warm-up call of the timing (calls 1-4 are the
#: correctness rounds), after the check that follows the correctness rounds
LATE_SIN_OVERRIDE = """import torch

_n = [0]
_lib = []


def run(x):
    _n[0] += 1
    if _n[0] == 5:
        orig = torch.library.get_kernel("aten::sin", "CPU")
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("sin", lambda ks, t: orig.call_boxed(ks, t), "CPU", with_keyset=True)
        _lib.append(lib)
    return torch.relu(x)
"""

#: a backend fallback for the CPU key, registered at import
CPU_FALLBACK = """import torch

_lib = torch.library.Library("_", "IMPL")
_lib.fallback(lambda *a, **k: None, "CPU")


def run(x):
    return torch.relu(x)
"""


def _relu_eval(tmp_path, name, source):
    p = load_problem(write_problem(tmp_path / "p", DEF, [
        {"uuid": "w", "axes": {"n": 4096}, "inputs": {"x": {"type": "random"}}}]))
    (t,) = evaluate(p, py_solution(name, source, p.name),
                    EvalConfig(device="cpu", iters=4, rounds=2, reference_timing=False))
    return t.evaluation


def test_override_registered_during_timing_is_a_hack_after_timing(tmp_path, solbench_cache):
    ev = _relu_eval(tmp_path, "late_sin", LATE_SIN_OVERRIDE)
    assert ev.status == Status.REWARD_HACK
    (f,) = [f for f in ev.findings if f.check == "interposition"]
    assert f.message.startswith("after timing: ")
    assert any(h.startswith("dispatcher: aten::sin CPU kernel replaced (registered at cand.py:")
               for h in f.evidence["hooks"]), f.evidence


def test_backend_fallback_is_a_hack_at_the_first_call(tmp_path, solbench_cache):
    ev = _relu_eval(tmp_path, "cpu_fallback", CPU_FALLBACK)
    assert ev.status == Status.REWARD_HACK
    (f,) = [f for f in ev.findings if f.check == "interposition"]
    assert f.message.startswith("correctness round 0: ")
    assert f.evidence["hooks"] == ["dispatcher: backend fallback for CPU added (registered at cand.py:3)"]


GELU_DEF = {
    "name": "gelu_tanh_f32",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
    "reference": ("import torch\n\ndef run(x):\n"
                  "    return torch.nn.functional.gelu(x, approximate='tanh')\n"),
}


def test_forged_site_override_is_a_hack(tmp_path, solbench_cache):
    """The corpus's hostile/dispatch_forged_site.py, which computes its GELU inside the
    harness's copy-out through an aten::copy_ kernel registered under the original kernel's
    own file and line: right outputs, and a computed table identical to the one before."""
    src = (Path(__file__).parents[1] / "adversarial" / "hostile" / "dispatch_forged_site.py").read_text()
    p = load_problem(write_problem(tmp_path / "g", GELU_DEF, [
        {"uuid": "w", "axes": {"n": 4096}, "inputs": {"x": {"type": "random"}}}]))
    (t,) = evaluate(p, py_solution("forged", src, p.name),
                    EvalConfig(device="cpu", iters=4, rounds=2, reference_timing=False))
    ev = t.evaluation
    assert ev.status == Status.REWARD_HACK
    (f,) = [f for f in ev.findings if f.check == "interposition"]
    assert f.message.startswith("correctness round 0: ")
    (h,) = f.evidence["hooks"]
    assert h.startswith("dispatcher: aten::copy_ CompositeExplicitAutograd kernel replaced (registered at ")
    assert h.endswith("; 2 kernels registered there, was 1)")


def test_py_impl_under_a_python_dispatcher_left_on_is_a_hack(tmp_path, solbench_cache):
    """cand_py_impl_copy.py: ``OpOverload.py_impl`` of aten::copy_ and the Python dispatcher
    entered and never left, so the harness's copy-out runs the candidate's Python kernel.
    Neither dispatcher fingerprint can see a py_impl; the thread's dispatch keys do."""
    src = (Path(__file__).parent / "cand_py_impl_copy.py").read_text()
    p = load_problem(write_problem(tmp_path / "g", GELU_DEF, [
        {"uuid": "w", "axes": {"n": 4096}, "inputs": {"x": {"type": "random"}}}]))
    (t,) = evaluate(p, py_solution("py_impl", src, p.name),
                    EvalConfig(device="cpu", iters=4, rounds=2, reference_timing=False))
    ev = t.evaluation
    assert ev.status == Status.REWARD_HACK
    (f,) = [f for f in ev.findings if f.check == "interposition"]
    assert f.message.startswith("correctness round 0: ")
    assert f.evidence["hooks"] == ["dispatch_keys_included: added ['PythonDispatcher'], removed []"]


def test_removing_the_sentinel_operator_is_reported(worker):
    """The sentinel's definition lives in a Library object a candidate can find (gc) and
    destroy; the fallback check then has nothing to read, which is itself the finding."""
    (lib,) = guards._sentinel_lib
    lib._destroy()
    try:
        want = [f"dispatcher: the guard's sentinel operator {guards.SENTINEL_OP} was removed"]
        assert Worker._interposition(worker) == want
    finally:
        guards._sentinel_lib.clear()
        assert guards._sentinel_lines() is not None  # defined again, for the later tests
    assert Worker._interposition(worker, full=True) == []


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_only_the_reference_timed_calls_skip_the_per_call_check(tmp_path, solbench_cache, monkeypatch):
    """On CUDA the parent asks its trusted reference's worker to skip the per-call
    interposition check (TimeIter.check=False: its result is read for the candidate only) and
    never the candidate's worker. (On the CPU both sides keep it: test_red25's
    test_every_cpu_timed_call_is_checked_on_both_sides.)"""
    from solbench.harness import protocol

    sent = []
    real = protocol.request

    def recording(h, req, **k):
        if isinstance(req, protocol.TimeIter):
            sent.append((h, req.check))
        return real(h, req, **k)

    monkeypatch.setattr(protocol, "request", recording)
    p = load_problem(write_problem(tmp_path / "p", DEF, [
        {"uuid": "w", "axes": {"n": 4096}, "inputs": {"x": {"type": "random"}}}]))
    (t,) = evaluate(p, py_solution("relu", "import torch\n\ndef run(x):\n    return torch.relu(x)\n", p.name),
                    EvalConfig(device="cuda", iters=4, rounds=2, reference_timing=True))
    assert t.evaluation.status == Status.PASSED, t.evaluation.log
    cand = {id(h) for h, c in sent if c}
    ref = {id(h) for h, c in sent if not c}
    assert cand and ref and not cand & ref  # two workers, each always asked the same way
    assert sum(c for _, c in sent) >= 4 and sum(not c for _, c in sent) >= 4


def test_worker_skips_the_check_only_when_told(worker):
    lib = torch.library.Library("aten", "IMPL")
    try:
        lib.impl("copy_", lambda dst, src, non_blocking=False: dst, "CPU")
        worker.fn, worker.dps = (lambda x: x + 1), False
        slot = {"inputs": [torch.ones(8)], "outputs": [torch.zeros(8)]}
        worker.slots = [slot]
        checked = Worker._timed_iter(worker, slot, {}, 0, flush=False)
        assert any("aten::copy_ CPU kernel replaced" in h for h in checked["interposition"])
        unchecked = Worker._timed_iter(worker, slot, {}, 1, flush=False, check=False)
        assert "interposition" not in unchecked
    finally:
        lib._destroy()
