"""One workload's evaluation state, and the evidence the parent gathers around each call.

:class:`WorkloadRun` carries what the correctness rounds (:mod:`.rounds`) and the timed
blocks (:mod:`.timed`) share: the worker, the slot pool, the input seeds, the findings so far,
the call limits and the phase clock.

Evidence here is the parent's own (threats.md principle 7): new processes of the worker's
read from /proc before and after **every** call, OS threads, the parsed worker replies
cross-checked against the parent's round-trip window. The worker's self-reports (its
interposition and guard tripwires) are recorded too, as data that can only add findings.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .. import limits, paths
from ..inputs.seeds import InputSeeds
from ..proc import procfs
from ..spec.problem import Problem
from ..spec.trace import Finding, Status
from ..spec.workload import Workload
from . import guards, protocol
from .checks import add_once, finding, has
from .config import EvalConfig
from .process import ProtocolError, WorkerDied, WorkerHandle, WorkerTimeout, stray_children, unregistered_children
from .slots import SlotPool

#: seconds a thread seen right after a timed call gets to exit before it counts
THREAD_GRACE_S = 0.005
#: seconds the last timed call's new threads get, once the stopped worker is resumed at a
#: block's end, to finish exiting (polled: honest ones go within a millisecond or two). What
#: a thread does then cannot change that call's outputs, already copied while it was stopped,
#: nor any later call's (new inputs, a new flush); a thread alive after it counts. On a loaded
#: 2-core host a thread joined in the call but stopped before its exit ended took more than the
#: 5 ms of THREAD_GRACE_S to get a CPU (an honest per-call pool flagged, once, in a full test run)
THREAD_END_GRACE_S = 0.05

#: a reported time may exceed the parent's window around the same call by this much (ms)
#: plus 5% (clock granularity; both clocks are CLOCK_MONOTONIC on Linux)
WINDOW_SLACK_MS = 0.5


def outlived_a_call(pid: int, pending: dict[int, int | None], now: set[int],
                    run_ns: Callable[[int, int], int | None] | None = None) -> set[int]:
    """The threads of ``pending`` (new after the previous timed call: tid -> its CPU time in
    ns then, :func:`~solbench.proc.procfs.thread_run_ns`, None if unread) that are still
    alive after this call (``now``) and ran during it: background threads. A thread that got
    no CPU in the whole call did nothing in it (on the CPU every process of the worker is
    stopped outside the calls, so a call is its only time to run): an honest pool's thread,
    joined and stopped before its exit ended, starved by a loaded host through the next
    call too, is left pending (it gets the block's end grace, THREAD_END_GRACE_S). A CPU time
    that cannot be read either side counts as run, unless the thread is gone by then (it
    exited between the listing and the read)."""
    run_ns = run_ns or procfs.thread_run_ns
    out = set()
    for t, r0 in pending.items():
        if t in now:
            r1 = run_ns(pid, t)
            if r1 is None and not os.path.exists(f"/proc/{pid}/task/{t}"):
                continue
            if r0 is None or r1 is None or r1 != r0:
                out.add(t)
    return out


class CandidateError(Exception):
    """The candidate failed in a way that ends the workload (message says where)."""


@dataclass
class WorkloadRun:
    problem: Problem
    cfg: EvalConfig
    w: Workload
    j: int
    h: WorkerHandle
    seeds: InputSeeds
    phases: dict[str, float]
    slots: SlotPool | None = None
    tol: Any = None
    findings: list[Finding] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    flush_bytes: int = 0
    #: limit (s) of the calls after the first (set once the reference's time is known)
    call_timeout_s: float = 0.0
    #: slowest reference call the parent ran for this workload (s)
    reference_call_s: float = 0.0
    flags0: dict | None = None
    #: (round name, per output (candidate, reference) error vs the fp64 truth or None) of
    #: each judged round outside the stress rounds: the output evidence of a precision
    #: downgrade when the backend flags were lowered (:func:`precision_check`)
    truth_errors: list = field(default_factory=list)
    #: the inputs the trusted reference itself writes (bits differ after its call on round
    #: 0's values, seen by the parent): the candidate may write them and their contents are
    #: judged like outputs; writing any other input is ``input_mutation``. Decided once per
    #: workload, by :func:`~.rounds.run_rounds`; recorded as ``correctness.extra["inplace_inputs"]``
    inplace_inputs: list[str] = field(default_factory=list)
    #: the outputs of earlier passing calls, for ``cached_output`` (:mod:`.replay`)
    replay: Any = None
    #: the worker's descendants at the last :func:`process_check` (None before one)
    kids_seen: set[int] | None = None
    #: the pid cursor (:func:`~solbench.proc.procfs.pid_cursor`) read just before the last
    #: walk that found no process of the candidate's anywhere (:func:`process_check`); None
    #: when there is no such walk, or the cursor cannot be trusted for this worker
    clean_mark: int | None = None
    #: (iteration, its input set on the CPU) of the first verified timed iteration that
    #: failed, asked for again after the timed loop (:func:`~.recheck.ask_again`)
    timed_miss: tuple[int, dict] | None = None

    def __post_init__(self):
        from .replay import ReplayWatch

        if self.replay is None:
            self.replay = ReplayWatch()

    def tick(self, key: str, t0: float) -> float:
        """Add the seconds since ``t0`` to sub-phase ``key`` of ``phases_s``; return now."""
        now = time.perf_counter()
        self.phases[key] = round(self.phases.get(key, 0.0) + now - t0, 4)
        return now

    def hack(self) -> bool:
        return any(f.severity == "hack" for f in self.findings)


def interposition_finding(what: list[str], when: str) -> Finding:
    return finding("interposition",
                   f"{when}: the candidate left hooks that run its code inside the harness's own steps: {what}",
                   {"hooks": what})


def interposition_seen(rep: Any, findings: list[Finding] | None, when: str) -> None:
    """Record the worker's ``interposition`` report of one reply (the first one only)."""
    hooks = getattr(rep, "interposition", None)
    if hooks and findings is not None:
        add_once(findings, interposition_finding(list(hooks), when))


def window_check(run: WorkloadRun, when: str, reported: dict[str, float | None], window_ms: float) -> None:
    """A time the worker reports for a call cannot exceed the parent's own round-trip
    window around that call: a reply that says so was made up (REWARD_HACK)."""
    for name, ms in reported.items():
        if ms is not None and ms > 1.05 * window_ms + WINDOW_SLACK_MS:
            add_once(run.findings, finding(
                "reported_time_contradiction",
                f"{when}: the worker reported {name} = {ms:.4g} ms for a call the parent saw "
                f"complete within {window_ms:.4g} ms",
                {"reported": name, "reported_ms": ms, "parent_window_ms": window_ms}))


def _cursor_covers(h: WorkerHandle) -> bool:
    """Whether every process or thread this worker's candidate can start moves the pid
    cursor (:func:`~solbench.proc.procfs.pid_cursor`): the cursor moves on this host, and the
    candidate holds no capability over this process's user namespace, so it cannot pick its
    own ids (``clone3``'s ``set_tid``, which leaves the cursor where it was): it runs in a user
    namespace of its own, or as a host uid other than root. Unsandboxed, never."""
    sb = getattr(h, "sandbox", None) or {}
    mode = sb.get("mode")
    return (mode == "userns" or (mode == "uid" and sb.get("uid") not in (None, 0))) \
        and procfs.pid_cursor_moves()


def _nothing_started(run: WorkloadRun) -> bool:
    """True when no task has been created on this host since the last clean walk
    (:attr:`WorkloadRun.clean_mark`): the candidate then has no process anywhere, since it had
    none at that walk and every new one moves the cursor."""
    return run.clean_mark is not None and procfs.pid_cursor() == run.clean_mark


def kids_before(run: WorkloadRun) -> set[int]:
    """The worker's descendants now, the baseline of a call: none without a walk when
    nothing was started since the last clean walk (:func:`_nothing_started`)."""
    if _nothing_started(run):
        return set()
    return procfs.descendants(run.h.pid)


def kids_since_last_check(run: WorkloadRun) -> set[int]:
    """The baseline of a warm-up or timed call: the worker's descendants at the last
    :func:`process_check` (a process started since counts as new: the worker ran free in
    between), a fresh walk only before any check."""
    return run.kids_seen if run.kids_seen is not None else kids_before(run)


def process_check(run: WorkloadRun, before: set[int], when: str, late: bool) -> bool:
    """New processes after one call: a descendant of the worker that was not there before the
    call and is still alive after it (not an allowed compile/runtime helper; ``late``: no
    compiler or shell is allowed, the calls are past compiling), or any process re-parented to
    the harness. Checked after every call, so a process the candidate starts in each call is
    seen in each call, whatever the workload's length. Returns True when one was found.
    The worker's descendants it walked are left in ``run.kids_seen`` (the next timed call's
    ``before``: :meth:`~.timed.TimedBlocks._timed_call`).

    The walks (every thread's ``children`` file of the worker, of this process and of the
    sandbox's init: about 0.5 ms a call) are skipped when the last walk found no process of
    the candidate's anywhere and the pid cursor has not moved since the read just before it
    (:func:`_nothing_started`): no process can exist now that did not then. That reading
    is stricter than a walk, which misses a process started and ended within the call."""
    if _nothing_started(run):
        run.kids_seen = set()
        return False
    mark = procfs.task_mark() if _cursor_covers(run.h) else None
    run.clean_mark = None
    run.kids_seen = procfs.descendants(run.h.pid)
    strays = unregistered_children()
    extra = guards.unexplained_children(run.h.pid, before, late=late, desc=run.kids_seen) + stray_children(strays)
    # a process in the sandbox outside the worker's tree is never an honest helper
    outside = run.h.outside_worker_tree()
    extra += [{"pid": pid, "outside_worker_tree": True, "cmdline": procfs.cmdline(pid)[:200]}
              for pid in outside]
    if extra:
        add_once(run.findings, finding("child_process", f"the worker started processes {when}: {extra[:3]}",
                                       {"processes": extra[:20], "when": when}))
        return True
    if mark is not None and not run.kids_seen and not strays and not outside \
            and procfs.task_mark() == mark:
        # nothing of the candidate's exists, an allowed helper included (one could be
        # re-parented later without a new id), and the walk saw a still host: the children
        # files are read one thread at a time, and a process whose parent exits and is reaped
        # between two of those reads moves (without a new id) from a file not yet read to one
        # already read, unseen (red team 30: a grandchild hidden so in 1 of 6 tries). Such a
        # reap lowers the task count; any new task moves the cursor. The next check may then
        # rely on the cursor
        run.clean_mark = mark[0]
    return False


def returned_issue(run: WorkloadRun, rep: protocol.CallReply | protocol.TimeIterReply):
    """(status, message) when the returned outputs (non-DPS) are not what the definition
    declares, else None; a tensor subclass or proxy is REWARD_HACK (``non_plain_output``)."""
    ret = rep.returned
    slots = run.slots
    if ret is None:
        return None
    if rep.count_mismatch:
        return (Status.INCORRECT_SHAPE, f"returned {len(ret)} outputs, expected {len(slots.out_specs)}")
    for name, m, (shape, dt) in zip(slots.names_out, ret, slots.out_specs):
        if not m.plain:
            if m.shape is not None:  # a tensor subclass / lazy proxy
                add_once(run.findings, finding("non_plain_output",
                                               f"output {name!r} is a {m.type}, not a plain torch.Tensor",
                                               m.model_dump()))
                return (Status.REWARD_HACK, f"output {name!r} is {m.type}")
            return (Status.INCORRECT_SHAPE, f"output {name!r} is {m.type}, not a tensor")
        if tuple(m.shape) != tuple(shape or ()):
            return (Status.INCORRECT_SHAPE, f"output {name!r} has shape {tuple(m.shape)}, expected {tuple(shape or ())}")
        if m.dtype != str(dt).replace("torch.", ""):
            return (Status.INCORRECT_DTYPE, f"output {name!r} has dtype {m.dtype}, expected {dt}")
        want = torch.device(run.cfg.device).type
        if m.device is not None and m.device != want:
            # the tensor type (torch.cuda.FloatTensor vs torch.FloatTensor) is wrong
            return (Status.INCORRECT_DTYPE, f"output {name!r} is on {m.device}, expected {want}")
    return None


def memguard_baseline(h: WorkerHandle) -> None:
    """Before the build (no candidate code yet): ask the worker where its guarded names live
    (:mod:`.memguard`) and read them once from its memory; sets ``h.memguard`` to the table
    when that read finds every one in place, else None with ``h.memguard_note`` saying why
    (this interpreter's layout, /proc/<pid>/mem not readable): the parent's check is then
    off for this worker and the trace says so (``guards_unverified``)."""
    from . import memguard
    from .peek import open_worker_memory

    h.memguard, h.memguard_note = None, None
    if not paths.memguard_on():
        # the parent's own switch (as SOLBENCH_SANDBOX): tests of the second line of defence
        # (the worker's snapshot, the timing cross-checks) that this read would pre-empt
        h.memguard_note = "turned off (SOLBENCH_MEMGUARD=off)"
        return
    try:
        rep = protocol.request(h, protocol.GuardTable(), timeout_s=limits.GUARDS_S)
    except (WorkerDied, WorkerTimeout, ProtocolError) as e:
        h.memguard_note = f"the worker did not list its guarded names: {e}"
        return
    if not isinstance(rep, protocol.GuardTableReply):
        h.memguard_note = "the worker did not list its guarded names"
        return
    # the flags as they were before any candidate code: the baseline the parent judges by
    h.flags0 = dict(rep.flags0) if rep.flags0 is not None else None
    if not memguard.SUPPORTED:
        h.memguard_note = f"no CPython layout known for {sys.version.split()[0]}"
        return
    entries = [e.model_dump() for e in rep.entries]
    fd = open_worker_memory(h.pid)
    if fd is None:
        h.memguard_note = f"/proc/{h.pid}/mem is not readable by the parent"
        return
    insts = [i.model_dump() for i in rep.instances or ()]
    try:
        bad = memguard.changed(fd, entries)
        try:
            if memguard.instances_changed(fd, insts):
                insts = []  # not laid out as read: the class reads stand alone
        except OSError:
            insts = []
    except OSError as e:
        bad = [f"unreadable: {e}"]
    finally:
        os.close(fd)
    if bad or not entries:
        h.memguard_note = f"the layout read does not match this interpreter ({bad[:3]})"
        return
    h.memguard, h.memguard_instances = entries, insts


def memguard_findings(run: WorkloadRun, when: str) -> None:
    """The parent's own read of the worker's guarded names (:mod:`.memguard`): one replaced
    is ``harness_patch`` whatever the worker's own reply says (a candidate that rewrites the
    reply cannot rewrite the parent's read); ``guards_unverified`` (advisory) once when the
    read is off for this worker."""
    from . import memguard
    from .peek import open_worker_memory

    h = run.h
    entries = getattr(h, "memguard", None)
    if entries is None:
        note = getattr(h, "memguard_note", None) or "not read for this worker"
        add_once(run.findings, finding("guards_unverified",
                                       f"the parent did not read the worker's guarded names itself: {note}",
                                       {"reason": note}))
        return
    fd = open_worker_memory(h.pid)
    if fd is None:
        bad = [f"/proc/{h.pid}/mem no longer readable"]
    else:
        try:
            bad = memguard.changed(fd, entries) + memguard.instances_changed(
                fd, getattr(h, "memguard_instances", None) or [])
        except OSError as e:  # the worker's memory no longer reads as its dicts did
            bad = [f"the guarded namespaces no longer read as dicts: {e}"]
        finally:
            os.close(fd)
    if bad:
        add_once(run.findings, finding(
            "harness_patch", f"timer/sync/harness functions replaced {when} (read by the parent in the "
                             f"worker's memory): {bad[:8]}", {"changed": bad[:64], "seen_by": "parent"}))


def guard_findings(run: WorkloadRun, when: str, full: bool = True) -> None:
    """The worker's own integrity checks (snapshot, interposition, backend flags), then the
    parent's process check. The reply is the candidate's data: a missing or ill-typed field,
    or starting flags that changed between replies, are REWARD_HACK (``guard_reply_invalid``).
    ``full=False``: the worker's dispatcher check reads only the operators it runs itself
    around a call (:class:`~.protocol.Guards`); for a check that another, full one follows in
    the same workload."""
    h, findings = run.h, run.findings
    memguard_findings(run, when)  # first: the parent's own read, before any reply of the worker's
    try:
        g = protocol.request(h, protocol.Guards(full=full), timeout_s=limits.GUARDS_S)
    except protocol.ReplyInvalid as e:
        add_once(findings, finding("guard_reply_invalid", f"{when}: {e}", {"reason": e.reason}))
        return
    except (WorkerDied, WorkerTimeout, ProtocolError) as e:
        add_once(findings, finding("guard_check_failed",
                                   f"the worker did not answer the integrity check {when}: {e}"))
        return
    if isinstance(g, protocol.ErrorReply):
        add_once(findings, finding("guard_reply_invalid", f"{when}: the integrity check raised {g.type}: "
                                   f"{g.message}", {"type": g.type}))
        return
    if run.flags0 is None:
        # the parent's copy taken before the build (memguard_baseline), else the first reply
        run.flags0 = getattr(h, "flags0", None) or dict(g.flags0)
    if dict(g.flags0) != run.flags0:
        add_once(findings, finding("guard_reply_invalid",
                                   f"{when}: the worker's starting backend flags changed between replies",
                                   {"before": run.flags0, "now": dict(g.flags0)}))
    if g.changed:
        add_once(findings, finding("harness_patch", f"timer/sync/harness functions replaced {when}: {list(g.changed)}",
                                   {"changed": list(g.changed)}))
    interposition_seen(g, findings, when)
    precision_check(run, run.flags0, dict(g.flags), when)
    extra = guards.unexplained_children(h.pid, getattr(h, "base_kids", set()),
                                        late="timing" in when) + stray_children()
    if extra:
        add_once(findings, finding("child_process", f"the worker started processes {when}: {extra}",
                                   {"processes": extra}))


def precision_check(run: WorkloadRun, f0: dict, f1: dict, when: str) -> None:
    """Backend precision flags the candidate changed, judged with the output evidence
    (:func:`solbench.harness.precision.precision_finding`): flags lowered and some round's
    error against the fp64 truth beyond the declared-precision reference's is
    ``precision_downgrade`` (REWARD_HACK), whether that round passed or failed its
    tolerance; flags lowered alone are ``backend_flags`` (advisory: the flag may touch no op
    the candidate runs, e.g. allow_tf32 in an FFT kernel); a change toward higher precision
    (allow_tf32 off, matmul precision "highest") is no finding."""
    from ..spec.dtypes import to_torch
    from .precision import is_fp32_work, precision_finding

    findings = run.findings
    if f0 == f1 or has(findings, "precision_downgrade") or has(findings, "backend_flags"):
        return
    defn = run.problem.definition
    fp32 = is_fp32_work([to_torch(s.dtype) for s in defn.inputs.values()],
                        [to_torch(s.dtype) for s in defn.outputs.values()])
    dts = [to_torch(o.dtype) for o in defn.outputs.values()]
    # the output with the largest error relative to its limit, over the judged rounds
    best = None
    for where, errs in run.truth_errors:
        for i, te in enumerate(errs):
            if te is None:
                continue
            pf = precision_finding(flags_before=f0, flags_after=f1, fp32_work=fp32,
                                   allow_tf32=bool(defn.allow_tf32),
                                   dtype=dts[i] if i < len(dts) else torch.float32,
                                   candidate_error=te[0], reference_error=te[1])
            # output evidence counts here only beside lowered flags: alone, a passing round
            # already made it a finding (Oracle.judge), and a failing one is just incorrect
            if pf is not None and pf.severity == "hack" and "flags" in pf.basis and best is None:
                best = (where, pf, i)
    if best is None:
        pf = precision_finding(flags_before=f0, flags_after=f1, fp32_work=fp32,
                               allow_tf32=bool(defn.allow_tf32))
        best = (None, pf, None) if pf is not None else None
    if best is None:
        return
    where, pf, i = best
    ev = {"before": f0, "after": f1, "basis": list(pf.basis), **pf.evidence}
    if i is not None:
        ev["output"] = i
    if pf.severity == "hack":
        findings.append(finding("precision_downgrade", f"{where or when}: {pf.message}", ev))
    else:
        findings.append(finding("backend_flags", f"{when}: {pf.message}", ev))


def kernel_precision_check(problem, findings: list[Finding], cand_sets: list, ref_sets: list) -> Finding | None:
    """Reduced-precision device kernels in the candidate's timed calls for fp32 work
    (:func:`solbench.harness.precision.precision_finding`'s kernel evidence): kernels whose
    CUPTI names show TF32, 16-bit or fp8 math (``cutlass_80_tensorop_s1688gemm_*``,
    ``sm90_xmma_gemm_f32f32_tf32f32_*``: names seen on the H200) of a kind the eager
    reference's own timed kernels do not show and the definition does not allow are
    ``precision_downgrade`` (REWARD_HACK) whatever the flags and the output error say.

    ``cand_sets`` / ``ref_sets``: per timed iteration, the kernel names of that call (the
    blocks' ``kernel_sets``). No reference kernels (no reference timing, no CUPTI): no
    finding, since what the reference runs by default (cuDNN's TF32 convolutions) is not
    known. Returns the finding appended, or None."""
    from ..spec.dtypes import to_torch
    from .precision import is_fp32_work, precision_finding

    cand = sorted({n for s in cand_sets for n in (s or ())})
    ref = sorted({n for s in ref_sets for n in (s or ())})
    if not cand or not ref or has(findings, "precision_downgrade"):
        return None
    defn = problem.definition
    fp32 = is_fp32_work([to_torch(s.dtype) for s in defn.inputs.values()],
                        [to_torch(s.dtype) for s in defn.outputs.values()])
    pf = precision_finding(flags_before={}, flags_after={}, fp32_work=fp32,
                           allow_tf32=bool(defn.allow_tf32), candidate_kernels=cand,
                           reference_kernels=ref)
    if pf is None or pf.severity != "hack":
        return None
    f = finding("precision_downgrade", f"timed calls: {pf.message}",
                {"basis": list(pf.basis), **pf.evidence, "reference_kernels": ref[:8]})
    findings.append(f)
    return f


def new_threads(run: WorkloadRun, base: set[int], seen: set[int]) -> set[int]:
    """OS threads of the worker not in ``base`` or ``seen`` that are still alive after a
    grace period (a joined thread's OS thread lingers in /proc for about a millisecond after
    join() returns; seen with a per-call ThreadPool)."""
    fresh = procfs.thread_ids(run.h.pid) - base - seen
    if fresh:
        time.sleep(THREAD_GRACE_S)
        fresh &= procfs.thread_ids(run.h.pid)
    return fresh
