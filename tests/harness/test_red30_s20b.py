"""Red team of issue 30, session 20b: the parent's memory read of the worker's reply path
(harness/memguard.py) blinded without changing any dict entry it read (a type pointer, an
MRO, a new key in a class dict on the path), and the honest twin: a candidate with
connections and ``send_bytes`` classes of its own. docs/threats.md, "Red team of issue 30
(session 20)", has the rows."""
from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate
from solbench.spec import Status

from harness_helpers import matmul_problem, py_solution, relu_problem

HERE = Path(__file__).parent


def _eval(tmp_path, cand: str, relu: bool = False):
    """The candidate on a 64 x 64 matmul (or, ``relu``, a 4096-element relu), CPU, 2 rounds,
    4 timed iterations, no reference timing; its evaluation."""
    p = relu_problem(tmp_path, (4096,)) if relu else matmul_problem(tmp_path, (64,), tol=1e-3)
    src = (HERE / cand).read_text()
    # destination-passing when its entry point takes the output too
    sol = py_solution(cand[:-3], src, p.name, dps="def run(a, b, c)" in src)
    (t,) = evaluate(p, sol,
                    EvalConfig(device="cpu", iters=4, rounds=2, reference_timing=False))
    return t.evaluation


@pytest.mark.parametrize("cand,named", [
    # the connection's type pointer set to a subclass with a send_bytes hook
    ("cand_reply_class_swap.py", "worker.conn.__class__"),
    # Connection.__bases__ reassigned: a hook class between Connection and its definer
    ("cand_reply_bases_swap.py", "Connection"),
    # __getattribute__ added to Connection's dict: a key nobody listed
    ("cand_reply_getattribute.py", "Connection"),
    # a data descriptor `conn` on the Worker class, winning over the pinned instance entry
    ("cand_worker_conn_descriptor.py", "Worker"),
    # __getattribute__ added to json.JSONEncoder: the encoder json.dumps makes per reply
    ("cand_reply_encoder_getattribute.py", "json.JSONEncoder: class JSONEncoder"),
])
def test_reply_path_rerouted_without_a_listed_entry_is_a_harness_patch(tmp_path, solbench_cache, cand, named):
    """Each hostile reroutes every reply through its own code while every dict entry the
    parent read before stays as it was. Before the fix: PASSED with no finding. Now the
    parent also reads, for the Worker and its connection, the object's type pointer and, for
    each class of that type's MRO, its metaclass pointer, its MRO tuple and every entry of
    its dict."""
    ev = _eval(tmp_path, cand)
    f = [x for x in ev.findings if x.check == "harness_patch"]
    assert ev.status == Status.REWARD_HACK and f, (ev.status, ev.findings)
    assert named in f[0].message, f[0].message


def test_own_connections_and_send_bytes_classes_pass(tmp_path, solbench_cache):
    ev = _eval(tmp_path, "cand_own_connections_honest.py")
    assert ev.status == Status.PASSED, (ev.status, ev.findings)
    assert not [x for x in ev.findings if x.check in ("harness_patch", "interposition")], ev.findings


def test_class_reads_on_this_interpreter():
    """The parent's class reads on this interpreter's own objects (its /proc/self/mem):
    nothing on fresh objects; ``__class__`` and ``__bases__`` reassigned and a key added to
    the instance's class each named, and nothing once each is undone (the MRO is compared by
    its classes, not by the tuple's address). (Run by hand under CPython 3.12.1 and 3.13.0
    with the same result.)"""
    import os
    import socket
    from multiprocessing.connection import Connection, _ConnectionBase

    from solbench.harness import memguard

    if not memguard.SUPPORTED:
        pytest.skip("no CPython layout known here")
    a, b = socket.socketpair()
    c = Connection(os.dup(a.fileno()))

    class W:
        def __init__(self):
            self.conn = c

        def handle(self):
            pass

    w = W()
    tab = memguard.instance_table({"worker": (w, ("conn",)), "worker.conn": (c, ())})
    fd = os.open("/proc/self/mem", os.O_RDONLY)

    class Sub(Connection):
        pass

    class Hook(_ConnectionBase):
        pass

    try:
        assert memguard.instances_changed(fd, tab) == []
        c.__class__ = Sub
        assert memguard.instances_changed(fd, tab) == ["worker.conn.__class__ (reassigned)"]
        c.__class__ = Connection
        Connection.__bases__ = (Hook,)
        try:
            assert memguard.instances_changed(fd, tab) == [
                "worker.conn: class Connection (__bases__ reassigned: its MRO changed)"]
        finally:
            Connection.__bases__ = (_ConnectionBase,)
        W.conn = property(lambda self: None)
        try:
            (msg,) = memguard.instances_changed(fd, tab)
            assert msg.startswith("worker: class ") and "(its dict changed: 1 key(s) added" in msg
        finally:
            del W.conn
        assert memguard.instances_changed(fd, tab) == []
    finally:
        os.close(fd)
        c.close(), a.close(), b.close()


def test_a_plain_tensor_carrying_the_python_key_is_a_hack(tmp_path, solbench_cache):
    """cand_plain_python_key.py: its output is made as a subclass with ``__torch_dispatch__``
    and moved to ``torch.Tensor`` by ``__class__`` assignment (the TensorImpl keeps the Python
    key), and ``torch.Tensor.__torch_dispatch__`` is replaced: the harness's copy-out and
    checks on that output run the candidate's hook. Neither dispatcher fingerprint (no
    registration), the thread's keys nor the mode stacks show it. Before: PASSED, no finding.
    Now the output is not plain (its keys are read) and the replaced hook is a harness_patch."""
    ev = _eval(tmp_path, "cand_plain_python_key.py", relu=True)
    assert ev.status == Status.REWARD_HACK, (ev.status, ev.findings)
    checks = {f.check for f in ev.findings}
    assert "non_plain_output" in checks or "harness_patch" in checks, ev.findings
    assert any("torch.Tensor.__torch_dispatch__" in f.message for f in ev.findings
               if f.check == "harness_patch"), ev.findings


def test_python_keyed():
    import torch

    from solbench.harness import guards

    class Sub(torch.Tensor):
        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            with torch._C._DisableTorchDispatch():
                return func(*args, **(kwargs or {}))

    x = torch.randn(4)
    o = torch.Tensor._make_subclass(Sub, x)
    o.__class__ = torch.Tensor
    assert type(o) is torch.Tensor and guards.python_keyed(o)
    # plain tensors, views with the conjugate / negative bits, a compiled function's output
    assert not any(guards.python_keyed(t) for t in (x, x.t(), torch._neg_view(x), torch.randn(2, dtype=torch.cfloat).conj(),
                                                    torch.compile(lambda v: v * 2, backend="eager")(x)))


def test_dispatcher_acts_are_reported():
    """Acts on the dispatcher tried in session 20b, each undone after: reported by the
    per-call check whether or not the computed table changes (a fallthrough, a kernel at
    ``Dense``, a CPU kernel under a site string with a newline that reprints the original's
    line, a CompositeImplicitAutograd kernel shadowed by an explicit one), or by the thread's
    keys and the mode count (a key excluded, an infra dispatch mode, CPU autocast on)."""
    import re
    import warnings

    import torch

    from solbench.harness.worker import Worker

    w = Worker(None, "cpu")

    def seen(undo):
        try:
            return Worker._interposition(w)
        finally:
            undo()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("copy_", torch.library.fallthrough_kernel, "AutogradCPU")
        assert seen(lib._destroy)[0].startswith("dispatcher: aten::copy_ AutogradCPU kernel replaced")
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("copy_", lambda *a: None, "Dense")
        assert any("aten::copy_ AutogradCPU kernel changed" in x for x in seen(lib._destroy))
        site, line = re.search(r"^CompositeExplicitAutograd\[alias\]: registered at (\S+):(\d+) ",
                               torch._C._dispatch_dump("aten::copy_"), re.M).groups()
        m = torch._C._dispatch_library("IMPL", "aten", "", f"{site}:{line} :: (Tensor _0, Tensor _1, bool _2)"
                                       " -> Tensor _0 [ boxed unboxed ]\nX", 1)
        orig = torch.library.get_kernel("aten::copy_", "CPU")
        m.impl("copy_", "CPU", lambda ks, d, s, nb=False: orig.call_boxed(ks, d, s, nb), True)
        assert seen(m.reset)[0].startswith("dispatcher: aten::copy_ CPU kernel replaced")
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("zeros_like", lambda *a, **k: None, "CompositeImplicitAutograd")
        assert seen(lib._destroy)[0].startswith("dispatcher: aten::zeros_like CompositeImplicitAutograd kernel added")
    k = torch._C.DispatchKey.ADInplaceOrView
    torch._C._dispatch_tls_set_dispatch_key_excluded(k, True)
    assert seen(lambda: torch._C._dispatch_tls_set_dispatch_key_excluded(k, False)) == [
        "dispatch_keys_excluded: added ['ADInplaceOrView'], removed []"]
    from torch._subclasses.fake_tensor import FakeTensorMode

    torch._C._set_dispatch_mode(FakeTensorMode())
    assert "torch_dispatch_modes: 0 -> 1" in seen(
        lambda: torch._C._unset_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE))
    torch.set_autocast_enabled("cpu", True)
    assert seen(lambda: torch.set_autocast_enabled("cpu", False)) == [
        "dispatch_keys_excluded: added [], removed ['AutocastCPU']"]
    assert Worker._interposition(w, full=True) == []


def test_worker_buffers_moved_to_a_subclass_are_interposition(tmp_path, solbench_cache):
    """cand_slot_class_swap.py: the worker's slot tensors (found through gc) get
    ``__class__ = _Hooked``, a subclass whose Python ``copy_`` the copy-out's ``dst.copy_``
    then runs, after the clock. Before: PASSED, no finding (no registration, key or mode; the
    worker checked the slots' container types only). Now interposition, the copy-out
    skipped."""
    ev = _eval(tmp_path, "cand_slot_class_swap.py", relu=True)
    assert ev.status == Status.REWARD_HACK, (ev.status, ev.findings)
    (f,) = [x for x in ev.findings if x.check == "interposition"]
    assert f.message.startswith("correctness round 0: ")
    assert any("moved to a tensor subclass (__class__ reassigned)" in h for h in f.evidence["hooks"]), f.evidence


def test_the_dispatcher_guard_rebound_is_a_harness_patch(tmp_path, solbench_cache):
    """cand_dispatch_guard_rebound.py: the Worker's ``dispatch`` attribute (found through
    gc) rebound to an object whose ``changes()`` reports nothing, then an ``aten::copy_`` CPU
    kernel registered that spins in the harness's copy-out. Before: PASSED, no finding (only
    ``conn`` was pinned). Now the parent reads the Worker's guard objects as pinned
    attributes: harness_patch naming ``worker.dispatch``."""
    ev = _eval(tmp_path, "cand_dispatch_guard_rebound.py", relu=True)
    assert ev.status == Status.REWARD_HACK, (ev.status, ev.findings)
    f = [x for x in ev.findings if x.check == "harness_patch"]
    assert f and "worker.dispatch (rebound)" in f[0].message, ev.findings
