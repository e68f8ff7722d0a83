"""The parent <-> worker protocol (the wire): one typed model per request and per reply.

Shared by both sides, and imported by the worker: it imports nothing of the harness's parent
side (an import-linter contract, pyproject.toml ``worker-side``). :data:`REQUESTS` maps each
op to its request model: the parent sends only requests of a registered model
(:func:`request`), the worker parses every request's payload through the same model
before its handler reads it (:mod:`solbench.harness.worker`; a payload that does not match
is an error reply naming the op and the field, :class:`RequestInvalid`). The worker builds
its replies with the field names below; the parent parses **every** reply through
:func:`parse_reply` before reading any of it, so the rest of the parent only ever sees
validated, typed values (threats.md principle 7: what the
candidate's process says is data, never evidence; it is checked here for type and range,
and later cross-checked against what the parent itself observed).

Wire format (unchanged): requests ``(seq, op, payload)`` pickled parent -> worker; replies
``[seq, status, payload]`` as JSON worker -> parent (see :mod:`solbench.harness.process`).
``status`` is ``"ok"``, ``"error"`` (the candidate raised; :class:`ErrorReply`) or
``"compile_error"`` (build only; :class:`CompileErrorReply`).

Validation is strict (pydantic strict mode, unknown fields forbidden): a string where a
number is expected, a NaN or negative time, a list longer than any honest reply's, a missing
required field all raise :class:`ReplyInvalid` (a :class:`ProtocolError`),
which the evaluator turns into a RUNTIME_ERROR trace naming the op and the field; a guard
reply that fails validation is evidence of tampering (REWARD_HACK, check
``guard_reply_invalid``), since an honest worker always sends every guard field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class ProtocolError(Exception):
    """A reply did not match its request (sequence number), or came unasked."""


#: most items in any list of a reply that is bounded by the number of outputs or hooks
MAX_ITEMS = 256
#: most per-iteration values in a time_end reply (iterations of one timed block)
MAX_ITERS = 100_000
#: longest free-text field (messages, hook descriptions, type names)
MAX_TEXT = 20_000
#: largest time (ms) any reply may report: a day
MAX_MS = 86_400_000.0
#: a user-space address of a Linux process lies in [page size, 2^57): the lower half of a
#: 5-level-paging x86-64 or 52-bit-VA arm64 address space; 4-level paging stops at 2^47.
#: Anything else (the kernel's half, past 2^63 where ``os.preadv`` cannot even take it)
#: is no address an honest worker reports
MIN_ADDR, MAX_ADDR = 4096, 2**57

#: a returned strided output's element strides (``ReturnedOutput.strides``) are at most this
MAX_STRIDE = 2**40

Ms = Annotated[float, Field(ge=0.0, le=MAX_MS, allow_inf_nan=False)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
Hooks = Annotated[list[Text], Field(max_length=MAX_ITEMS)]


class _Msg(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


# ------------------------------------------------------------------------------- requests
class Request(_Msg):
    """Base of the requests; ``op`` names the worker operation."""

    op: str

    def payload(self) -> dict[str, Any]:
        """The dict the worker receives (every field but ``op``)."""
        d = dict(self.__dict__)
        d.pop("op")
        return d


class Ping(Request):
    op: Literal["ping"] = "ping"


class WarmProfiler(Request):
    op: Literal["warm_profiler"] = "warm_profiler"


class Build(Request):
    op: Literal["build"] = "build"
    solution: str  # Solution JSON
    init_args: list[Any]
    init_seed: int
    build_timeout_s: float


class Load(Request):
    """Slot buffers (CPU: shm descriptors, CUDA: tensors), and the parent's flush buffer
    (same kind) that the worker writes before every timed call."""

    model_config = ConfigDict(strict=False, extra="forbid", frozen=True, arbitrary_types_allowed=True)
    op: Literal["load"] = "load"
    slots: list[Any]
    flush: Any = None
    flush_bytes: int = 0


class Call(Request):
    """An untimed call on slot ``slot``. ``ordering``: with the stream-ordering evidence
    (CUDA: the gate kernel before the call, the shadow clone of the outputs and its
    comparison after the device is idle: ``stream_unordered``), which only the correctness
    rounds read; a warm-up call, whose outputs nobody judges, goes without it."""

    op: Literal["call"] = "call"
    slot: int
    scalars: dict[str, Any] = Field(default_factory=dict)
    ordering: bool = True


class Noop(Request):
    """The timed path without the call; ``dps``: the path to measure (True: destination
    passing, no copy-out; False: the copy-out of returned outputs; None: the worker's own);
    ``flush``: with the cache flush (False: the CPU's held path, where the parent writes
    the flush itself with the worker stopped, ``freeze.parent_flush``)."""

    op: Literal["noop"] = "noop"
    slot: int | None = 0
    dps: bool | None = None
    flush: bool = True


class TimeBegin(Request):
    op: Literal["time_begin"] = "time_begin"
    cupti: bool = True
    #: how the session's markers are found (harness.timing.MARKER_METHODS)
    markers: Literal["ranges", "streams"] = "ranges"


class TimeIter(Request):
    """One timed call; ``flush``: the worker flushes the cache first (False on the CPU's
    held path, where the parent wrote it with the worker stopped, ``freeze.parent_flush``)."""

    op: Literal["time_iter"] = "time_iter"
    slot: int
    scalars: dict[str, Any] = Field(default_factory=dict)
    i: int
    flush: bool = True
    #: CPU, non-DPS: the worker does not copy the returned outputs into the slot; it
    #: reports their addresses and the parent copies them from the stopped worker's memory
    #: (outside the timed window, :func:`solbench.harness.peek.parent_copy_out`)
    parent_copy: bool = False
    #: False only for the trusted reference's calls on CUDA: the worker skips its interposition
    #: check after the call (the dispatcher dumps of guards.POST_CLOCK_OPS, about 0.7-0.9 ms a
    #: call on an H100 host), whose result the parent reads for the candidate only. Never on the
    #: CPU, where the sample is the parent's window less a no-op baseline that includes the check
    check: bool = True
    #: False only for the trusted reference's calls on CUDA: the worker leaves the returned
    #: outputs where they are (no copy into the slot, no sync, no poisoning of the returned
    #: buffers): nothing reads a reference's timed outputs, and its sample is device time,
    #: which ends at the end marker before any copy-out. The candidate's calls keep it on every
    #: call, verified or not, so its buffers tell it nothing about which calls were verified
    copy_out: bool = True


class GuardTable(Request):
    """Where the worker's guarded names live (harness/memguard.py); asked before the build."""

    op: Literal["guard_table"] = "guard_table"


class TimeEnd(Request):
    op: Literal["time_end"] = "time_end"


class Guards(Request):
    """The worker's integrity checks. ``full``: the dispatcher check reads every covered
    operator (guards.DispatchGuard, about 60 ms on an H100 host); otherwise only the operators
    the worker itself runs around a call (POST_CLOCK_OPS, checked after every call anyway) and
    the backend fallbacks. The evaluator asks for the full read at a workload's last check
    (docs/integrity.md, "One full dispatcher read per workload")."""

    op: Literal["guards"] = "guards"
    full: bool = True


class Exit(Request):
    op: Literal["exit"] = "exit"


#: op -> its request model: the one list both sides read (the parent sends only these,
#: :func:`request`; the worker parses each payload through its op's model, and has one
#: handler per model)
REQUESTS: dict[str, type[Request]] = {m.model_fields["op"].default: m for m in (
    Ping, WarmProfiler, GuardTable, Build, Load, Call, Noop, TimeBegin, TimeIter, TimeEnd, Guards, Exit)}


class RequestInvalid(ValueError):
    """Worker side: a request whose op is not in :data:`REQUESTS`, or whose payload does not
    match its op's model (type, missing or unknown field). Its message names the op and the
    field; the worker answers it as an error reply, like any failed op."""

    def __init__(self, op: Any, reason: str):
        self.op = op
        self.reason = reason
        super().__init__(f"malformed {str(op)[:40]!r} request: {reason}")


# -------------------------------------------------------------------------------- replies
class ErrorReply(_Msg):
    """The candidate raised (or the op failed) in the worker."""

    type: Annotated[str, Field(max_length=500)]
    message: Text
    traceback: Text = ""


class CompileErrorReply(_Msg):
    message: Text


class PingReply(_Msg):
    pid: Annotated[int, Field(gt=0)]


class WarmProfilerReply(_Msg):
    ms: Ms


class BuildReply(_Msg):
    languages: Annotated[list[Annotated[str, Field(max_length=100)]], Field(max_length=32)]
    language: Annotated[str, Field(max_length=100)] | None = None
    entry_kind: Literal["class", "function"]
    module_path: Text | None = None
    #: C++ family: where the module came from (build.LAST_BUILD_SOURCE) and its build key
    build_cache: Literal["shared", "private", "built"] | None = None
    build_key: Annotated[str, Field(max_length=64)] | None = None


class EmptyReply(_Msg):
    pass


class ReturnedOutput(_Msg):
    """What the worker saw returned for one output (non-DPS)."""

    type: Annotated[str, Field(max_length=500)]
    plain: bool
    shape: Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=64)] | None
    dtype: Annotated[str, Field(max_length=64)] | None
    device: Annotated[str, Field(max_length=64)] | None = None
    #: the address of the output's first byte in the worker (a contiguous CPU tensor of the
    #: declared shape and dtype, left for the parent to copy: ``TimeIter.parent_copy``);
    #: None when the worker copied it itself or did not copy it
    addr: Annotated[int, Field(ge=MIN_ADDR, lt=MAX_ADDR)] | None = None
    #: element strides of a non-contiguous output left for the parent to copy (its first
    #: element at ``addr``; the span they cover is at most :func:`~.shm.max_span` of its elements);
    #: None for a contiguous one
    strides: Annotated[list[Annotated[int, Field(ge=0, le=MAX_STRIDE)]], Field(max_length=64)] | None = None

    @model_validator(mode="after")
    def _plain_tensor_has_shape(self):
        # the worker fills shape and dtype for every plain tensor; the parent compares them
        # with the definition's, so a plain output without them is not a reply an honest
        # worker makes
        if self.plain and (self.shape is None or self.dtype is None):
            raise ValueError("a plain tensor output needs its shape and dtype")
        return self


Returned = Annotated[list[ReturnedOutput], Field(max_length=MAX_ITEMS)]


class CallReply(_Msg):
    returned: Returned | None
    count_mismatch: bool = False
    interposition: Hooks = Field(default_factory=list)
    stream_unordered: Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=MAX_ITEMS)] | None = None
    stream_changed: bool | None = None


class NoopReply(_Msg):
    host_ms: Ms
    interposition: Hooks = Field(default_factory=list)


class TimeBeginReply(_Msg):
    cupti: bool
    reason: Text | None = None
    #: CUDA: "ok", or why the persisting-L2 reset (harness/l2.py) did not run; None on the CPU
    l2_reset: Text | None = None


class TimeIterReply(_Msg):
    host_ms: Ms
    event_ms: Ms | None
    returned: Returned | None = None
    count_mismatch: bool = False
    interposition: Hooks = Field(default_factory=list)


PerIter = Annotated[list[Ms], Field(max_length=MAX_ITERS)]


class TimeEndReply(_Msg):
    """Device figures of one timed block (CUDA with CUPTI); ``cupti`` False otherwise."""

    cupti: bool
    reason: Text | None = None
    note: Text | None = None
    span_ms: PerIter = Field(default_factory=list)
    kernel_sum_ms: PerIter = Field(default_factory=list)
    n_activities: Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=MAX_ITERS)] = Field(default_factory=list)
    kernel_sets: Annotated[list[Annotated[list[Annotated[str, Field(max_length=2000)]], Field(max_length=4096)]],
                           Field(max_length=MAX_ITERS)] = Field(default_factory=list)
    late_ms: PerIter | None = None
    late_all_ms: PerIter | None = None


#: one backend flag's value (a bool, a precision name, a small number) and its name, bounded
#: like every other field: a reply whose flags hold a megabyte string is no worker's
Flag = bool | Annotated[int, Field(ge=-(2**63), lt=2**63)] | Annotated[float, Field(allow_inf_nan=False)] \
    | Annotated[str, Field(max_length=200)] | None
FlagName = Annotated[str, Field(max_length=200)]


class GuardsReply(_Msg):
    """The worker's own integrity checks. Every field is required: an honest worker always
    sends all four, so a reply without one was rewritten (REWARD_HACK)."""

    changed: Hooks
    interposition: Hooks
    flags: Annotated[dict[FlagName, Flag], Field(max_length=MAX_ITEMS)]
    flags0: Annotated[dict[FlagName, Flag], Field(max_length=MAX_ITEMS)]


Addr = Annotated[int, Field(ge=0, lt=MAX_ADDR)]


class GuardEntry(_Msg):
    name: Annotated[str, Field(max_length=500)]
    ns: Addr  # the dict holding the name (a module or type dict)
    key: Addr
    value: Addr
    code: Addr | None = None
    defaults: Addr | None = None
    #: the type dicts of the classes before the definer in the owner's MRO (a name set there
    #: shadows this one) and the name's hash in the worker
    shadows: Annotated[list[Addr], Field(max_length=16)] = Field(default_factory=list)
    hash: Annotated[int, Field(ge=-(2**63), lt=2**63)] | None = None


Hash = Annotated[int, Field(ge=-(2**63), lt=2**63)]
Name = Annotated[str, Field(max_length=500)]


class ClassEntry(_Msg):
    """A class of an instance's type's MRO (:func:`~.memguard.instance_table`)."""

    name: Name
    cls: Addr
    meta: Addr
    mro_classes: Annotated[list[Addr], Field(max_length=16)]
    ns: Addr  # its type dict
    items: Annotated[list[Annotated[list[Addr], Field(min_length=2, max_length=2)]], Field(max_length=4096)]


#: most pinned attributes one reply-path object lists (the worker's: worker._PINNED)
MAX_PINNED = 32


class InstanceEntry(_Msg):
    """An object of the worker's reply path (:func:`~.memguard.instance_table`)."""

    name: Name
    obj: Addr
    ns: Addr  # its __dict__
    methods: Annotated[list[Name], Field(max_length=512)]
    method_hashes: Annotated[list[Hash], Field(max_length=512)]
    pinned: Annotated[list[Name], Field(max_length=MAX_PINNED)]
    pinned_hashes: Annotated[list[Hash], Field(max_length=MAX_PINNED)]
    pinned_values: Annotated[list[Addr], Field(max_length=MAX_PINNED)]
    type: Addr | None = None
    classes: Annotated[list[ClassEntry], Field(max_length=16)] | None = None


class GuardTableReply(_Msg):
    entries: Annotated[list[GuardEntry], Field(max_length=4096)]
    #: the objects the reply path goes through, read by the parent for instance attributes
    instances: Annotated[list[InstanceEntry], Field(max_length=16)] | None = None
    #: the backend flags before any candidate code: the parent keeps them as the baseline, so a
    #: candidate that rewrites the worker's own ``flags0`` later changes nothing
    flags0: Annotated[dict[FlagName, Flag], Field(max_length=MAX_ITEMS)] | None = None


#: op -> model of its "ok" reply
OK_REPLIES: dict[str, type[_Msg]] = {
    "ping": PingReply, "warm_profiler": WarmProfilerReply, "build": BuildReply, "load": EmptyReply,
    "call": CallReply, "noop": NoopReply, "time_begin": TimeBeginReply, "time_iter": TimeIterReply,
    "time_end": TimeEndReply, "guards": GuardsReply, "exit": EmptyReply, "guard_table": GuardTableReply,
}


class ReplyInvalid(ProtocolError):
    """A worker reply that does not match its op's model (type, range, length, missing or
    unknown field). ``op`` and ``reason`` (pydantic's first errors, one line) are kept."""

    def __init__(self, op: str, status: str, reason: str):
        self.op = op
        self.status = status
        self.reason = reason
        super().__init__(f"malformed {op!r} reply ({status}): {reason}")


def _reason(e: ValidationError, limit: int = 3, whole: str = "<reply>") -> str:
    parts = []
    for err in e.errors()[:limit]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or whole
        got = repr(err.get("input"))[:60]
        parts.append(f"{loc}: {err.get('msg')} (got {got})")
    more = len(e.errors()) - limit
    return "; ".join(parts) + (f"; {more} more" if more > 0 else "")


def parse_reply(op: str, status: str, payload: Any) -> _Msg:
    """Validate one reply. Returns the ``ok`` model of ``op``, :class:`ErrorReply` or
    :class:`CompileErrorReply`. Raises :class:`ReplyInvalid` for anything else."""
    if status == "ok":
        model = OK_REPLIES.get(op)
        if model is None:
            raise ReplyInvalid(op, status, "no such op")
    elif status == "error":
        model = ErrorReply
    elif status == "compile_error" and op == "build":
        model = CompileErrorReply
    else:
        raise ReplyInvalid(op, str(status)[:40], "unknown reply status")
    try:
        return model.model_validate(payload, strict=True)
    except ValidationError as e:
        raise ReplyInvalid(op, status, _reason(e)) from None


class ReplyContradiction(ReplyInvalid):
    """A well-formed reply that is impossible for the worker that sent it, given what the
    parent knows of that worker (its device): recorded on the handle, which makes it a
    ``reply_contradiction`` finding (REWARD_HACK) of the workload."""


def contradiction(device: str, rep: _Msg) -> str | None:
    """Why ``rep`` cannot come from an honest worker on ``device``, or None. A CPU worker has
    no CUDA events, no CUPTI and no stream evidence (the worker's own code makes those only
    on CUDA, whatever the candidate does; a returned CUDA tensor is the candidate's and is
    judged as an output, not here)."""
    if device.split(":")[0] != "cpu":
        return None
    if getattr(rep, "cupti", False):
        return "CUPTI figures from a CPU worker"
    if getattr(rep, "event_ms", None) is not None:
        return "a CUDA-event time from a CPU worker"
    if getattr(rep, "stream_unordered", None) is not None or getattr(rep, "stream_changed", None) is not None:
        return "CUDA stream evidence from a CPU worker"
    return None


def request_invalid(op: Any, e: ValidationError) -> RequestInvalid:
    """The :class:`RequestInvalid` of a payload of ``op`` that failed its model's validation
    (pydantic's first errors, one line: field, message, the value received)."""
    return RequestInvalid(op, _reason(e, whole="<payload>"))


def request(handle, req: Request, timeout_s: float) -> _Msg:
    """Send ``req`` to the worker ``handle`` and return its parsed reply (raises WorkerDied,
    WorkerTimeout, ProtocolError, ReplyInvalid or ReplyContradiction; the last is also
    recorded in ``handle.contradictions``). ``req`` must be of its op's model in
    :data:`REQUESTS` (TypeError otherwise): the worker parses it through that model."""
    if REQUESTS.get(req.op) is not type(req):
        raise TypeError(f"{type(req).__name__} (op {req.op!r}) is not the registered request model of its op")
    status, payload = handle.request(req.op, req.payload(), timeout_s=timeout_s)
    rep = parse_reply(req.op, status, payload)
    why = contradiction(getattr(handle, "device", "cuda"), rep)
    if why is not None:
        if isinstance(getattr(handle, "contradictions", None), list):
            handle.contradictions.append({"op": req.op, "reason": why})
        raise ReplyContradiction(req.op, status, why)
    return rep
