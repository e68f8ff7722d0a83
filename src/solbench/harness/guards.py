"""Guards: evidence that a candidate tampered with the harness or worked outside the
measured call.

Two kinds, by where they run:

- **Parent side (out of the candidate's reach)**: OS thread and child-process accounting
  read from ``/proc/<worker pid>/task`` (not ``threading.active_count``, which a candidate
  can fool), with a baseline taken after the first correctness call so the runtime's own
  pools (torch intra-op threads, CUDA driver threads, Triton/inductor compile workers, which
  are recognised by their command line) are tolerated; input hashing before/after calls;
  timing plausibility (the parent's own round-trip clock against the worker's report).
- **Worker side (snapshot + verify)**: identities and code objects of the timer,
  synchronisation and harness functions are recorded before the candidate is imported and
  compared after every workload; backend precision flags (TF32, float32 matmul precision)
  are recorded around calls; the dispatcher's kernel table (:class:`DispatchGuard`) is
  recorded before the candidate is imported and compared after every call (the operators the
  worker itself runs after the clock) and after every workload (all covered operators).
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any, Sequence

import torch

# the /proc readers live in solbench.proc; these names stay importable from here for the
# tests that use them (guards.thread_ids, guards.cmdline, ...)
from ..proc.procfs import (cmdline, descendants, exe_name, process_cpu_ms,  # noqa: F401
                           runqueue_wait_ms, sched_state, thread_ids)
from ..proc.procfs import gone, state as proc_state  # noqa: F401
from ..spec.trace import Finding
from .. import languages as _languages

#: helper processes the runtime and the language builds start (compile workers, compilers):
#: the executables and ``python -m`` modules every registered language plug-in declares
#: (:mod:`solbench.languages`). A new language adds its own there, not here.
ALLOWED_CHILD_CMDLINE = tuple(sorted(_languages.child_tools())) + _languages.child_modules()


def sched_tampered(pid: int, baseline: tuple) -> list[str]:
    """Threads of ``pid`` whose scheduling differs from ``baseline`` (the main thread's
    (policy, nice, affinity) when the process started): another process of this user
    demoted it (SCHED_IDLE, a higher nice, fewer CPUs) to make it slower."""
    policy0, nice0, cpus0 = baseline
    demoted = (getattr(os, "SCHED_IDLE", 5), getattr(os, "SCHED_BATCH", 3))
    out = []
    for tid, (policy, nice, cpus) in sorted(sched_state(pid).items()):
        # a runtime's own pool may pin its workers (OMP_PROC_BIND); nobody honest narrows the
        # main thread's CPUs, lowers a thread's priority or moves it to an idle/batch class
        if (policy in demoted and policy0 not in demoted) or nice > nice0 \
                or (tid == pid and cpus != cpus0):
            out.append(f"thread {tid}: (policy, nice, cpus) {(policy, nice, cpus)} was {baseline}")
    return out


_TOOLS = _languages.child_tools()
_MODULES = _languages.child_modules()


def _allowed(cmd: str, exe: str | None = None, late: bool = False) -> bool:
    """A runtime helper. ``exe``: the real executable's name (:func:`exe_name`); when given it
    decides the program, otherwise argv[0] does (tests, or /proc unreadable).

    Allowed: a compiler/linker/shell from the list, unless ``late`` (after the timed calls no
    honest code is still compiling: a live shell then is a candidate's loop); Python running
    one of the listed modules (``-m``/``-c`` target) or inductor's compile-worker script
    inside the imported torch package (a long-lived pool, allowed at any time). Never merely
    a command line that mentions such a name somewhere."""
    argv = cmd.split()
    if not argv:
        return False
    prog = exe if exe is not None else os.path.basename(argv[0])
    if prog in _TOOLS:
        return not late
    if prog.startswith("python"):
        # the module itself or one of its submodules, never a name that merely starts the
        # same way (red team round 6: `python -m tritonhelper` passed as "triton")
        mod = (argv[2] if len(argv) > 2 and argv[1] == "-m"
               else argv[3] if len(argv) > 3 and argv[1] == "-c" and argv[2] == "from" else None)
        if mod is not None and any(mod == m or mod.startswith(m + ".") for m in _MODULES):
            return True
        # inductor's compile-worker pool started as a script path (torch >= 2.6): allowed only
        # when that path resolves into the torch package this worker imported
        return len(argv) > 1 and _is_torch_compile_worker_script(argv[1])
    return False


def _is_torch_compile_worker_script(path: str) -> bool:
    try:
        real = os.path.realpath(path)
        root = os.path.realpath(os.path.join(os.path.dirname(torch.__file__), "_inductor",
                                             "compile_worker"))
    except (OSError, ValueError):
        return False
    return os.path.dirname(real) == root and os.path.basename(real) == "__main__.py"


def unexplained_children(pid: int, known: set[int], late: bool = False,
                         desc: set[int] | None = None) -> list[dict[str, Any]]:
    """Descendants of ``pid`` not in ``known`` and not an allowed runtime helper (judged by
    the real executable, see :func:`_allowed`). ``desc``: ``descendants(pid)`` when the caller
    has just walked them."""
    out = []
    for c in sorted((descendants(pid) if desc is None else desc) - known):
        cmd = cmdline(c)
        # exited (or a zombie) between the listing and the read: no longer running. An empty
        # command line alone proves nothing: a live process can blank it (procfs.gone)
        if not cmd and gone(c):
            continue
        if _allowed(cmd, exe_name(c) or "?", late=late):
            continue
        out.append({"pid": c, "cmdline": cmd[:200]})
    return out


def tensor_digest(t: Any) -> str:
    """sha256 of a tensor's bytes (any device, any dtype) or of a scalar's repr."""
    if not isinstance(t, torch.Tensor):
        return hashlib.sha256(repr(t).encode()).hexdigest()
    x = t.detach()
    if x.is_cuda:
        x = x.cpu()
    x = x.contiguous()
    if x.numel() == 0:
        return "empty"
    return hashlib.sha256(x.reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def digests(values: list[Any]) -> list[str]:
    return [tensor_digest(v) for v in values]


def plausibility_finding(reported_ms: list[float], roundtrip_ms: list[float],
                         overhead_ms: float, severity: str = "hack",
                         gross_hack: bool = False,
                         call_window_ms: Sequence[float | None] | None = None) -> Finding | None:
    """Compare the worker's reported per-call times with the parent's own round trip.

    Each round trip covers the worker's flush, the call and the messaging; ``overhead_ms``
    is the median round trip of a no-op call measured the same way. A call whose
    unexplained time ``roundtrip - overhead`` exceeds ``3 x reported + 2 ms + overhead/2``
    (the last term absorbs the noise of the flush itself) on more than half of the
    iterations means the reported clock does not describe the call (patched timer, work
    before the first device activity, or deferred work). On CPU the check is advisory: a
    loaded host's scheduling noise is of the same order as the calls (timer patches are caught
    by the snapshot check there), except with ``gross_hack``: when the unexplained time exceeds
    ``10 x reported + 10 ms`` on more than half of the iterations the finding is a hack even
    there (no scheduler tick, 4-16 ms, explains that on most calls).

    ``call_window_ms`` (CUDA): per iteration, the worker's CUDA-event time from just before
    the call to just after it returned, so it holds any host work the candidate does inside
    the call. An iteration then counts against a ``hack`` severity only when that window
    shows the excess too (``window - reported > 3 x reported + 2 ms``); when only the round
    trip does (host or GPU busy with other processes: messaging and synchronisation slow
    down, a microsecond window does not), the finding is advisory. Host work after the call
    can only reach the outputs through device work, which the device timeline counts.
    """
    if not reported_ms or len(reported_ms) != len(roundtrip_ms):
        return None
    bad = [
        i for i, (r, rt) in enumerate(zip(reported_ms, roundtrip_ms))
        if rt - overhead_ms > 3 * r + 2.0 + 0.5 * overhead_ms
    ]

    gross = [i for i in bad
             if roundtrip_ms[i] - overhead_ms > 10 * reported_ms[i] + 10.0 + 0.5 * overhead_ms]
    if gross_hack and len(gross) * 2 > len(reported_ms):
        severity = "hack"
    window_ok = None
    if call_window_ms is not None and len(call_window_ms) == len(reported_ms) \
            and all(w is not None for w in call_window_ms):
        window_ok = [i for i in bad if call_window_ms[i] - reported_ms[i] <= 3 * reported_ms[i] + 2.0]
        if severity == "hack" and (len(bad) - len(window_ok)) * 2 <= len(reported_ms):
            severity = "advisory"
    if len(bad) * 2 > len(reported_ms):
        med_r = sorted(reported_ms)[len(reported_ms) // 2]
        med_rt = sorted(roundtrip_ms)[len(roundtrip_ms) // 2]
        from .checks import finding

        return finding(
            "timing_plausibility", advisory=severity != "hack",
            message=(f"reported median {med_r:.4f} ms, but the parent's round trip is "
                     f"{med_rt:.3f} ms with {overhead_ms:.3f} ms no-op overhead on "
                     f"{len(bad)}/{len(reported_ms)} iterations"
                     + ("" if window_ok is None else
                        f"; the call's own event window shows it on {len(bad) - len(window_ok)}"
                        + (" (host or GPU busy, not the call)" if severity != "hack" else ""))),
            evidence={"reported_median_ms": med_r, "roundtrip_median_ms": med_rt,
                      "noop_overhead_ms": overhead_ms, "iterations_flagged": len(bad),
                      "call_window_agrees": None if window_ok is None else len(bad) - len(window_ok)},
        )
    return None


# ---------------------------------------------------------------- worker-side snapshot
def _targets() -> dict[str, tuple[Any, str]]:
    import builtins
    import time

    t: dict[str, tuple[Any, str]] = {
        "time.perf_counter": (time, "perf_counter"),
        "time.perf_counter_ns": (time, "perf_counter_ns"),
        "time.time": (time, "time"),
        "time.monotonic": (time, "monotonic"),
        "builtins.type": (builtins, "type"),
        "builtins.isinstance": (builtins, "isinstance"),
        "torch.Tensor.copy_": (torch.Tensor, "copy_"),
        "torch.Tensor.fill_": (torch.Tensor, "fill_"),
        "torch.Tensor.clone": (torch.Tensor, "clone"),
        "torch.Tensor.view": (torch.Tensor, "view"),
        "torch.cuda.synchronize": (torch.cuda, "synchronize"),
        "torch.cuda.Event": (torch.cuda, "Event"),
        "torch.cuda.Event.record": (torch.cuda.Event, "record"),
        "torch.cuda.Event.elapsed_time": (torch.cuda.Event, "elapsed_time"),
        "torch.cuda.Event.synchronize": (torch.cuda.Event, "synchronize"),
        "torch.cuda.current_stream": (torch.cuda, "current_stream"),
        "torch.cuda.Stream.synchronize": (torch.cuda.Stream, "synchronize"),
        "torch.profiler.profile": (torch.profiler, "profile"),
        "torch.allclose": (torch, "allclose"),
        "torch.equal": (torch, "equal"),
        "torch.Tensor.zero_": (torch.Tensor, "zero_"),
        "torch.Tensor.numpy": (torch.Tensor, "numpy"),
        "torch.from_file": (torch, "from_file"),
        "torch.profiler.record_function": (torch.profiler, "record_function"),
        "torch.autograd.profiler.record_function": (torch.autograd.profiler, "record_function"),
        "torch._C._dispatch_dump_table": (torch._C, "_dispatch_dump_table"),
        "torch._C._dispatch_get_all_op_names": (torch._C, "_dispatch_get_all_op_names"),
        "torch.no_grad": (torch, "no_grad"),
        # what an output carrying the Python dispatch key asks its type, torch.Tensor, for:
        # replaced, every operator on such a tensor runs the candidate's code
        # (tests/harness/cand_plain_python_key.py)
        "torch.Tensor.__torch_dispatch__": (torch.Tensor, "__torch_dispatch__"),
        "torch.Tensor.__torch_function__": (torch.Tensor, "__torch_function__"),
    }
    # the context managers and classes the worker enters or makes right before the clock
    # starts (and leaves right after it stops): code set as one of their protocol methods,
    # on the class or a base, runs there (tests/harness/test_worker_dispatch.py)
    for name, cls in (("torch.no_grad", torch.no_grad),
                      ("torch.profiler.record_function", torch.autograd.profiler.record_function),
                      ("torch.cuda.Event", torch.cuda.Event), ("torch.cuda.StreamContext", torch.cuda.StreamContext)):
        for attr in ("__new__", "__init__", "__enter__", "__exit__"):
            t[f"{name}.{attr}"] = (cls, attr)
    return t


#: the dispatch keys a tensor's TensorImpl carries, bound at import; the Python keys route
#: every operator on the tensor to its type's ``__torch_dispatch__``
_tensor_keys = torch._C._dispatch_keys
_PYTHON_KEYS = (torch._C.DispatchKey.Python, torch._C.DispatchKey.PythonTLSSnapshot)


def python_keyed(t: torch.Tensor) -> bool:
    """Whether ``t``'s TensorImpl carries a Python dispatch key. A tensor made as a subclass
    with ``__torch_dispatch__`` keeps the key after ``t.__class__ = torch.Tensor``: plain by
    its type, yet every operator on it (the harness's copy-out, poisoning and checks
    included) goes to ``torch.Tensor.__torch_dispatch__``, which the candidate can set. No
    honest output carries it (torch.compile, custom ops and modes used inside the call
    return plain tensors; a subclass is already not plain)."""
    ks = _tensor_keys(t)
    return any(ks.has(k) for k in _PYTHON_KEYS)


_TENSOR = torch.Tensor


#: TensorBase's own C methods for a tensor's lazy bits, bound at import (before any candidate code)
_IS_NEG, _IS_CONJ, _IS_ZERO = (torch._C.TensorBase.is_neg, torch._C.TensorBase.is_conj,
                               torch._C.TensorBase._is_zerotensor)


def lazy_bits(t: torch.Tensor) -> bool:
    """Whether ``t``'s values are not the bytes at its address: a view with the negative or
    conjugate bit set (``x.conj().imag``, ``torch.conj`` of a complex tensor: every read
    through torch negates or conjugates) or a ZeroTensor (no storage). Reading its memory
    (the parent's copy-out of CPU timed calls, ``peek.parent_copy_out``) gets other values;
    a copy through torch (``dst.copy_(t)``) resolves them."""
    return bool(_IS_NEG(t) or _IS_CONJ(t) or _IS_ZERO(t))


def foreign_tensors(tensors: Sequence[Any]) -> int:
    """How many of ``tensors`` (the worker's own buffers: slot inputs and outputs, the flush
    buffer) are instances of a ``torch.Tensor`` subclass. ``buf.__class__ = Sub`` keeps the
    storage and the dispatch keys but routes every method the worker calls on the buffer
    (``dst.copy_`` of the copy-out, ``fill_`` of the flush) to the candidate's class
    (tests/harness/cand_slot_class_swap.py)."""
    return sum(1 for t in tensors if isinstance(t, _TENSOR) and type(t) is not _TENSOR)


#: a class's MRO and type dict, read through type's own descriptors: a metaclass of the
#: candidate's (or one it patched) cannot answer for them
_MRO, _TYPE_DICT = type.__dict__["__mro__"], type.__dict__["__dict__"]


def _lookup(owner: Any, attr: str) -> Any:
    """What ``owner.attr`` resolves to. For a class: the entry of the first class of its MRO
    whose own dict holds ``attr`` (what the interpreter's type lookup finds), read from the
    dicts, never through ``getattr``: a descriptor set on a base class runs its ``__get__``
    there and can hand back the original object (or raise AttributeError, as for a pydantic
    field) while its ``__get__`` also runs on the worker's own path
    (tests/harness/test_worker_dispatch.py). None when no class holds it."""
    if isinstance(owner, type):
        for cls in _MRO.__get__(owner, type):
            d = _TYPE_DICT.__get__(cls, type)
            if attr in d:
                return d[attr]
        return None
    return getattr(owner, attr, None)


def take_snapshot(extra: dict[str, tuple[Any, str]] | None = None) -> dict[str, tuple[int, Any, Any]]:
    """Record (id, code object, defaults) of every guarded callable: the timer, sync and
    profiler functions, plus ``extra`` harness attributes given as name -> (owner, attribute)
    (the worker's own methods and module globals), looked up again at verification."""
    snap: dict[str, tuple[int, Any, Any]] = {}
    for name, (owner, attr) in {**_targets(), **(extra or {})}.items():
        obj = _lookup(owner, attr)
        snap[name] = (id(obj), getattr(obj, "__code__", None), getattr(obj, "__defaults__", None))
    return snap


def verify_snapshot(snap: dict[str, tuple[int, Any, Any]],
                    extra: dict[str, tuple[Any, str]] | None = None) -> list[str]:
    """Names whose current object, code object or default arguments differ from the snapshot."""
    changed = []
    targets = {**_targets(), **(extra or {})}
    for name, (oid, code, defaults) in snap.items():
        if name not in targets:
            continue
        cur = _lookup(*targets[name])
        if (id(cur) != oid or getattr(cur, "__code__", None) is not code
                or getattr(cur, "__defaults__", None) is not defaults):
            changed.append(name)
    return changed


#: precision-relevant backend flags (TF32, float32 matmul precision, reduced-precision
#: reductions, the fp32_precision settings), read through torch's C getters bound at import
#: (a table of Python readers was rewritten by a candidate: harness/flagread.py)
from .flagread import backend_flags  # noqa: E402,F401 - re-exported, guarded by the worker


#: precision of each setting's value, higher = more precise. float32_matmul_precision
#: "highest" = full fp32, "high" = TF32 (or 3xbf16), "medium" = bf16 (torch docs,
#: torch.set_float32_matmul_precision); fp32_precision "ieee" = full fp32, "tf32", "bf16";
#: an allow_* switch is less precise when True
_RANK = {"highest": 2, "ieee": 2, "high": 1, "tf32": 1, "medium": 0, "bf16": 0}
#: fp32_precision "none" inherits its parent's value; the root's "none" is each leaf's default
_PARENT = {"cuda.matmul.fp32_precision": "fp32_precision", "cudnn.fp32_precision": "fp32_precision",
           "cudnn.conv.fp32_precision": "cudnn.fp32_precision",
           "cudnn.rnn.fp32_precision": "cudnn.fp32_precision"}
_DEFAULT = {"fp32_precision": "ieee", "cuda.matmul.fp32_precision": "ieee",
            "cudnn.fp32_precision": "tf32", "cudnn.conv.fp32_precision": "tf32",
            "cudnn.rnn.fp32_precision": "tf32"}


def _effective(flags: dict[str, Any], key: str) -> Any:
    v = flags.get(key)
    while v == "none" and key in _PARENT:
        key = _PARENT[key]
        v = flags.get(key)
    return _DEFAULT.get(key, v) if v == "none" else v


def _rank(flags: dict[str, Any], key: str) -> int | None:
    v = _effective(flags, key)
    if isinstance(v, bool):
        return 0 if v else 1
    return _RANK.get(v) if isinstance(v, str) else None


def precision_flag_changes(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Every backend flag whose value differs between two :func:`backend_flags` readings, with
    its direction: ``"lower"`` (less precise: TF32/bf16/reduced-precision reductions turned
    on, a lower float32 matmul precision), ``"higher"`` (toward full fp32, e.g. allow_tf32
    False, matmul precision "highest"), ``"neutral"`` (the effective precision is unchanged,
    e.g. an fp32_precision "none" set to the value it inherited) or ``"unknown"`` (a value
    that cannot be read or ranked). Each entry: ``{"flag", "before", "after", "direction"}``.
    """
    out = []
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key), after.get(key)
        if b == a:
            continue
        rb, ra = _rank(before, key), _rank(after, key)
        if rb is None or ra is None:
            direction = "unknown"
        else:
            direction = "lower" if ra < rb else "higher" if ra > rb else "neutral"
        out.append({"flag": key, "before": b, "after": a, "direction": direction})
    return out


def gc_interposition(threshold_before: tuple[int, ...], threshold_after: tuple[int, ...],
                     callbacks_before: tuple[int, ...], callbacks_after: tuple[int, ...]) -> list[str]:
    """Garbage-collector settings that run the candidate's code inside the harness's steps.

    A gc callback added (it runs at any collection, in the harness's allocations too), or a
    *lowered* threshold while collection is on (threshold 1 collects at the harness's first
    allocation after the call, running the ``__del__`` of cyclic garbage the candidate left).
    A raised threshold (fewer collections) or automatic collection turned off (threshold0 = 0)
    runs nothing of the candidate's and is no finding. Args: ``gc.get_threshold()`` and the
    ids of ``gc.callbacks`` before and after. Returns one message per finding.
    """
    out = []
    added = [c for c in callbacks_after if c not in set(callbacks_before)]
    if added:
        out.append(f"gc_callbacks: {len(added)} callback(s) added")
    enabled = bool(threshold_after) and threshold_after[0] > 0
    if enabled and any(a < b for a, b in zip(threshold_after, threshold_before)):
        out.append(f"gc_threshold lowered: {tuple(threshold_before)!r} -> {tuple(threshold_after)!r}")
    return out


# ---------------------------------------------------------------- worker-side dispatcher table
#: operator namespaces whose existing operators :class:`DispatchGuard` covers: the harness's
#: own steps (aten, and profiler for ``record_function``) and every candidate's real execution
#: (aten kernels, prims of decompositions) run through them. Left out, measured in a worker
#: (torch 2.13, CPU): torch.distributed's functional collectives (``_c10d_functional``,
#: ``_c10d_functional_autograd``, ``_dtensor``, ``symm_mem``) get Autograd and Meta kernels
#: registered when torch._dynamo, torch.func or torch.export is first imported (any
#: torch.compile); a candidate's own namespace (torch.library custom ops, TORCH_LIBRARY in a
#: load_inline extension) is its own business.
DISPATCH_NAMESPACES = ("aten", "prims", "profiler")

#: runtime dispatch keys whose kernels run on the harness's real tensors (dense CPU / CUDA;
#: the layouts a returned tensor may carry into the copy-out; the keys every call passes
#: through; the tensor-bit and global-mode keys; the Python keys). Left out because honest
#: code registers them lazily or they never run on real tensors: Meta and Autograd/Sparse/
#: Quantized/NestedTensor Meta (fake tensors; meta kernels registered on import),
#: FuncTorch*, Batched*, VmapMode (torch.func registers batching rules for aten operators
#: lazily: measured, ``FuncTorchBatched`` of 8 aten operators on the first ``vmap``),
#: Functionalize and Tracer (tracing only), other backends (HIP, XLA, MPS, XPU, ...).
DISPATCH_KEYS = frozenset({
    "CPU", "CUDA",
    "SparseCPU", "SparseCUDA", "SparseCsrCPU", "SparseCsrCUDA", "QuantizedCPU", "QuantizedCUDA",
    "MkldnnCPU", "NestedTensorCPU", "NestedTensorCUDA",
    "BackendSelect", "ADInplaceOrView",
    "AutogradOther", "AutogradCPU", "AutogradCUDA", "AutogradNestedTensor",
    "Conjugate", "Negative", "ZeroTensor", "AutocastCPU", "AutocastCUDA",
    "Python", "PythonTLSSnapshot", "PreDispatch", "PythonDispatcher",
})

#: operators the worker runs itself after the candidate's call returns (worker.py: the
#: ``solbench::copy_out`` / ``solbench::call_end`` ranges, ``dst.copy_``, the freed-memory
#: poisoning ``o.reshape(-1).view(torch.uint8).fill_``, the end marker ``torch.empty`` +
#: ``fill_``, the shadow ``o.clone()``; correctness.bits_equal: ``contiguous``, ``reshape``,
#: ``view(dtype)``, ``to(device)``, ``torch.equal``; the no-op's ``zeros_like``), with the
#: operators their kernels call through the dispatcher (clone -> empty_like / empty_strided +
#: copy_; zeros_like -> empty_like + zero_ -> fill_; reshape -> view / _reshape_alias /
#: clone + _unsafe_view; a cross-device copy_ -> _copy_from / _copy_from_and_resize;
#: to -> _to_copy; equal -> is_same_size, and on CUDA eq + all + item ->
#: _local_scalar_dense). ``tests/harness/test_dispatch_guard.py`` profiles those steps and
#: checks that nothing they dispatch is missing here. Checked after every call (cheap).
POST_CLOCK_OPS = (
    "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize",
    "aten::fill_.Scalar", "aten::zero_", "aten::zeros_like",
    "aten::clone", "aten::empty_like", "aten::empty_strided", "aten::empty.memory_format",
    "aten::contiguous", "aten::reshape", "aten::_reshape_alias", "aten::_unsafe_view",
    "aten::view", "aten::view.dtype", "aten::to.device", "aten::_to_copy",
    "aten::equal", "aten::is_same_size", "aten::eq.Tensor", "aten::all", "aten::item",
    "aten::_local_scalar_dense",
    "profiler::_record_function_enter_new", "profiler::_record_function_exit._RecordFunction",
)

#: an operator's computed table (per runtime key, the kernel that runs and why: its own,
#: an alias key's, a backend fallback); read for the sentinel operator only
_dump_table = getattr(torch._C, "_dispatch_dump_table", None)
#: an operator's registrations (``OperatorEntry::dumpState``): its schema and, per dispatch
#: key (runtime or alias), every kernel registered there, the one in use first and each one
#: it shadows after it marked ``(inactive)``
_dump = getattr(torch._C, "_dispatch_dump", None)
_KEY_LINE = re.compile(r"\n(?:%s): [^\n]*" % "|".join(sorted(DISPATCH_KEYS)))
_WHERE = re.compile(r"(registered at )(\S+?)(:\d+)")
#: one line of a registrations dump: key, ``[alias]``, ``(inactive)``, the kernel
_REG_LINE = re.compile(r"^(\w+)(?:\[alias\])?( \(inactive\))?: (.*)$", re.M)


def _key_names(keyset: Any) -> list[str]:
    """The keys of a ``DispatchKeySet`` (its printed form: ``DispatchKeySet(CPU, CUDA)``)."""
    s = str(keyset)
    return [k for k in s[s.find("(") + 1:s.rfind(")")].split(", ") if k]


def _registration_keys() -> tuple[frozenset[str], dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    """Which registrations can change the kernel that runs at a key of :data:`DISPATCH_KEYS`.

    The dispatcher computes the kernel of runtime key K for an operator
    (``OperatorEntry::computeDispatchTableEntryWithDebug``, aten/src/ATen/core/dispatch) from, in
    order: the kernel in use at K; the one at an alias key that includes K
    (CompositeExplicitAutogradNonFunctional, CompositeExplicitAutograd,
    CompositeImplicitAutograd[NestedTensor], Autograd), where whether *any* kernel is
    registered at a key of K's backend set (``getBackendKeySetFromAutograd``: CPU for
    AutogradCPU, the 53 Sparse/Quantized/Mkldnn/... keys for AutogradOther, empty for a
    non-autograd K; a kernel at the backend's functionality key, e.g. Dense, counts too)
    decides between them; then K's backend fallback. So three readings decide everything
    but the fallback: the kernels at K and at the alias keys including K (which, and in which
    order), and for each autograd key K whether its backend set holds a kernel at all.

    Returns (the keys whose kernels are compared, per key of DISPATCH_KEYS the alias keys
    that include it, per autograd key of DISPATCH_KEYS its backend keys). Worked out from
    this torch's own key sets, not a list."""
    direct = set(DISPATCH_KEYS)
    members = dict(torch._C.DispatchKey.__members__)
    aliases = {n: k for n, k in members.items() if torch._C._dispatch_is_alias_key(k)}
    alias_of: dict[str, set[str]] = {c: set() for c in DISPATCH_KEYS}
    backends_of: dict[str, frozenset[str]] = {}
    for c in sorted(DISPATCH_KEYS):
        if c not in members:  # a key this enum does not name (MkldnnCPU): its own lines only
            continue
        for a, ak in aliases.items():
            if torch._C._dispatch_is_included_in_alias(members[c], ak):
                alias_of[c].add(a)
                direct.add(a)
        bs = torch._C._dispatch_get_backend_keyset_from_autograd(members[c])
        names = set(_key_names(bs))
        if names:  # an autograd key
            # and every key the set holds by functionality (measured: aten::linear's AutogradCPU
            # kernel changes when a kernel is registered at Dense)
            names |= {n for n, k in members.items() if n != "Undefined" and n not in aliases and bs.has(k)}
            backends_of[c] = frozenset(names)
    return frozenset(direct), {c: frozenset(v) for c, v in alias_of.items()}, backends_of


if _dump is not None and _dump_table is not None:
    #: the keys whose kernels :class:`DispatchGuard` compares one by one (DISPATCH_KEYS and the
    #: alias keys including one of them), plus the operator's schema and where it was defined
    #: (``schema``, ``debug``); and per autograd key of DISPATCH_KEYS, the backend keys at which
    #: only whether a kernel is registered matters (see _registration_keys)
    REGISTRATION_KEYS, _ALIASES_OF, BACKEND_KEYS = _registration_keys()
    # a backend key compared kernel by kernel (CPU for AutogradCPU) shows any change of whether
    # it holds one there already: the summary needs only the others
    BACKEND_KEYS = {c: ks - REGISTRATION_KEYS for c, ks in BACKEND_KEYS.items() if ks - REGISTRATION_KEYS}
    REGISTRATION_KEYS = REGISTRATION_KEYS | {"schema", "debug"}
else:  # a torch without the dumps: the guard is off, not wrong
    REGISTRATION_KEYS, _ALIASES_OF, BACKEND_KEYS = frozenset(), {}, {}
_ANY_BACKEND = frozenset().union(*BACKEND_KEYS.values())

#: an operator the harness defines before the candidate exists, with no kernel at any key: its
#: computed table is exactly the backend fallbacks (which no registrations dump shows)
SENTINEL_OP = "solbench_guard::no_kernels"
_sentinel_lib: list = []


def _read_sentinel() -> str | None:
    """The computed lines (:func:`_exec_lines`) of :data:`SENTINEL_OP`; None when it is not
    defined (never, or its Library was destroyed: both dumps are then empty)."""
    try:
        if not _dump(SENTINEL_OP):
            return None
        return _exec_lines(_dump_table(SENTINEL_OP))
    except Exception:  # noqa: BLE001 - an unknown operator raises in some torch versions
        return None


def _sentinel_lines() -> str | None:
    """:func:`_read_sentinel`, defining :data:`SENTINEL_OP` first when this process has none
    (or it was removed since); None when it cannot be defined."""
    for _ in range(2):
        if not _sentinel_lib:
            try:
                lib = torch.library.Library("solbench_guard", "FRAGMENT")
                lib.define("no_kernels(Tensor x) -> Tensor")
            except Exception:  # noqa: BLE001 - defined by someone else: no fallback check
                return None
            _sentinel_lib.append(lib)  # the definition lives as long as the Library object
        lines = _read_sentinel()
        if lines is not None:
            return lines
        _sentinel_lib.clear()
    return None


def _exec_lines(table: str) -> str:
    """The lines of a computed dispatch table (``torch._C._dispatch_dump_table``: one line
    ``KEY: [fallthrough ]registered at FILE:LINE [kind]`` per runtime key) whose key is in
    :data:`DISPATCH_KEYS`, in table order, each after a newline."""
    return "".join(_KEY_LINE.findall("\n" + table))


def _by_key(lines: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in lines.splitlines() if ": " in line)


def _registrations(dump: str) -> dict[str, list[str]]:
    """What of a registrations dump decides the kernels at :data:`DISPATCH_KEYS`
    (:func:`_registration_keys`): per key of :data:`REGISTRATION_KEYS` (alias keys by their
    name, without ``[alias]``) the kernels listed there, the one in use first (``schema`` and
    ``debug``: the definition); per autograd key K of :data:`BACKEND_KEYS`, under
    ``"backends of K"``, the backend keys holding a kernel when there is one (compared by
    whether the list is empty: which key holds it, and which kernel, changes nothing at K)."""
    out: dict[str, list[str]] = {}
    held: set[str] = set()
    for m in _REG_LINE.finditer(dump):
        key = m.group(1)
        if key in REGISTRATION_KEYS:
            out.setdefault(key, []).append(m.group(3))
        if key in _ANY_BACKEND:
            held.add(f"{key}: {m.group(3)}")
    for c, keys in BACKEND_KEYS.items():
        at = sorted(h for h in held if h.split(": ", 1)[0] in keys)
        if at:
            out[f"backends of {c}"] = at
    return out


def _same(was: dict[str, list[str]], cur: dict[str, list[str]]) -> bool:
    """Two :func:`_registrations` readings that give the same kernels at DISPATCH_KEYS."""
    return was.keys() == cur.keys() and all(
        v == cur[k] for k, v in was.items() if not k.startswith("backends of "))


def _where(entry: str) -> str:
    """``registered at cand.py:12`` from a table entry (file name without its folder, the
    kernel kind dropped)."""
    m = _WHERE.search(entry)
    if m is None:
        return entry.rsplit(" [", 1)[0].split(" :: ", 1)[0]
    head = entry[:m.start()] + m.group(1)
    return f"{head}{os.path.basename(m.group(2))}{m.group(3)}"


class DispatchGuard:
    """Kernels of the PyTorch dispatcher, recorded before the candidate is imported and
    compared later.

    A candidate can register its own kernel for an existing operator at a runtime key
    (``torch.library.Library("aten", "IMPL").impl("copy_", fn, "CUDA")``, or
    ``TORCH_LIBRARY_IMPL(aten, CUDA, m)`` in a C++ extension), or a backend fallback for a
    key (``Library("_", "IMPL").fallback(fn, "CPU")``): every later call of that operator on
    such tensors runs the candidate's code, the harness's own calls after the clock stopped
    included (copy-out, poisoning, end marker). No Python object changes, so the identity
    snapshot and the mode-stack check see nothing; the dispatcher's own state does.

    What is compared: per existing operator of :data:`DISPATCH_NAMESPACES`, its
    registrations dump (``torch._C._dispatch_dump``: every kernel registered at every key,
    the shadowed ones included), and once the computed table of :data:`SENTINEL_OP`, an
    operator with no kernels, whose entries are therefore the backend fallbacks. The kernel
    that runs at a key of :data:`DISPATCH_KEYS` is a function of the kernels registered at
    :data:`REGISTRATION_KEYS` and of that key's fallback (:func:`_registration_keys`), so any
    change of it changes one of the two readings; the reverse need not hold (a second kernel
    registered under the first one's file and line changes the dump, not the computed table),
    which only adds findings. :meth:`changes` dumps again; an unchanged dump ends there, a
    changed one is compared on those keys only (a lazily registered Meta kernel or batching
    rule is accepted and the baseline updated). New operators and new namespaces are never
    looked at. Cost on a loaded 2-core CPU (torch 2.13, bench/guard_cost.py, 3240 operators):
    baseline about 0.1 s; ``full`` check 0.05-0.09 s (the computed tables: 0.1-0.17 s); the
    per-call check of :data:`POST_CLOCK_OPS` and the sentinel about 0.7 ms."""

    def __init__(self, namespaces: tuple[str, ...] = DISPATCH_NAMESPACES,
                 cheap: tuple[str, ...] = POST_CLOCK_OPS):
        self._base: dict[str, str] = {}
        self.cheap_ops: list[str] = []
        self._fallbacks: str | None = None
        if _dump is None or _dump_table is None:  # a torch without the dumps: the guard is off
            return
        self._fallbacks = _sentinel_lines()
        for n in torch._C._dispatch_get_all_op_names():
            if n.split("::", 1)[0] in namespaces:
                self._base[n] = _dump(n)
        self.cheap_ops = [n for n in cheap if n in self._base]

    def changes(self, full: bool = False, limit: int = 8) -> list[str]:
        """One line per changed (operator, key), e.g. ``dispatcher: aten::copy_ CPU kernel
        replaced (registered at cand.py:12)``, or backend fallback, e.g. ``dispatcher: backend
        fallback for CPU added (registered at cand.py:7)``; at most ``limit`` lines and a count
        of the rest. ``full``: every covered operator; otherwise :attr:`cheap_ops`."""
        out: list[str] = []
        n_more = 0

        def add(line: str) -> None:
            nonlocal n_more
            if len(out) >= limit:
                n_more += 1
            else:
                out.append(line)

        fb0 = self._fallbacks
        if fb0 is not None:
            fb = _read_sentinel()
            if fb is None:
                add(f"dispatcher: the guard's sentinel operator {SENTINEL_OP} was removed")
            elif fb != fb0:
                was, cur = _by_key(fb0), _by_key(fb)
                for key in sorted(set(was) | set(cur)):
                    a, b = was.get(key), cur.get(key)
                    if a == b:
                        continue
                    if b is None:
                        add(f"dispatcher: backend fallback for {key} removed (was {_where(a)})")
                    else:
                        add(f"dispatcher: backend fallback for {key} {'replaced' if a else 'added'} "
                            f"({_where(b)})")
        for name in (self._base if full else self.cheap_ops):
            base = self._base[name]
            try:
                d = _dump(name)
            except Exception:  # noqa: BLE001 - the operator was deregistered
                d = ""
            if d == base:
                continue
            was, cur = _registrations(base), _registrations(d)
            if _same(was, cur):
                # a key that cannot reach DISPATCH_KEYS (Meta, batching rules, a second backend
                # kernel where one was already): the new dump is the baseline
                self._base[name] = d
                continue
            for key in sorted(set(was) | set(cur)):
                a, b = was.get(key, []), cur.get(key, [])
                if a == b or (key.startswith("backends of ") and a and b):
                    continue
                if key.startswith("backends of "):
                    what = (f"registered at its backend key {_where(b[0])}" if b
                            else f"left at its backend keys (was {_where(a[0])})")
                    add(f"dispatcher: {name} {key[12:]} kernel changed: {'a' if b else 'no'} kernel {what}")
                elif key in ("schema", "debug"):
                    add(f"dispatcher: {name} redefined ({key} was {a[:1]}, now {b[:1]})"[:300])
                elif not b:
                    add(f"dispatcher: {name} {key} kernel removed (was {_where(a[0])})")
                else:
                    # "replaced" when a kernel ran at that key before: registered there or at an
                    # alias key including it, or the key's fallback
                    before = bool(a) or any(al in was for al in _ALIASES_OF.get(key, ())) \
                        or key in _by_key(fb0 or "")
                    # the same site printed again: a registration under a forged location
                    more = f"; {len(b)} kernels registered there, was {len(a)}" \
                        if a and _where(a[0]) == _where(b[0]) else ""
                    add(f"dispatcher: {name} {key} kernel {'replaced' if before else 'added'} "
                        f"({_where(b[0])}{more})")
        if n_more:
            out.append(f"dispatcher: {n_more} more (operator, key) entries changed")
        return out
