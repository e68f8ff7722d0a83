"""The worker answers each request through its op's model of harness/protocol.py: one
registry both sides read, one handler per model, a bad request an error reply naming the op
and the field, and the parse path covered by the worker's snapshot."""

from __future__ import annotations

import os
import subprocess
import sys
import typing

import pytest
from pydantic import BaseModel

from solbench.harness import protocol as P
from solbench.harness.worker import _HANDLERS, Worker


@pytest.fixture(scope="module")
def worker():
    return Worker(None, "cpu")


#: set in the child process :func:`_in_own_process` starts
_CHILD_ENV = "WORKER_DISPATCH_TEST_CHILD"


def _in_own_process(request) -> bool:
    """Run the calling test in a fresh interpreter and assert it passed there; True in the
    parent (the caller returns), False in that child (the caller goes on). For a test that
    sets ``__new__`` on pydantic's BaseModel as a candidate would: CPython cannot undo it (the
    attribute deleted again, the class and every subclass keep a ``tp_new`` slot that refuses
    arguments), so every later pydantic model of the test session would fail to build."""
    if os.environ.get(_CHILD_ENV):
        return False
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", request.node.nodeid],
                       cwd=request.config.rootpath, env={**os.environ, _CHILD_ENV: "1"},
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-6000:] + r.stderr[-2000:]
    return True


def test_one_registry_one_handler_per_model():
    # every request model is registered under its own op; every op but exit (answered by the
    # loop, which it ends) has exactly one handler, whose request argument is its model
    models = [m for m in vars(P).values()
              if isinstance(m, type) and issubclass(m, P.Request) and m is not P.Request]
    assert sorted(P.REQUESTS) == sorted(m.model_fields["op"].default for m in models)
    assert all(P.REQUESTS[m.model_fields["op"].default] is m for m in models)
    assert sorted(op for op, *_ in _HANDLERS) == sorted(set(P.REQUESTS) - {"exit"})
    for op, model, _validate, handler in _HANDLERS:
        assert handler.__name__ == f"_on_{op}"
        hints = typing.get_type_hints(handler, vars(P))
        assert hints["req"] is model is P.REQUESTS[op]


def test_parent_sends_only_registered_models():
    class Rogue(P.Ping):  # a model of a registered op that is not the registered model
        pass

    class Handle:  # never reached: the check comes before any send
        def request(self, *a, **k):
            raise AssertionError("sent")

    with pytest.raises(TypeError, match="not the registered request model"):
        P.request(Handle(), Rogue(), timeout_s=1)


@pytest.mark.parametrize("req", [
    P.Ping(), P.Call(slot=2, scalars={"1": 0.5}), P.Noop(slot=None, dps=False, flush=False),
    P.TimeBegin(cupti=False, markers="streams"), P.TimeIter(slot=1, scalars={}, i=7, flush=False, parent_copy=True),
    P.Build(solution="{}", init_args=[1, "a"], init_seed=3, build_timeout_s=5.0),
    P.Load(slots=[{"inputs": [], "outputs": []}], flush=None, flush_bytes=64),
])
def test_what_the_parent_sends_the_worker_parses_back(req):
    # the worker's validator of the op, fed the payload the parent pickles, gives back the
    # request the parent built
    validate = next(v for op, _m, v, _h in _HANDLERS if op == req.op)
    assert validate(req.payload()) == req


@pytest.mark.parametrize("op, payload, words", [
    ("frob", {}, ["'frob'", "no such op"]),
    ("call", {"slot": "0"}, ["'call'", "slot", "valid integer", "'0'"]),
    ("time_iter", {"slot": 0}, ["'time_iter'", "i: Field required"]),
    ("time_iter", {"slot": 0, "i": 1, "clock": 0.0}, ["'time_iter'", "clock: Extra inputs are not permitted"]),
    ("noop", {"dps": "yes"}, ["'noop'", "dps", "valid boolean"]),
    ("time_begin", {"markers": "threads"}, ["'time_begin'", "markers", "'ranges' or 'streams'"]),
])
def test_a_bad_request_names_its_op_and_field(worker, op, payload, words):
    with pytest.raises(P.RequestInvalid) as e:
        worker.handle(op, payload)
    assert all(w in str(e.value) for w in words), str(e.value)
    assert e.value.op == op


def test_a_bad_request_is_an_error_reply_and_the_worker_goes_on():
    from solbench.harness.process import WorkerHandle

    h = WorkerHandle("cpu")
    try:
        status, rep = h.request("call", {"slot": "0"}, timeout_s=60)
        assert status == "error" and rep["type"] == "RequestInvalid"
        assert "'call'" in rep["message"] and "slot" in rep["message"], rep
        err = P.parse_reply("call", status, rep)  # a well-formed error reply
        assert isinstance(err, P.ErrorReply)
        status, rep = h.request("frob", {}, timeout_s=60)
        assert status == "error" and "'frob'" in rep["message"] and "no such op" in rep["message"]
        assert isinstance(P.request(h, P.Ping(), timeout_s=60), P.PingReply)
    finally:
        h.close()


@pytest.mark.parametrize("owner, attr", [(BaseModel, "__new__"), (P.Noop, "__getattribute__")])
def test_a_hook_on_the_parse_path_is_seen_by_the_snapshot(request, worker, owner, attr):
    # pydantic-core calls the model's __new__ to make each parsed request, and every field a
    # handler reads goes through __getattribute__: code set there runs before the clock
    # (tests/adversarial/hostile/request_parse_hook.py)
    if attr == "__new__" and _in_own_process(request):
        return
    assert worker.guards.verify_snapshot(worker.snapshot, worker._harness_fns) == []
    ran = []

    def new(cls, *a, **k):
        ran.append(cls.__name__)
        return object.__new__(cls)

    def getattribute(self, name):
        ran.append(name)
        return object.__getattribute__(self, name)

    setattr(owner, attr, new if attr == "__new__" else getattribute)
    try:
        worker.handle("noop", {"slot": None, "flush": False})
        changed = worker.guards.verify_snapshot(worker.snapshot, worker._harness_fns)
    finally:
        delattr(owner, attr)
    assert ran, "the hook did not run on the request path"
    if attr == "__new__":  # set on the base: every model's
        assert {f"protocol.{m.__name__}.__new__" for _o, m, _v, _h in _HANDLERS} == set(changed), changed
    else:
        assert changed == ["protocol.Noop.__getattribute__"], changed
    assert worker.guards.verify_snapshot(worker.snapshot, worker._harness_fns) == []


class _HiddenDescriptor:
    """A data descriptor that runs its owner's code when the worker reads through it and
    answers a read on the class (what ``getattr(model, name)`` does) with ``on_class``: the
    original object, or AttributeError as for a pydantic field."""

    def __init__(self, ran, on_class, on_instance):
        self.ran, self.on_class, self.on_instance = ran, on_class, on_instance

    def __get__(self, obj, cls=None):
        if obj is None and self.on_class is AttributeError:
            raise AttributeError
        self.ran.append(cls)
        return self.on_class if obj is None else self.on_instance(obj)

    def __set__(self, obj, value):
        raise AttributeError("read-only")


@pytest.mark.parametrize("owner, attr", [(BaseModel, "__new__"), (BaseModel, "__getattribute__"),
                                         (P.Noop, "flush"), (P.Request, "flush"), (BaseModel, "dps"),
                                         (BaseModel, "__pydantic_fields_set__"), (P.Noop, "__pydantic_extra__"),
                                         (BaseModel, "__pydantic_private__")])
def test_a_descriptor_on_the_parse_path_that_hides_from_getattr_is_seen(request, worker, owner, attr):
    # a descriptor set on a model or a base class runs on the request path (pydantic-core's
    # tp_new slot looks __new__ up through __get__; a data descriptor named like a field wins
    # over the request's __dict__ when the handler reads it), while getattr(model, attr) gets
    # the original back (or AttributeError, as for a field): the snapshot reads the class
    # dicts along the MRO instead (tests/adversarial/hostile/new_descriptor_hook.py,
    # field_property_hook.py)
    if attr == "__new__" and _in_own_process(request):
        return
    assert worker.guards.verify_snapshot(worker.snapshot, worker._harness_fns) == []
    ran = []
    if attr == "__new__":
        d = _HiddenDescriptor(ran, object.__new__, None)
    elif attr == "__getattribute__":
        d = _HiddenDescriptor(ran, object.__getattribute__,
                              lambda obj: object.__getattribute__.__get__(obj, type(obj)))
    elif attr.startswith("__pydantic"):  # the slot's own member descriptor does the work
        real = BaseModel.__dict__[attr]
        d = type("Slot", (), {"__get__": lambda s, o, c=None: real.__get__(o, c),
                              "__set__": lambda s, o, v: (ran.append(attr), real.__set__(o, v))})()
    else:
        d = _HiddenDescriptor(ran, AttributeError, lambda obj: obj.__dict__[attr])
    old, seen = owner.__dict__.get(attr), getattr(P.Noop, attr, None)
    setattr(owner, attr, d)
    try:
        assert getattr(P.Noop, attr, None) is seen  # what getattr sees: the original
        worker.handle("noop", {"slot": None, "flush": False})
        changed = worker.guards.verify_snapshot(worker.snapshot, worker._harness_fns)
    finally:
        if old is None:
            delattr(owner, attr)
        else:
            setattr(owner, attr, old)
    assert ran, "the hook did not run on the request path"
    assert "protocol.Noop." + attr in changed, changed
    assert worker.guards.verify_snapshot(worker.snapshot, worker._harness_fns) == []


def test_a_hook_on_the_request_unpickler_is_seen(worker):
    # Connection.recv unpickles each request with multiprocessing.connection's global
    # _ForkingPickler, before the worker parses it and before the clock
    # (tests/adversarial/hostile/recv_pickler_hook.py)
    import multiprocessing.connection as mc

    real = mc._ForkingPickler

    class Hooked(real):
        pass

    for owner, attr, value in ((mc, "_ForkingPickler", Hooked), (real, "loads", classmethod(lambda c, b: None))):
        old = owner.__dict__[attr]
        setattr(owner, attr, value)
        try:
            changed = worker.guards.verify_snapshot(worker.snapshot, worker._harness_fns)
        finally:
            setattr(owner, attr, old)
        assert len(changed) == 1 and attr in changed[0], changed
    assert worker.guards.verify_snapshot(worker.snapshot, worker._harness_fns) == []


def _loaded_worker():
    import torch

    w = Worker(None, "cpu")
    w.handle("load", {"slots": [{"inputs": [torch.arange(4.0)], "outputs": [torch.zeros(4)]}],
                      "flush": None, "flush_bytes": 0})
    w.fn, w.dps = (lambda x: x * 2), False
    return w


def test_the_slots_as_loaded_are_called_and_copied_out():
    w = _loaded_worker()
    status, rep = w.handle("call", {"slot": 0})
    assert status == "ok" and not rep.get("interposition"), rep
    assert w.slots[0]["outputs"][0].tolist() == [0.0, 2.0, 4.0, 6.0]


def test_a_container_of_the_candidates_in_the_slots_runs_no_code_and_is_seen():
    # the handlers read the slot before the clock (and the copy-out after it): a list or dict
    # subclass swapped into the worker's slots would run the candidate's code there, with the
    # fresh inputs just written (tests/adversarial/hostile/slots_list_hook.py). It is read
    # through list's and dict's own methods, and its presence is reported
    w = _loaded_worker()
    ran = []

    class L(list):
        def __getitem__(self, i):
            ran.append("list")
            return list.__getitem__(self, i)

        def __iter__(self):
            ran.append("iter")
            return list.__iter__(self)

    class D(dict):
        def __getitem__(self, k):
            ran.append(k)
            return dict.__getitem__(self, k)

    w.slots = L([D(inputs=L(w.slots[0]["inputs"]), outputs=L(w.slots[0]["outputs"]))])
    status, rep = w.handle("call", {"slot": 0})
    assert status == "ok" and rep["interposition"] == [
        "the worker's slots hold a container of the candidate's (a list or dict subclass)"], rep
    w.handle("noop", {"slot": 0, "dps": False, "flush": False})
    w.handle("time_iter", {"slot": 0, "i": 0, "flush": False})
    assert ran == []


@pytest.mark.parametrize("how", ["__getattribute__", "descriptor"])
def test_a_hook_on_the_worker_class_is_seen_after_the_call(how):
    # every `self.x` a handler reads goes through the Worker class: a __getattribute__ or a data
    # descriptor named like an instance attribute (slots, fn, conn) set on it runs the
    # candidate's code before and after the clock (a base class put under it: CPython refuses,
    # "__bases__ assignment: deallocator differs")
    w = _loaded_worker()
    assert Worker._interposition(w) == []
    if how == "__getattribute__":
        Worker.__getattribute__ = lambda self, n: object.__getattribute__(self, n)
    else:
        Worker.slots = property(lambda self: self.__dict__["slots"],
                                lambda self, v: self.__dict__.__setitem__("slots", v))
    try:
        got = Worker._interposition(w)
    finally:
        delattr(Worker, "__getattribute__" if how == "__getattribute__" else "slots")
    assert any("Worker class" in g for g in got), got
    assert Worker._interposition(w) == []


def test_an_exception_with_a_huge_class_name_is_still_a_well_formed_error_reply():
    # the candidate names its exception class; the error reply's type field is bounded
    # (protocol.ErrorReply), so the worker cuts it as it cuts the message: the parent then
    # records the candidate's error, not a malformed reply
    import json

    import torch

    sent = []

    class Conn:
        msgs = [(1, "call", {"slot": 0})]

        def recv(self):
            if not self.msgs:
                raise EOFError
            return self.msgs.pop(0)

        def send_bytes(self, b):
            sent.append(json.loads(b))

    w = Worker(Conn(), "cpu")
    w.handle("load", {"slots": [{"inputs": [torch.arange(4.0)], "outputs": [torch.zeros(4)]}],
                      "flush": None, "flush_bytes": 0})
    Huge = type("E" * 5000, (RuntimeError,), {})

    def fn(x):
        raise Huge("boom")

    w.fn, w.dps = fn, False
    w.loop()
    (seq, status, rep), = sent
    err = P.parse_reply("call", status, rep)
    assert isinstance(err, P.ErrorReply) and err.message == "boom" and err.type.startswith("EEEE")


@pytest.mark.parametrize("owner, name", [("guards", "_lookup"), ("guards", "_targets"), ("guards", "_MRO"),
                                         ("guards", "_TYPE_DICT"), ("worker", "_WORKER_KEYS"),
                                         ("worker", "_WORKER_MRO"), ("worker", "_TYPE_DICT"), ("worker", "_MRO")])
def test_what_the_guards_read_is_guarded(worker, owner, name):
    # the snapshot's own lookups and the Worker class check read these module globals: a
    # candidate that rebinds one (say, adds "__getattribute__" to _WORKER_KEYS) would blind
    # them; the snapshot lists each, and the parent's read of the worker's memory (here: of
    # this process's) sees it rebound
    import os
    import sys

    from solbench.harness import memguard

    mod = worker.guards if owner == "guards" else sys.modules[Worker.__module__]
    assert f"{owner}.{name}" in worker.snapshot
    entry = [e for e in worker.mem_table if e["name"] == f"{owner}.{name}"]
    assert len(entry) == 1
    if not memguard.SUPPORTED:
        pytest.skip("the parent's memory read does not know this interpreter's layout")
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    old = mod.__dict__[name]
    try:
        assert memguard.changed(fd, entry) == []
        setattr(mod, name, object())
        got = memguard.changed(fd, entry)
    finally:
        setattr(mod, name, old)
        os.close(fd)
    assert got == [f"{owner}.{name}"]


@pytest.mark.parametrize("name", ["enumerate", "list", "dict", "len", "__import__", "str"])
def test_a_builtin_the_worker_calls_is_guarded(worker, name):
    # the worker looks its builtins up at every call: enumerate in _args reads the fresh inputs
    # before the clock, list/dict read the slot (_slot), `import gc` runs __import__ after every
    # call (_interposition_state); a candidate that rebinds one runs its code there
    # (tests/adversarial/hostile/builtins_enumerate_hook.py)
    import builtins

    w = _loaded_worker()
    ran = []
    old = builtins.__dict__[name]

    def hook(*a, **k):
        ran.append(name)
        return old(*a, **k)

    if name in ("list", "dict"):  # read as list.__getitem__(...): a subclass whose item read is hooked
        hook = type(name, (old,), {"__getitem__": lambda self, *a: (ran.append(name), old.__getitem__(self, *a))[1]})
    setattr(builtins, name, hook)
    try:
        w.handle("call", {"slot": 0})
        changed = worker.guards.verify_snapshot(worker.snapshot, worker._harness_fns)
    finally:
        setattr(builtins, name, old)
    assert ran, "the hook did not run on the worker's path"
    assert changed == [f"builtins.{name}"], changed
    assert f"builtins.{name}" in {e["name"] for e in worker.mem_table}  # the parent reads it too


def test_rebinding_the_registry_a_validator_or_a_handler_changes_nothing_the_worker_runs(worker):
    # the worker's table holds each model's pydantic-core validator and handler as bound at
    # import: a candidate that rebinds protocol.REQUESTS, a model's model_validate or
    # __pydantic_validator__, or a Worker handler runs none of its code on the request path
    # (and the handler is a guarded name)
    ran = []

    class Rogue(P.Noop):
        def model_post_init(self, ctx):
            ran.append("post_init")

    class FakeValidator:
        def validate_python(self, *a, **k):
            ran.append("validator")

    saved = (P.REQUESTS["noop"], P.Noop.__dict__["__pydantic_validator__"], Worker.__dict__["_on_noop"])
    P.REQUESTS["noop"] = Rogue
    P.Noop.model_validate = classmethod(lambda cls, *a, **k: ran.append("model_validate"))
    P.Noop.__pydantic_validator__ = FakeValidator()
    Worker._on_noop = lambda self, req: ran.append("handler")
    try:
        status, rep = worker.handle("noop", {"slot": None, "flush": False})
        changed = worker.guards.verify_snapshot(worker.snapshot, worker._harness_fns)
    finally:
        P.REQUESTS["noop"], P.Noop.__pydantic_validator__, Worker._on_noop = saved
        del P.Noop.model_validate
    assert status == "ok" and "host_ms" in rep and ran == []
    assert changed == ["worker.Worker._on_noop"], changed


@pytest.mark.parametrize("attr", ["__enter__", "__exit__", "__init__"])
def test_a_hook_on_the_context_managers_around_the_clock_is_seen(worker, attr):
    # the worker enters torch.no_grad() (and on CUDA record_function, a stream context, two
    # Events) right before its clock starts and leaves it right after it stops: code set as
    # one of their protocol methods runs there
    import torch

    w = _loaded_worker()
    ran = []
    old = torch.no_grad.__dict__[attr]

    def hook(*a, **k):
        ran.append(attr)
        return old(*a, **k)

    setattr(torch.no_grad, attr, hook)
    try:
        w.handle("call", {"slot": 0})
        changed = worker.guards.verify_snapshot(worker.snapshot, worker._harness_fns)
    finally:
        setattr(torch.no_grad, attr, old)
    assert ran, "the hook did not run on the worker's path"
    assert changed == [f"torch.no_grad.{attr}"], changed


def test_the_test_process_still_builds_pydantic_models():
    # last in the module: the hooks above left pydantic's BaseModel as they found it (the
    # full suite's later modules build models: a tp_new left refusing arguments broke 120 of them)
    class Late(BaseModel):
        x: int

    assert Late(x=3).x == 3 and P.Noop(slot=None, dps=False, flush=False).flush is False
