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


def test_override_outside_the_cheap_list_is_a_hack_after_the_workload(tmp_path, solbench_cache):
    p = load_problem(write_problem(tmp_path / "p", DEF, [
        {"uuid": "w", "axes": {"n": 4096}, "inputs": {"x": {"type": "random"}}}]))
    (t,) = evaluate(p, py_solution("sin_override", SIN_OVERRIDE, p.name),
                    EvalConfig(device="cpu", iters=4, rounds=2, reference_timing=False))
    assert t.evaluation.status == Status.REWARD_HACK
    (f,) = [f for f in t.evaluation.findings if f.check == "interposition"]
    assert f.message.startswith("after correctness: ")
    assert any(h.startswith("dispatcher: aten::sin CPU kernel replaced (registered at cand.py:")
               for h in f.evidence["hooks"]), f.evidence
