"""The worker: the only process where candidate code runs.

Started as a fresh interpreter by :mod:`solbench.harness.process`. It receives its input
and output buffers as memfds over a socket pair (CPU, :mod:`solbench.harness.shm`) or CUDA
IPC handles inside the requests, calls the candidate, and reports what it did. It never
sees reference outputs, tolerances or seeds; its stdout/stderr go to a capped log file,
never to the result channel. Its replies are data to the parent, which also checks from
/proc that the worker's channel fds are still the sockets it handed over
(:meth:`solbench.harness.process.WorkerHandle.check_channels`).

Messages are ``(seq, op, payload)``; replies are ``(seq, status, payload)`` with status
"ok" | "error" | "compile_error". One request is answered by exactly one reply. Each payload
is parsed through its op's request model (:data:`solbench.harness.protocol.REQUESTS`, the
parent's own list) and answered by that model's handler (``Worker._on_<op>``, the table
:data:`_HANDLERS`); an unknown op or a payload that does not match its model is an error
reply naming the op and the field.

What the candidate's process runs of solbench is listed in docs/architecture.md ("Inside the
harness: worker side, wire, parent side"); an import-linter contract (pyproject.toml,
``worker-side``) keeps this module and what it imports off the harness's parent side.
"""

from __future__ import annotations

import time

#: CLOCK_MONOTONIC (system-wide, the parent's clock too: the sandbox makes no time namespace)
#: when this module began to import: the parent's spawn to here is the interpreter's start
_T_MODULE = time.monotonic()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from typing import Any  # noqa: E402

from pydantic import ValidationError  # noqa: E402

from .. import paths  # noqa: E402
from . import correctness  # noqa: E402
from .flagread import backend_flags as _backend_flags  # noqa: E402
from .guards import foreign_tensors as _foreign_tensors  # noqa: E402
from .guards import lazy_bits as _lazy_bits  # noqa: E402
from .guards import python_keyed as _python_keyed  # noqa: E402
from .protocol import (  # noqa: E402
                       REQUESTS, Build, Call, GuardTable, Guards, Load, Noop, Ping, RequestInvalid, TimeBegin,
                       TimeEnd, TimeIter, WarmProfiler, request_invalid)
from .shm import max_span, strided_span  # noqa: E402

#: when the worker module's own imports were done (monotonic s)
_T_IMPORTS = time.monotonic()

#: a class's MRO and type dict, read through type's own descriptors (as harness/guards.py)
_MRO, _TYPE_DICT = type.__dict__["__mro__"], type.__dict__["__dict__"]

_perf = time.perf_counter  # captured before any candidate code exists
#: the C function, captured now: the request spin (:meth:`Worker.loop`) goes through no
#: Python-level method a candidate could replace (Connection.poll, selectors, ...)
from select import select as _select  # noqa: E402

#: a type's name and module read through type's own descriptors: a metaclass of the
#: candidate's cannot run its code when a foreign state's type is named (Worker._foreign_state)
_QUALNAME, _MODULE = type.__dict__["__qualname__"], type.__dict__["__module__"]

#: the Worker's attributes that are set once, in ``__init__``, and hold what its checks run
#: through: the parent reads that each still holds its object (memguard.instance_table; a
#: candidate that rebinds ``dispatch`` to an object whose ``changes()`` says nothing blinds the
#: dispatcher guard: tests/harness/cand_dispatch_guard_rebound.py)
_PINNED = ("conn", "dispatch", "guards", "snapshot", "_interp0", "_conn0", "torch", "_sync",
           "_record_function", "_l2", "_l2_sig", "flags0", "_streams0", "_harness_fns", "_Event",
           "_stream_ctx", "_acts",
           # plain values the harness's own steps branch on: an object of the candidate's in
           # their place (a truthy ``is_cuda`` whose __bool__ runs its code) would run it there
           "is_cuda", "_conn_fd", "device", "stream0", "_preroll_s", "_state_types")
#: the Worker's own state that its steps read after a call and that changes during a run (so
#: it cannot be pinned), with the exact types each may hold; ``end_buf`` and ``prof`` are
#: added per worker, with torch's classes as bound at its start (``Worker._state_types``,
#: pinned). Checked after every call (:meth:`Worker._foreign_state`)
#: (a tuple, guarded by name with the harness functions: nothing in it can be changed in place)
_PLAIN_STATE: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("dps", (bool,)), ("markers", (str,)), ("timed_n", (int,)), ("flush_bytes", (int,)),
    ("call_host_ms", (float,)), ("_markers_note", (str, type(None))), ("_acts_note", (str, type(None))),
    ("timed_host", (list,)), ("timed_event", (list,)), ("_mapped", (dict,)), ("_noop_src", (list,)),
    ("_mstreams", (type(None), list)),
)
#: the CUPTI recorder's attributes that hold what its sessions run through (bound at its
#: creation, before any candidate code)
_ACTS_PINNED = ("_enable", "_disable", "_flush_all", "_stream_id", "_register", "_raw", "_demangle",
                "_kinds", "_k_kernel", "_k_memset", "_cb")
#: its demangler's: the libstdc++ and libc functions it calls
_DEMANGLER_PINNED = ("_f", "_free")


def _cache_bytes() -> int:
    """2x the last-level CPU cache (from sysfs), capped at 256 MiB; 64 MiB if unknown."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for idx in os.listdir(base):
            with open(f"{base}/{idx}/size") as f:
                s = f.read().strip()
            mult = 1024 * 1024 if s.endswith("M") else 1024 if s.endswith("K") else 1
            best = max(best, int(s.rstrip("KMG")) * mult)
    except (OSError, ValueError):
        best = 32 * 1024 * 1024
    return min(2 * best, 256 * 1024 * 1024)


#: CUDA: seconds the worker polls its channel without sleeping after each reply, before it
#: blocks (:meth:`Worker.loop`)
REQUEST_SPIN_S = 0.002


class Worker:
    def __init__(self, conn, device: str):
        #: CLOCK_MONOTONIC stamps of the start-up's steps, sent in the hello (the parent turns
        #: them into the ``worker_start.*`` phases)
        self.start_stamps: dict[str, float] = {"module": _T_MODULE, "imports": _T_IMPORTS}
        self.start_stamps["sandbox"] = time.monotonic()
        import torch

        from . import guards

        self.start_stamps["torch"] = time.monotonic()

        self.torch = torch
        self.conn = conn
        #: the request channel's fd, read before any candidate code exists (the spin in loop)
        self._conn_fd = conn.fileno() if hasattr(conn, "fileno") else -1
        self.device = device
        self.is_cuda = torch.device(device).type == "cuda"
        self.fn = None
        self.dps = True
        self.slots: list[dict[str, Any]] = []
        self.flush_buf = None
        self.end_buf = None
        self.flush_bytes = 0
        self._flush_sig = None
        self._streams0 = [(st, type(st).flush) for st in (sys.stdout, sys.stderr) if st is not None]
        self.prof = None
        self.timed_host: list[float] = []
        self.timed_event: list[float] = []
        self.timed_n = 0
        self.guards = guards
        if self.is_cuda:
            torch.cuda.set_device(torch.device(device).index or 0)
            torch.cuda.init()
            self.start_stamps["cuda"] = time.monotonic()
        # read through torch's C getters bound at import (harness/flagread.py), by a module
        # global the snapshot and the parent's memory read guard, never through self.guards
        # (an instance attribute a candidate can rebind) or a table of Python readers
        self.flags0 = _backend_flags()
        mod = sys.modules[type(self).__module__]
        self._harness_fns = {f"worker.Worker.{n}": (Worker, n) for n, v in list(Worker.__dict__.items())
                             if callable(v)}
        self._harness_fns.update({f"worker.{n}": (mod, n) for n in ("_perf", "_select", "_cache_bytes", "_backend_flags",
                                                                          "_python_keyed", "_foreign_tensors", "_lazy_bits")})
        self._harness_fns["correctness.bits_equal"] = (correctness, "bits_equal")
        self._harness_fns.update(_request_guards(mod))
        from . import cupti_activity, l2, pages, shm, timing

        self._harness_fns.update(_builtins_used(mod, guards, correctness, shm, pages, l2, timing, cupti_activity))
        self._harness_fns.update({"json.dumps": (json, "dumps"),
                                  "json.JSONEncoder.encode": (json.JSONEncoder, "encode"),
                                  "json.JSONEncoder.iterencode": (json.JSONEncoder, "iterencode"),
                                  "guards.verify_snapshot": (guards, "verify_snapshot"),
                                  "guards.backend_flags": (guards, "backend_flags"),
                                  "guards.gc_interposition": (guards, "gc_interposition"),
                                  "guards.DispatchGuard.changes": (guards.DispatchGuard, "changes"),
                                  # what DispatchGuard.changes reads: rebinding one blinds it
                                  **{f"guards.{n}": (guards, n) for n in (
                                      "_dump_table", "_dump", "_exec_lines", "_registrations", "_read_sentinel",
                                      "_same", "_REG_LINE", "_KEY_LINE", "REGISTRATION_KEYS", "BACKEND_KEYS",
                                      "_ANY_BACKEND", "SENTINEL_OP",
                                      "python_keyed", "_tensor_keys", "_PYTHON_KEYS",
                                      "foreign_tensors", "_TENSOR")},
                                  # what the snapshot's own lookups and the Worker class check
                                  # read: rebinding one would blind them
                                  **{f"guards.{n}": (guards, n) for n in ("_lookup", "_targets", "_MRO", "_TYPE_DICT")},
                                  **{f"worker.{n}": (mod, n) for n in ("_MRO", "_TYPE_DICT", "_WORKER_KEYS",
                                                                       "_WORKER_MRO", "_PLAIN_STATE",
                                                                       "_QUALNAME", "_MODULE")}})
        self._harness_fns.update(_timeline_guards())
        self._conn0 = conn
        try:  # torch's default-device mode, as bound now (see _function_modes)
            import torch.utils._device as _dev

            self._dc0 = (_dev.DeviceContext, _dev.DeviceContext.__dict__["__torch_function__"], _dev,
                         _dev.__dict__["_device_constructors"])
        except (ImportError, AttributeError, KeyError):
            self._dc0 = None
        self._interp0 = self._interposition_state()
        self._Event = torch.cuda.Event
        self.stream0 = torch.cuda.current_stream().cuda_stream if self.is_cuda else None
        from .l2 import PersistingL2Reset

        # bound now, before any candidate code exists (harness/l2.py: why in this process)
        self._l2 = PersistingL2Reset.for_device(self.is_cuda)
        self._l2_sig = self._l2_signature()
        self._harness_fns["l2.PersistingL2Reset.__call__"] = (PersistingL2Reset, "__call__")
        self.snapshot = guards.take_snapshot(self._harness_fns)
        # where each guarded name lives, for the parent's own read of this process's memory
        # (harness/memguard.py): taken now, before any candidate code exists
        from multiprocessing.connection import Connection

        from . import memguard

        reply_path = {"json.JSONEncoder.default": (json.JSONEncoder, "default"),
                      "json.JSONEncoder.__init__": (json.JSONEncoder, "__init__"),
                      "json.JSONEncoder (the json module's)": (json, "JSONEncoder"),
                      "json.encoder.c_make_encoder": (json.encoder, "c_make_encoder"),
                      "json.encoder._make_iterencode": (json.encoder, "_make_iterencode"),
                      "json.encoder.encode_basestring_ascii": (json.encoder, "encode_basestring_ascii"),
                      "json.encoder.encode_basestring": (json.encoder, "encode_basestring"),
                      "worker.json": (mod, "json"), "worker.Worker": (mod, "Worker"),
                      **{f"Connection.{n}": (Connection, n) for n in ("send_bytes", "_send_bytes", "_send",
                                                                       "recv", "_recv_bytes", "_recv")}}
        self.mem_table = memguard.table({**guards._targets(), **self._harness_fns, **reply_path})
        self.call_host_ms = 5.0  # host time of the last verification call (sizes the gate)
        #: what the last call returned (CPU), dropped at the next request (see handle)
        self._prev_ret = None
        self._sync = torch.cuda.synchronize
        self._record_function = torch.profiler.record_function
        self._stream_ctx = torch.cuda.stream if self.is_cuda else None
        #: timed sessions' marker method (timing.MARKER_METHODS) and, for "streams", the
        #: worker's own marker and copy-out streams: (torch streams, CUPTI stream ids)
        self.markers = "ranges"
        self._markers_note: str | None = None
        #: CUDA: seconds the worker spins on its CPU right before each timed call (no kernel of
        #: the call has started, so the span does not hold it): a core that slept through the
        #: parent's work between calls wakes into a deep C-state and a low clock, and the
        #: host's gaps between a launch-bound call's kernels are wider than in a loop
        #: (bench/launch_gap_ab.py measures it). Read once, before any candidate code exists
        try:
            self._preroll_s = paths.worker_preroll_s()
        except ValueError:
            self._preroll_s = 0.0
        self._mstreams = None
        #: CUDA: the CUPTI activity recorder of the "streams" sessions (harness/cupti_activity.py:
        #: the same device records as a CUDA-only torch.profiler session, without Kineto's
        #: seconds-long first session); None without cupti-python, and torch.profiler times
        self._acts = None
        self._acts_note: str | None = None
        if self.is_cuda:
            try:
                from .cupti_activity import open_session

                self._acts = open_session()
            except Exception as e:  # noqa: BLE001 - any failure means: torch.profiler, as before
                self._acts_note = f"cupti-python unavailable ({type(e).__name__}: {str(e)[:200]})"
        # the exact types of the state _foreign_state reads, torch's classes as bound now
        self._state_types = _PLAIN_STATE + (
            ("end_buf", (type(None), torch.Tensor)),
            ("prof", (type(None), torch.profiler.profile)
             + ((type(self._acts),) if self._acts is not None else ())))
        # last: the dispatcher's kernel table once the harness's own imports and CUDA start-up
        # are done, before any candidate code exists
        self.dispatch = guards.DispatchGuard()
        # the objects the reply path goes through, a method set on one of them (its instance
        # dict), or one of the Worker's own guard objects rebound (its connection, dispatcher
        # guard, snapshot, ...), reroutes every reply or blinds a check unseen by the class
        # reads; and the class of the encoder json.dumps makes for every reply (a key added to
        # it, ``__getattribute__``, reroutes its ``encode``). Taken last, once they all exist
        self.mem_instances = memguard.instance_table({"worker": (self, _PINNED),
                                                      "worker.conn": (self.conn, ()),
                                                      "json.JSONEncoder": (json.JSONEncoder, ()),
                                                      **({"worker._acts": (self._acts, _ACTS_PINNED),
                                                          "worker._acts._demangle": (self._acts._demangle,
                                                                                     _DEMANGLER_PINNED)}
                                                         if self._acts is not None else {})})

    # ------------------------------------------------------------------ protocol
    def loop(self) -> None:
        # read once, here, before the first request (so before any candidate code exists):
        # the spin below reads no attribute a candidate could rebind to an object of its own
        # (an fd whose comparison runs its code would run it between any two requests;
        # red team 30), and takes only an exact int and float
        spin_fd = self._conn_fd if self.is_cuda is True else -1
        spin_s = float(REQUEST_SPIN_S)
        while True:
            if type(spin_fd) is int and spin_fd >= 0 and type(spin_s) is float:
                # the parent's next request of a timed block comes within about a millisecond
                # (its checks and the next input set): a thread that blocks at once lets its
                # core fall idle, and waking it costs more than the wait (bench/wakeup_latency.py).
                # Only harness code runs here, and a paused worker (SIGSTOP) does not spin
                t_spin = _perf()
                while _perf() - t_spin < spin_s and not _select((spin_fd,), (), (), 0)[0]:
                    pass
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                return
            seq, op, payload = msg
            # the one op answered here, not by a handler: it ends the loop (and the process)
            if op == "exit":
                self._reply(seq, "ok", {})
                return
            try:
                status, out = self.handle(op, payload)
            except BaseException as e:  # noqa: BLE001 - candidate errors become replies
                if isinstance(e, SystemExit):
                    status, out = "error", {"type": "SystemExit", "message": f"sys.exit({e.code})",
                                            "traceback": traceback.format_exc()[-4000:]}
                elif isinstance(e, KeyboardInterrupt):
                    raise
                else:
                    # the class name is the candidate's too: cut to the reply's bound
                    status, out = "error", {"type": type(e).__name__[:200], "message": str(e)[:2000],
                                            "traceback": traceback.format_exc()[-4000:]}
            # the log streams the worker started with, flushed through their type's own method:
            # never through sys.stdout (a candidate may have replaced it, or the instance's
            # flush, with code that runs here, after the clock, and only for some requests)
            for stream, flush in self._streams0:
                try:
                    flush(stream)
                except Exception:  # noqa: BLE001
                    pass
            self._reply(seq, status, out)

    def _reply(self, seq: int, status: str, out: dict) -> None:
        """Replies are JSON (the parent never unpickles anything from a worker)."""
        self.conn.send_bytes(json.dumps([seq, status, out], default=str).encode("utf-8"))

    def handle(self, op: str, payload: dict) -> tuple[str, dict]:
        """Answer one request: ``payload`` parsed through the model of ``op``
        (:data:`~solbench.harness.protocol.REQUESTS`), then that model's handler. Returns
        (status, reply payload); raises :class:`~solbench.harness.protocol.RequestInvalid`
        (an error reply naming the op and field) for an unknown op or a payload that does not
        match its model, and whatever the handler raises."""
        # the last call's returned objects are dropped here, at the next request, not as the
        # call's own frame returns (CPU): a finalizer of the candidate's on them (writing the
        # output buffer after the copy-out of a placeholder) runs after the parent has read
        # that call's outputs; on the held timing path that request is the next timed call,
        # so its time falls in that call's window (both sides alike: the reference drops its
        # returned outputs there too)
        # (tests/adversarial/hostile/late_finalizer_write.py)
        self._prev_ret = None
        # the table and each model's validator were bound at import, before any candidate
        # code existed: a candidate that rebinds protocol.REQUESTS, a model's
        # __pydantic_validator__ or model_validate, or a Worker handler changes nothing here
        # (and the snapshot reports the handler; _request_guards: the models' own slots)
        for name, _model, validate, handler in _HANDLERS:
            if name == op:
                break
        else:
            raise RequestInvalid(op, "no such op")
        try:
            req = validate(payload)
        except ValidationError as e:
            raise request_invalid(op, e) from None
        return handler(self, req)

    def _on_ping(self, req: Ping) -> tuple[str, dict]:
        return "ok", {"pid": os.getpid()}

    def _on_guard_table(self, req: GuardTable) -> tuple[str, dict]:
        # asked before the build: nothing of the candidate's has run yet
        return "ok", {"entries": self.mem_table, "flags0": self.flags0, "instances": self.mem_instances}

    def _on_warm_profiler(self, req: WarmProfiler) -> tuple[str, dict]:
        # a process's first recording session pays a start-up: Kineto's about 4 s (H100/H200,
        # bench/cupti_first.py), cupti-python's recorder a few ms; paid here, before any
        # candidate code and while the candidate's worker starts, not inside a timed block.
        # A recorder CUPTI refuses leaves the blocks to torch.profiler (warmed instead)
        t0 = _perf()
        if self.is_cuda and self._acts is not None and self._acts_note is None:
            # the "streams" sessions' recorder: its first session, with one kernel
            try:
                self._acts.start()
                try:
                    self.torch.ones(1, device=self.device).add_(1)
                    self.torch.cuda.synchronize()
                finally:
                    self._acts.stop()
            except Exception as e:  # noqa: BLE001 - CUPTI refused (another tool, an old driver)
                self._acts_note = f"cupti-python failed ({type(e).__name__}: {str(e)[:200]})"
        if self.is_cuda and (self._acts is None or self._acts_note is not None):
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
                # one kernel: CUPTI's activity path (buffers, kernel records) is set up
                # here too, as a timed block would need it, not only the session
                self.torch.ones(1, device=self.device).add_(1)
                self.torch.cuda.synchronize()
        return "ok", {"ms": (_perf() - t0) * 1e3}

    def _on_build(self, req: Build) -> tuple[str, dict]:
        from ..spec.solution import Solution
        from .build import BuildError, load_entry

        sol = Solution.model_validate_json(req.solution)
        self.dps = sol.spec.destination_passing_style
        try:
            self.fn, info = load_entry(sol, self.device, tuple(req.init_args),
                                       req.init_seed, req.build_timeout_s)
        except BuildError as e:
            return "compile_error", {"message": str(e)[-8000:]}
        self.snapshot_after_build = self.guards.verify_snapshot(self.snapshot, self._harness_fns)
        return "ok", info

    def _on_load(self, req: Load) -> tuple[str, dict]:
        from .pages import populate
        from .shm import open_desc

        # a buffer loaded before keeps its mapping (and its populated pages): a re-load
        # between timed blocks must not fault every page again (see harness/pages.py)
        kept = getattr(self, "_mapped", {})
        self._mapped = {}

        def mat(x, write=True):
            if not (isinstance(x, dict) and "path" in x):
                return x
            key = json.dumps(x, sort_keys=True)
            t = kept.get(key)
            if t is None:
                t = open_desc(x)
                populate(t, write=write)  # trusted code, before any call touches it
            self._mapped[key] = t
            return t

        self.slots = [{"inputs": [mat(x, write=False) for x in s["inputs"]],
                       "outputs": [mat(x) for x in s["outputs"]]} for s in req.slots]
        want = req.flush_bytes
        if req.flush is not None:
            # the parent's own buffer: it reads back what each flush wrote
            self.flush_buf = mat(req.flush)
            self.flush_bytes = want
        elif want and want != self.flush_bytes:
            dev = self.device if self.is_cuda else "cpu"
            self.flush_buf = self.torch.empty(want // 4, dtype=self.torch.int32, device=dev)
            self.flush_bytes = want
        self._flush_sig = self._flush_signature()
        return "ok", {}

    def _slot(self, i: int) -> dict[str, list]:
        """Slot ``i`` as load built it, copied into a new dict of new lists through list's and
        dict's own methods: a list or dict subclass of the candidate's swapped into
        ``self.slots`` runs no code here, before the clock, nor in the harness's later reads
        of the slot (the copy-out after it). Raises TypeError when a container is not a list
        or dict at all (an error reply)."""
        d = list.__getitem__(self.slots, i)
        return {k: list(list.__iter__(dict.__getitem__(d, k))) for k in ("inputs", "outputs")}

    def _on_call(self, req: Call) -> tuple[str, dict]:
        slot = self._slot(req.slot)
        meta = self._call(slot, req.scalars, ordering=req.ordering)
        return "ok", meta

    def _on_noop(self, req: Noop) -> tuple[str, dict]:
        """The timed-iteration path without the call: flush, checks, copy-out, messaging."""
        t0 = _perf()
        if req.flush:
            self._flush(0)
        interp = Worker._interposition(self)  # as after every timed call: its cost is overhead too
        if interp:
            return "ok", {"host_ms": (_perf() - t0) * 1e3, "interposition": interp}
        # the path asked for (the trusted reference worker measures both: each side's
        # overhead is that of its own path, measured by trusted code), else its own
        dps = self.dps if req.dps is None else req.dps
        if not dps and req.slot is not None:
            # the harness's own copy-out of outputs this size (and the poisoning of the
            # returned buffers), from harness-made tensors made once, outside the later
            # round trips (the parent poisons the outputs again before any call reads them)
            slot = self._slot(req.slot)
            src = getattr(self, "_noop_src", None)
            if src is None or [(o.shape, o.dtype) for o in src] != \
                    [(o.shape, o.dtype) for o in slot["outputs"]]:
                src = self._noop_src = [self.torch.zeros_like(o) for o in slot["outputs"]]
            self._copy_out(slot, src, [], materialized=(src, None))
        return "ok", {"host_ms": (_perf() - t0) * 1e3}

    def _on_time_begin(self, req: TimeBegin) -> tuple[str, dict]:
        self.timed_host, self.timed_event, self.timed_n = [], [], 0
        self.prof = None
        l2 = None
        if self.is_cuda:
            if not self._l2.available:
                l2 = "unavailable (no CUDA driver functions)"
            elif not self._l2(self.stream0):
                l2 = f"failed: {dict(self._l2.errors)}"
            else:
                l2 = "ok"
        self.markers, self._markers_note = "ranges", None
        if self.is_cuda and req.cupti:
            try:
                from torch.profiler import ProfilerActivity, profile

                acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
                if req.markers == "streams":
                    why = self._marker_streams()
                    if why is None and self._acts is not None and self._acts_note is None:
                        try:
                            self._acts.start()
                            self.prof, self.markers = self._acts, "streams"
                            return "ok", {"cupti": True, "l2_reset": l2}
                        except Exception as e:  # noqa: BLE001 - torch.profiler takes the block
                            self._acts_note = f"cupti-python failed ({type(e).__name__}: {str(e)[:200]})"
                    if why is None:
                        # the profiler's CPU-side recording of every op widens the
                        # host's launch gaps inside the span (bench/cupti_cuda_only.py)
                        acts, self.markers = [ProfilerActivity.CUDA], "streams"
                    else:
                        self._markers_note = f"marker streams unavailable ({why}): markers found through ranges"
                self.prof = profile(activities=acts, record_shapes=False, with_stack=False)
                self.prof.__enter__()
            except Exception as e:  # noqa: BLE001 - fall back to events
                self.prof = None
                return "ok", {"cupti": False, "reason": f"{type(e).__name__}: {e}", "l2_reset": l2}
        return "ok", {"cupti": self.prof is not None, "l2_reset": l2}

    def _on_time_iter(self, req: TimeIter) -> tuple[str, dict]:
        # every field is read here, before the clock starts in _timed_iter
        return "ok", self._timed_iter(self._slot(req.slot), req.scalars, req.i, flush=req.flush,
                                      parent_copy=req.parent_copy and not self.is_cuda, check=req.check,
                                      copy_out=req.copy_out or not self.is_cuda)

    def _on_time_end(self, req: TimeEnd) -> tuple[str, dict]:
        return "ok", self._time_end()

    def _on_guards(self, req: Guards) -> tuple[str, dict]:
        changed = self.guards.verify_snapshot(self.snapshot, self._harness_fns)
        interp = Worker._interposition(self, full=req.full)
        flags = _backend_flags()
        if self.is_cuda and self.torch.cuda.current_stream().cuda_stream != self.stream0:
            changed = changed + ["torch.cuda.current_stream (set_stream outside a context)"]
        return "ok", {"changed": changed, "interposition": interp, "flags": flags,
                      "flags0": self.flags0}

    # ------------------------------------------------------------------ interposition
    def _flush_signature(self):
        """What the cache flush writes: the buffer object, its address and byte size (a
        candidate that swaps or shrinks it times its calls with a warm cache)."""
        b = self.flush_buf
        if b is None:
            return None
        # its type first: a subclass's data_ptr / untyped_storage are the candidate's to answer
        return (id(b), type(b), b.data_ptr(), b.untyped_storage().nbytes(), b.numel())

    def _l2_signature(self):
        """What the persisting-L2 reset runs: the object, whether it is live, and the driver
        functions it holds (a candidate that reaches the worker could swap or disable it)."""
        r = self.__dict__.get("_l2")
        return (id(r), type(r), getattr(r, "available", None),
                tuple(id(getattr(r, n, None)) for n in ("_set_limit", "_reset", "_set_attr", "_zero")))

    def _interposition_state(self) -> dict:
        torch = self.torch
        import gc

        st = {"trace": sys.gettrace(), "profile": sys.getprofile(),
              # a gc callback runs at any allocation, inside the harness's own steps too
              "gc_callbacks": tuple(id(c) for c in gc.callbacks),
              # a threshold of 1 makes the collector (and the __del__ of cyclic garbage the
              # candidate left) run at the harness's first allocation after the call
              "gc_threshold": gc.get_threshold()}
        st["torch_function_modes"] = Worker._function_modes(self)
        f = getattr(torch._C, "_len_torch_dispatch_stack", None)
        st["torch_dispatch_modes"] = f() if f is not None else None
        # the thread's included / excluded dispatch keys: including PythonDispatcher routes
        # every operator through Python kernels (OpOverload.py_impl) the C++ table never shows
        for key, fn in (("dispatch_keys_included", "_dispatch_tls_local_include_set"),
                        ("dispatch_keys_excluded", "_dispatch_tls_local_exclude_set")):
            f = getattr(torch._C, fn, None)
            if f is None:
                st[key] = None
                continue
            s = str(f())  # "DispatchKeySet(BackendSelect, ADInplaceOrView)"
            st[key] = frozenset(k for k in s[s.find("(") + 1:s.rfind(")")].split(", ") if k)
        return st

    def _function_modes(self):
        """The torch-function mode stack, as the ids of its modes, leaving out torch's own
        default-device mode (``torch.set_default_device`` pushes a
        ``torch.utils._device.DeviceContext``, whose ``__torch_function__`` only fills in
        the device of factory functions): an exact DeviceContext whose class method and the
        module function it calls are still the ones bound when the worker started, with no
        instance attribute shadowing the method. A subclass, a patched method or any other
        mode counts. None when this torch cannot list the stack."""
        torch = self.torch
        n_fn, at = getattr(torch._C, "_len_torch_function_stack", None), getattr(torch._C, "_get_function_stack_at", None)
        if n_fn is None:
            return None
        n = n_fn()
        if at is None:
            return n
        dc = getattr(self, "_dc0", None)
        out = []
        for i in range(n):
            m = at(i)
            t = type(m)
            if dc is not None and t is dc[0] and t.__dict__.get("__torch_function__") is dc[1] \
                    and dc[2].__dict__.get("_device_constructors") is dc[3] \
                    and "__torch_function__" not in getattr(m, "__dict__", {}):
                continue
            out.append(f"{t.__module__}.{t.__qualname__}@{id(m):x}")
        return tuple(out)

    def _interposition(self, full: bool = False) -> list[str]:
        """Ways to run code of the candidate's inside the harness's own steps after the clock
        stops (copy-out, fills, checks), without replacing any function the snapshot covers:
        a torch-function or dispatch mode left on the stack (it sees every torch call the
        worker makes), a trace/profile hook, changed thread-local dispatch keys, an instance
        attribute shadowing a Worker method, an attribute added to the Worker class, a list or
        dict subclass in the slots, a replaced connection object, a kernel of the
        candidate's in the dispatcher's table (guards.DispatchGuard) for an operator the worker
        runs after the clock (``full``: for every covered operator; after each workload).

        Why checking right after the call suffices: from here to the copy-out only harness
        code runs, and it dispatches only guards.POST_CLOCK_OPS (tested), so a hook that is
        not present now cannot be installed before the copy-out except by another hook (a
        thread is seen by the parent's thread accounting)."""
        out = []
        now = self._interposition_state()
        out.extend(self.guards.gc_interposition(self._interp0["gc_threshold"], now["gc_threshold"],
                                                self._interp0["gc_callbacks"], now["gc_callbacks"]))
        for k, v0 in self._interp0.items():
            if k in ("gc_threshold", "gc_callbacks"):  # only a lowered threshold or a new callback
                continue
            if isinstance(v0, frozenset) and now[k] != v0:
                out.append(f"{k}: added {sorted(now[k] - v0)}, removed {sorted(v0 - now[k])}"[:200])
            elif now[k] is not v0 and now[k] != v0:
                out.append(f"{k}: {v0!r} -> {now[k]!r}"[:200])
        if frozenset(_TYPE_DICT.__get__(Worker, type)) != _WORKER_KEYS or _MRO.__get__(Worker, type) != _WORKER_MRO:
            out.append("the Worker class changed (an attribute added or removed, or its bases): "
                       f"{sorted(frozenset(_TYPE_DICT.__get__(Worker, type)) ^ _WORKER_KEYS)}"[:200])
        sl = self.__dict__.get("slots")
        if type(sl) is not list or any(type(d) is not dict or any(type(dict.get(d, k)) is not list
                                                                  for k in ("inputs", "outputs"))
                                       for d in list.__iter__(sl)):
            # read through _slot, it runs no code of the candidate's; that it is there is evidence
            out.append("the worker's slots hold a container of the candidate's (a list or dict subclass)")
        else:
            bufs = [t for d in list.__iter__(sl) for k in ("inputs", "outputs") for t in list.__iter__(dict.get(d, k))]
            n = _foreign_tensors(bufs + [self.__dict__.get("flush_buf")])
            if n:
                out.append(f"{n} of the worker's own buffers (slot inputs and outputs, the flush "
                           "buffer) moved to a tensor subclass (__class__ reassigned)")
        shadow = sorted(k for k in vars(self) if k in Worker.__dict__)
        if shadow:
            out.append(f"instance attributes shadow Worker methods: {shadow}")
        foreign = Worker._foreign_state(self)
        if foreign:
            out.append(f"the worker's own state holds objects of other types: {foreign}"[:300])
        if self.__dict__.get("conn") is not self._conn0:
            out.append("the worker's connection object was replaced")
        if self._flush_sig is not None and self._flush_signature() != self._flush_sig:
            out.append("the cache-flush buffer was replaced or resized")
        if self._l2_signature() != self._l2_sig:
            out.append("the persisting-L2 reset was replaced or disabled")
        out.extend(self.dispatch.changes(full=full))
        return out

    def _foreign_state(self) -> list[str]:
        """Attributes of :data:`_PLAIN_STATE` (the Worker's own state its steps read, which
        changes during a run and so cannot be pinned) that hold an object of another type than
        the exact ones listed: an object of the candidate's there (a ``str`` subclass whose
        ``__eq__`` runs its code, read by the copy-out after the clock) runs its code inside the
        harness's steps. Compared by identity of types only, so nothing of the candidate's runs."""
        d = self.__dict__
        bad = []
        for k, types_ in self._state_types:
            if k in d:
                tv = type(dict.get(d, k))
                if not any(tv is x for x in types_):
                    bad.append(f"{k}: {_MODULE.__get__(tv, type)}.{_QUALNAME.__get__(tv, type)}"[:80])
        return bad

    # ------------------------------------------------------------------ calls
    def _args(self, slot, scalars):
        args = []
        for i, v in enumerate(slot["inputs"]):
            args.append(scalars.get(str(i), v) if v is None else v)
        return args

    def _call(self, slot, scalars, ordering: bool = True) -> dict:
        """One untimed call. On CUDA, before synchronising, the outputs are cloned on the
        caller's stream: if that snapshot differs from the outputs once the device is idle,
        work was still running on a stream the caller's stream does not wait for
        (``stream_unordered``; a real caller would read unfinished outputs). ``ordering``
        False (a warm-up call, whose reply only the interposition and process checks read):
        no gate, no shadow clone, ``stream_unordered`` None."""
        torch = self.torch
        args = self._args(slot, scalars)
        ordering = ordering and self.is_cuda
        with torch.no_grad():
            if ordering:
                self._gate()
            t0 = _perf()
            ret = self.fn(*args, *slot["outputs"]) if self.dps else self.fn(*args)
            self.call_host_ms = (_perf() - t0) * 1e3
            if not self.is_cuda:
                self._prev_ret = ret
            interp = Worker._interposition(self)
            if interp:  # nothing more runs through the candidate's hooks
                if self.is_cuda:
                    self._sync()
                return {"returned": None, "interposition": interp}
            shadow = None
            if ordering:
                outs = slot["outputs"] if self.dps else self._materialize(ret)[0]
                shadow = [o.clone() if type(o) is torch.Tensor else None for o in outs]
                self._sync()
                unordered = [i for i, (o, c) in enumerate(zip(outs, shadow))
                             if c is not None and not correctness.bits_equal(o, c)]
            elif self.is_cuda:
                self._sync()
            meta = {"returned": None} if self.dps else self._copy_out(slot, ret, args)
            if not self.is_cuda:
                self._prev_ret = ret
        if shadow is not None:
            meta["stream_unordered"] = unordered
            meta["stream_changed"] = torch.cuda.current_stream().cuda_stream != self.stream0
        return meta

    def _gate(self) -> None:
        """Hold the caller's stream with a spin kernel that outlasts the host side of the
        call (3x the last call's host time + 1 ms, at most 200 ms; cycles for a 2 GHz clock,
        so longer on a slower one). Work the candidate orders after the caller's stream (a
        side stream that waits on it) then cannot have finished when run() returns, and the
        shadow clone of :meth:`_call` sees its outputs unwritten unless the caller's stream
        also waits for that work. Untimed calls only."""
        ms = min(3.0 * self.call_host_ms + 1.0, 200.0)
        try:
            self.torch.cuda._sleep(int(ms * 2e6))
        except Exception:  # noqa: BLE001 - a build without _sleep: the check is weaker, not wrong
            pass

    def _materialize(self, ret):
        """(outputs list, container type name or None). An exact tuple/list (or a single value)
        is unpacked, inside the timed region. A tuple subclass (``torch.return_types`` structseq
        such as ``torch.max(x, dim=-1)``, a namedtuple) is unpacked through tuple's own slots
        (``tuple.__len__`` / ``tuple.__getitem__`` read the stored elements at C level; they
        cannot be overridden and raise TypeError for anything that is not a real tuple), so
        none of the subclass's own methods runs. Any other container (a list subclass, an
        object with ``__iter__``) could compute lazily when iterated after the clock stopped,
        so it is reported instead."""
        t = type(ret)
        if t is tuple or t is list:
            return list(ret), None
        try:
            n = tuple.__len__(ret)
        except TypeError:
            n = None
        if n is not None:
            return [tuple.__getitem__(ret, i) for i in range(n)], None
        if t is self.torch.Tensor or not hasattr(ret, "__iter__"):
            return [ret], None
        return [ret], f"{t.__module__}.{t.__qualname__}"

    def _marker_streams(self) -> str | None:
        """Make (once) the marker and copy-out streams of the "streams" method and learn their
        CUPTI stream ids; None when ready, else why not. The streams are created through the
        driver (``cuStreamCreate``), not taken from PyTorch's pool (whose streams a candidate's
        ``torch.cuda.Stream()`` gets in turn); their ids come from CUPTI itself
        (``cuptiGetStreamIdEx``, the id its activity records carry)."""
        if self._mstreams is not None:
            return None
        import ctypes

        torch = self.torch
        try:
            cu = ctypes.CDLL("libcuda.so.1")
            cu.cuStreamCreate.argtypes = (ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint)
            if self._acts is None:
                # the ids Kineto's records carry: its own libcupti's
                path = next((ln.split()[-1] for ln in open("/proc/self/maps") if "libcupti" in ln), None)
                get_id = ctypes.CDLL(path or "libcupti.so").cuptiGetStreamIdEx
                get_id.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint8,
                                   ctypes.POINTER(ctypes.c_uint32))
            out = []
            for _ in range(2):
                h = ctypes.c_void_p()
                rc = cu.cuStreamCreate(ctypes.byref(h), 1)  # CU_STREAM_NON_BLOCKING
                if rc != 0:
                    return f"cuStreamCreate returned {rc}"
                if self._acts is not None:
                    sid_v = self._acts.stream_id(h.value)
                else:
                    sid = ctypes.c_uint32()
                    rc = get_id(None, h, 0, ctypes.byref(sid))
                    if rc != 0:
                        return f"cuptiGetStreamIdEx returned {rc}"
                    sid_v = int(sid.value)
                out.append((torch.cuda.ExternalStream(h.value, device=self.device), sid_v))
        except Exception as e:  # noqa: BLE001 - any failure here means: ranges, as before
            return f"{type(e).__name__}: {e}"
        self._mstreams = out
        return None

    def _on(self, which: int):
        """Context for the harness's own launches: the marker (0) or copy (1) stream in a
        "streams" session, else a ``record_function`` range is the caller's."""
        return self._stream_ctx(self._mstreams[which][0])

    def _copy_out(self, slot, ret, args, materialized=None, parent_copy: bool = False) -> dict:
        """Copy returned outputs into the parent's buffers (non-DPS), after the clock stopped,
        inside a ``solbench::copy_out`` range so the timeline tells its kernels from any other
        device work after the end marker. Only plain torch.Tensor outputs of the declared
        shape and dtype are copied."""
        if self.is_cuda:
            if self.markers == "streams" and self.prof is not None:
                # its own stream: the timeline tells the copy-out from late work by stream
                with self._on(1):
                    return self._copy_out_body(slot, ret, args, materialized)
            with self._record_function("solbench::copy_out"):
                return self._copy_out_body(slot, ret, args, materialized)
        return self._copy_out_body(slot, ret, args, materialized, parent_copy)

    def _copy_out_body(self, slot, ret, args, materialized=None, parent_copy: bool = False) -> dict:
        """``parent_copy`` (CPU timed calls): a contiguous output of the declared shape and
        dtype is not copied here, its address is reported and the parent copies it from the
        stopped worker, outside the timed window; the returned buffers are not poisoned (every
        timed call gets input values never seen before, so what a freed buffer still holds is
        no call's answer; the parent poisons the slot's outputs itself before each call)."""
        torch = self.torch
        outs, container = materialized if materialized is not None else self._materialize(ret)
        if container is not None:
            return {"returned": [{"type": container, "plain": False, "shape": [], "dtype": None}],
                    "count_mismatch": False}
        meta = []
        for o in outs:
            # plain by type, and by what its TensorImpl dispatches to (guards.python_keyed)
            keyed = isinstance(o, torch.Tensor) and _python_keyed(o)
            meta.append({
                "type": f"{type(o).__module__}.{type(o).__qualname__}"
                        + (" carrying the Python dispatch key" if keyed else ""),
                "plain": type(o) is torch.Tensor and not keyed,
                "shape": list(o.shape) if isinstance(o, torch.Tensor) else None,
                "dtype": str(o.dtype).replace("torch.", "") if isinstance(o, torch.Tensor) else None,
                "device": o.device.type if isinstance(o, torch.Tensor) else None,
            })
        if len(outs) != len(slot["outputs"]):
            return {"returned": meta, "count_mismatch": True}
        for o, dst, m in zip(outs, slot["outputs"], meta):
            # an output on another device is not copied: its transfer would run here, after
            # the clock (and a CPU computation would leave nothing on the device to time)
            if not m["plain"] or tuple(o.shape) != tuple(dst.shape) or o.dtype != dst.dtype \
                    or o.device.type != dst.device.type:
                continue
            if parent_copy and _lazy_bits(o):
                # its bytes are not its values: copied here, through torch, which resolves
                # the bit inside the window (materializing it is the call's work)
                dst.copy_(o)
                continue
            if parent_copy and o.is_contiguous():
                m["addr"] = o.data_ptr()
                continue
            if parent_copy and strided_span(list(o.shape), list(o.stride())) <= max_span(dst.numel()):
                # a strided view (a transpose): the parent reads the span it covers and makes
                # the strided copy itself, outside the window, as for a contiguous output
                m["addr"], m["strides"] = o.data_ptr(), list(o.stride())
                continue
            dst.copy_(o)
        if parent_copy:
            return {"returned": meta}
        if self.is_cuda:
            self._sync()
        # poison the returned buffers (freed-memory poisoning) unless they alias an input
        in_ptrs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        for o, m in zip(outs, meta):
            if m["plain"] and o.is_contiguous() and o.untyped_storage().data_ptr() not in in_ptrs:
                try:
                    o.reshape(-1).view(torch.uint8).fill_(0xFF)
                except Exception:  # noqa: BLE001 - views that cannot be reinterpreted
                    pass
        return {"returned": meta}

    def _flush(self, i: int) -> None:
        if self.is_cuda:
            # no persisting L2 lines or window survive into the flush (harness/l2.py)
            self._l2(self.stream0)
        if self.flush_buf is not None:
            if self.is_cuda and self.markers == "streams" and self.prof is not None:
                with self._on(0):
                    self.flush_buf.fill_(i & 0x7FFFFFFF)
            else:
                with self._record_function("solbench::l2_flush"):
                    self.flush_buf.fill_(i & 0x7FFFFFFF)
            if self.is_cuda:
                self._sync()

    def _end_marker(self, i: int) -> None:
        if self.is_cuda:
            if self.end_buf is None:
                self.end_buf = self.torch.empty(1, dtype=self.torch.int32, device=self.device)
            if self.markers == "streams" and self.prof is not None:
                with self._on(0):
                    self.end_buf.fill_(i & 0x7FFFFFFF)
            else:
                with self._record_function("solbench::call_end"):
                    self.end_buf.fill_(i & 0x7FFFFFFF)
            self._sync()

    def _timed_iter(self, slot, scalars, i: int, flush: bool = True, parent_copy: bool = False,
                    check: bool = True, copy_out: bool = True) -> dict:
        torch = self.torch
        args = self._args(slot, scalars)
        if flush:
            self._flush(i + 1)
        if self.is_cuda:
            start, end = self._Event(enable_timing=True), self._Event(enable_timing=True)
            if self._preroll_s:
                t_spin = _perf()
                while _perf() - t_spin < self._preroll_s:
                    pass
            with torch.no_grad():
                start.record()
                t0 = _perf()
                ret = self.fn(*args, *slot["outputs"]) if self.dps else self.fn(*args)
                mat = None if self.dps else self._materialize(ret)
                end.record()
                self._sync()
                t1 = _perf()
            ev = start.elapsed_time(end)
            self._end_marker(i)
        else:
            with torch.no_grad():
                t0 = _perf()
                ret = self.fn(*args, *slot["outputs"]) if self.dps else self.fn(*args)
                mat = None if self.dps else self._materialize(ret)
                t1 = _perf()
            ev = None
        meta = {"host_ms": (t1 - t0) * 1e3, "event_ms": ev}
        if not self.is_cuda:
            self._prev_ret = ret
        interp = Worker._interposition(self) if check else None
        if interp:  # do not run the copy-out through the candidate's hooks
            meta["interposition"] = interp
            self.timed_n += 1
            return meta
        if not self.dps and copy_out:
            meta.update(self._copy_out(slot, ret, args, mat, parent_copy=parent_copy))
        self.timed_n += 1
        return meta

    def _time_end(self) -> dict:
        if self.prof is None:
            return {"cupti": False}
        from .timing import kineto_segmentation, kineto_stream_segmentation, stream_segmentation

        self._flush(10**6)  # closing flush: ends the last iteration's window
        own = self.prof is self._acts
        recs = None
        if own:
            try:
                recs = self._acts.stop()
            except Exception as e:  # noqa: BLE001 - the block falls back to events
                self.prof, self.markers = None, "ranges"
                return {"cupti": False, "reason": f"CUPTI records not used: {type(e).__name__}: {str(e)[:300]}"}
        else:
            self.prof.__exit__(None, None, None)
        streams = self.markers == "streams"
        self.markers = "ranges"
        try:
            if own:
                seg, _ = stream_segmentation(recs, self.timed_n, self._mstreams[0][1], self._mstreams[1][1])
            elif streams:
                seg, _ = kineto_stream_segmentation(self.prof, self.timed_n, self._mstreams[0][1],
                                                    self._mstreams[1][1])
            else:
                seg, _ = kineto_segmentation(self.prof, self.timed_n)
        except Exception as e:  # noqa: BLE001
            return {"cupti": False, "reason": f"segmentation failed: {type(e).__name__}: {e}"}
        finally:
            self.prof = None
        if not seg.ok:
            return {"cupti": False, "reason": seg.reason}
        note = "; ".join(x for x in (f"markers: streams (CUDA activity only, records through "
                                      f"{'cupti-python' if own else 'torch.profiler'})" if streams else None,
                                      self._acts_note if streams and not own else None,
                                       self._markers_note, seg.reason) if x)
        return {"cupti": True, "note": note or None, "span_ms": seg.span_ms, "kernel_sum_ms": seg.kernel_sum_ms,
                "n_activities": seg.n_activities, "kernel_sets": [list(s) for s in seg.kernel_sets],
                "late_ms": seg.late_ms, "late_all_ms": seg.late_all_ms}


#: the worker's handler table: (op, request model, the model's validator, handler), one
#: entry per op of protocol.REQUESTS but "exit" (:meth:`Worker.loop`). Built at import,
#: before any candidate code exists, and a tuple: its entries cannot be replaced in place,
#: and rebinding the name is seen by the snapshot and the parent's memory read
#: (:func:`_request_guards`). The validator is the model's pydantic-core validator as bound
#: now (the model's ``model_validate`` looks it up on the class at every call)
_HANDLERS: tuple[tuple[str, type, Any, Any], ...] = tuple(
    (op, model, model.__pydantic_validator__.validate_python, Worker.__dict__[f"_on_{op}"])
    for op, model in REQUESTS.items() if op != "exit")
assert not any(n.startswith("_on_") and n[4:] not in REQUESTS for n in Worker.__dict__), \
    "a Worker handler without a request model of its op in protocol.REQUESTS"

#: the Worker class's attribute names and MRO, at import: every ``self.x`` a handler reads goes
#: through the class, so a ``__getattribute__`` or a data descriptor named like an instance
#: attribute (``slots``, ``fn``, ``conn``) set on it, or a base class put under it, would run
#: the candidate's code before and after the clock (Worker._interposition; read through
#: type's own descriptors, tests/harness/test_worker_dispatch.py)
_WORKER_KEYS = frozenset(_TYPE_DICT.__get__(Worker, type))
_WORKER_MRO = _MRO.__get__(Worker, type)


def _request_guards(mod) -> dict[str, tuple[Any, str]]:
    """Guarded names of the request path: the handler table, the unpickler Connection.recv
    reads each request with, and for each request model what Python code of the candidate's
    could take over on it (set on the model or a base class): ``__new__``, which
    pydantic-core calls to make the parsed request, ``__getattribute__``, which runs on every
    field a handler reads, each field's name (a data descriptor of that name wins over the
    request's ``__dict__``) and the slots pydantic-core sets on each request (``__dict__``,
    ``__pydantic_fields_set__``, ``__pydantic_extra__``, ``__pydantic_private__``: set through
    a data descriptor of that name), all before the clock starts. The worker's snapshot
    (harness/guards.py, which reads the class dicts along the MRO: a descriptor's ``__get__``
    can answer ``getattr`` with the original) sees a hook on any; the parent's
    memory read (harness/memguard.py) lists them too, but reads the entry of the class that
    defines them (``object``), which a hook set on the model or ``BaseModel`` shadows unseen
    there: for these the snapshot's report, sent through the guarded reply path, is the
    evidence."""
    import multiprocessing.connection as mc

    out: dict[str, tuple[Any, str]] = {"worker._HANDLERS": (mod, "_HANDLERS"),
                                       # Connection.recv unpickles every request with these
                                       "multiprocessing.connection._ForkingPickler": (mc, "_ForkingPickler"),
                                       "ForkingPickler.loads": (mc._ForkingPickler, "loads")}
    for _op, model, _v, _h in _HANDLERS:
        # a data descriptor named like a field, on the model or a base, wins over the
        # request's __dict__ when the handler reads the field; pydantic-core sets the
        # instance's __dict__ and its __pydantic_* slots through PyObject_GenericSetAttr, which
        # calls a data descriptor set under one of those names
        for attr in ("__new__", "__getattribute__", "__dict__", "__pydantic_fields_set__",
                     "__pydantic_extra__", "__pydantic_private__", *model.model_fields):
            out[f"protocol.{model.__name__}.{attr}"] = (model, attr)
    return out


def _timeline_guards() -> dict[str, tuple[Any, str]]:
    """Guarded names: what turns a timed block's device records into spans. ``_time_end``
    looks the segmentations up by name in harness/timing.py at every block, and the CUPTI
    recorder's methods and its demangler run on every record; a rebound name, or code changed
    in place behind the same function object, forges every span or kernel name without
    touching the recorder's pinned attributes (tests/harness/cand_segmentation_rebound.py,
    cand_cupti_recorder_code.py). Guarded on every device: the CPU worker imports them too."""
    from . import cupti_activity, timing

    out: dict[str, tuple[Any, str]] = {f"timing.{n}": (timing, n) for n in (
        "stream_segmentation", "kineto_stream_segmentation", "kineto_segmentation", "segment",
        "late_activity", "is_harness_activity", "_merge_close", "DeviceActivity", "Segmentation")}
    out.update({f"cupti_activity.ActivitySession.{n}": (cupti_activity.ActivitySession, n)
                for n in ("start", "stop", "stream_id", "_requested", "_completed", "_own_flush", "_records")})
    out.update({"cupti_activity._Demangler.__call__": (cupti_activity._Demangler, "__call__"),
                "cupti_activity.DeviceActivity": (cupti_activity, "DeviceActivity")})
    return out


def _builtins_used(*modules) -> dict[str, tuple[Any, str]]:
    """Guarded names: every builtin that the code of ``modules`` (the worker's module with
    its Worker class, and the worker-side modules it calls) names, and ``__import__`` (each ``import`` inside a method, e.g.
    after every call in ``_interposition_state``). The worker's code looks each up in the
    builtins module at every call: one the candidate rebinds (``builtins.enumerate``, read in
    ``_args`` with the fresh inputs, before the clock) would run its code there
    (tests/harness/test_worker_dispatch.py)."""
    import builtins
    import types

    names = {"__import__"}

    def walk(co):
        names.update(co.co_names)
        for c in co.co_consts:
            if isinstance(c, types.CodeType):
                walk(c)

    def functions(ns, owner):
        for v in list(vars(ns).values()):
            v = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
            if isinstance(v, types.FunctionType) and v.__module__ == owner:
                yield v
            elif isinstance(v, type) and v.__module__ == owner and ns is not v:
                yield from functions(v, owner)

    for m in modules:
        for f in functions(m, m.__name__):
            walk(f.__code__)
    return {f"builtins.{n}": (builtins, n) for n in sorted(names)
            if n in builtins.__dict__ and (n == "__import__" or not n.startswith("__"))}


def main(argv: list[str] | None = None) -> None:
    """Entry point: ``python -m solbench.harness.worker fd:N DEVICE --fd-channel=M``, where
    N is the worker's end of the parent's socket pair and M the SOCK_SEQPACKET end the
    parent passes buffer memfds on (both inherited; no path, no key). First of all it
    enters the sandbox's last steps (uid drop, resource limits, parent-death signal: see
    :func:`solbench.harness.sandbox.enter_in_worker`). stdout/stderr are already the capped
    log file."""
    import socket
    from multiprocessing.connection import Connection

    from . import sandbox, shm

    argv = argv if argv is not None else sys.argv[1:]
    address, device = argv[0], argv[1]
    chan = next((a.split("=", 1)[1] for a in argv[2:] if a.startswith("--fd-channel=")), None)
    conn = Connection(int(address[3:]))
    try:
        sandbox.enter_in_worker(device)
    except BaseException as e:  # noqa: BLE001 - never run a candidate outside the sandbox asked for
        conn.send_bytes(json.dumps([0, "error", {"type": type(e).__name__,
                                                 "message": f"sandbox: {e}"}]).encode())
        os._exit(3)
    if chan is not None:
        shm.FD_CHANNEL = socket.socket(fileno=int(chan))
    try:
        w = Worker(conn, device)
    except BaseException as e:  # noqa: BLE001
        try:
            conn.send_bytes(json.dumps([0, "error", {"type": type(e).__name__,
                                                     "message": f"worker start: {e}"}]).encode())
        finally:
            os._exit(3)
    # the memory cap without a cgroup, now that the worker's own imports are mapped and no
    # candidate code exists yet (sandbox.cap_data)
    sandbox.cap_data(device)
    w.start_stamps["ready"] = time.monotonic()
    loaded = os.environ.get(paths.SANDBOX_SECCOMP_LOADED)
    # whether the system-call filter is in force here (None: none was asked for), and why not
    seccomp = None if loaded is None else {"ok": loaded == "1", "why": sandbox.SECCOMP_FAILURE}
    conn.send_bytes(json.dumps([0, "ok", {"pid": os.getpid(), "flush_default": _cache_bytes(),
                                          "start_stamps": w.start_stamps, "seccomp": seccomp}]).encode())
    w.loop()
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
