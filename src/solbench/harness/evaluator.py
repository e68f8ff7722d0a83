"""The trusted parent: turns a (problem, solution) pair into one Trace per workload.

This module only orchestrates; each step is its own unit (threats.md principles 1-7):

- :mod:`.config`: EvalConfig, workload selection, call limits.
- :mod:`.workers`: the candidate's worker (start + build) and the eager reference's worker.
- :mod:`.protocol`: the typed request/reply models; every reply is parsed at the boundary.
- :mod:`.slots`: the parent's shared input/output buffers and flush buffer.
- :mod:`.seeds`: each input set's seed, drawn when the set is made.
- :mod:`.rounds`: correctness rounds (the round plan is data) and the trusted oracle.
- :mod:`.timed`: timed blocks, the reference's blocks interleaved, verified iterations.
- :mod:`.measure`: CUPTI / CUDA-event / perf_counter samples to TimingStats.
- :mod:`.evidence`: what the parent observes around each call (processes, threads, windows).
- :mod:`.checks`: the registry of every finding; :mod:`.verdict`: the one status decision.

Any crash, exit, hang, OOM or malformed reply ends as a status (RUNTIME_ERROR / TIMEOUT /
REWARD_HACK); the worker is replaced and the next workload goes on; after a TIMEOUT the
solution's remaining workloads are recorded as not run unless ``keep_going``. A workload that
cannot run here is NOT_RUNNABLE before its worker starts or any input of it is made: its
reference needs another device (:mod:`solbench.spec.capability`), or its estimated memory
exceeds what the machine has (:mod:`.memory_plan`, which may instead leave the eager
reference's timing out to make it fit).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import Any

import torch

from .. import bytecode, limits
from ..errors import SpecError
from ..spec.capability import unmet_need
from ..spec.problem import Problem
from ..spec.solution import Solution
from ..spec.trace import (Correctness, Evaluation, Finding, Performance, Status, SpeedupBound, TimingStats,
                          Trace, speedup_bound)
from ..spec.workload import Workload
from . import protocol
from .checks import finding
from .config import EvalConfig, environment, select_workloads
from .evidence import CandidateError, WorkloadRun, guard_findings
from .process import ProtocolError, WorkerDied, WorkerHandle, WorkerTimeout
from .rounds import Oracle, round_plan, run_rounds, make_set
from ..inputs.seeds import InputSeeds, fingerprint
from .slots import FlushBuffers, SlotPool
from .telemetry import Telemetry
from .timed import TimedBlocks
from .verdict import Failure, judge
from .warmup import ParentWarmup
from . import memory_plan
from .memory_plan import MemoryPlan
from .workers import ReferenceWorkers, SparePool, start_candidate, timed_window

__all__ = ["EvalConfig", "Evaluator", "evaluate", "select_workloads", "environment"]

_BAD = (Status.RUNTIME_ERROR, Status.TIMEOUT, Status.REWARD_HACK)


#: an input-generation estimate at least this long (s) is printed before the workload runs
NOTICE_S = 10.0


def input_sets_notice(name: str, uuid: str, n_rounds: int, k: int, cfg: EvalConfig,
                      set_s: float, set_bytes: int, late: int = 1) -> str | None:
    """The line printed on stderr before a workload whose fresh input sets will take at
    least :data:`NOTICE_S`: "about N s: M input sets of B bytes". M counts the sets the
    evaluation makes (each seeded afresh, recorded in ``input_seeds``): one per correctness
    round (``n_rounds``), the other ``k - 1`` slots' first fills, one per timed call of the
    candidate and of the reference (``EvalConfig.n_iters``, each with its own set), ``late``
    re-checks after timing; N is M times ``set_s``, the time the first set took. None below
    the threshold."""
    m = n_rounds
    if cfg.timing:
        m += (k - 1) + cfg.n_iters() * (2 if cfg.reference_timing else 1) + late
    est = m * set_s
    if est < NOTICE_S:
        return None
    return (f"{name} / {uuid}: about {est:.0f} s: {m} input sets of {set_bytes:,} bytes "
            f"({set_s:.2f} s each to make)")


def runtime_need_of(trace: Trace):
    """The device need a NOT_RUNNABLE trace found at run time (the reference raised "no CPU
    kernel"), as a :class:`~solbench.spec.capability.DeviceNeed`, so the problem's other
    workloads are recorded without running; else None."""
    from ..spec.capability import DeviceNeed

    if trace.evaluation.status != Status.NOT_RUNNABLE:
        return None
    for f in trace.evaluation.findings:
        if f.check == "not_runnable" and f.evidence.get("need") not in (None, "memory"):
            return DeviceNeed(str(f.evidence["need"]), str(f.evidence.get("reason") or f.message))
    return None


def flush_bytes(cfg: EvalConfig) -> int:
    """Bytes of the cache flush: 2x the device's L2 (CUDA) or 2x the last-level CPU cache
    (capped at 256 MiB), computed here, in the parent."""
    if cfg.is_cuda:
        l2 = getattr(torch.cuda.get_device_properties(torch.device(cfg.device)), "L2_cache_size", 0) or (64 << 20)
        return int(2 * l2)
    from .worker import _cache_bytes

    return int(_cache_bytes())


class Evaluator:
    """Evaluates solutions of one problem; keeps the reference worker between solutions.
    ``spares``: workers started ahead (:class:`~.workers.SparePool`, shared by the
    Evaluators of a run) that the candidate's and the reference's workers are taken from."""

    def __init__(self, problem: Problem, cfg: EvalConfig, spares: SparePool | None = None):
        self.problem = problem
        self.cfg = cfg
        self.spares = spares
        if spares is not None:
            # every module this process may run is imported before any candidate code runs
            # (sandbox.preload_trusted_modules; the worker handle waits for it before a
            # build): done now, while the spares start, instead of after one is taken
            from .sandbox import preload_trusted_modules

            preload_trusted_modules()
        self.env = environment(cfg.device)
        self.oracle = Oracle(problem, cfg.device)
        self.refs = ReferenceWorkers(problem, cfg, spares)
        #: each worker's cache-flush buffer, kept across its workloads (slots.FlushBuffer)
        self.flushes = FlushBuffers()
        self._phases: dict[str, float] = {}
        #: the TraceContext of the evaluation in progress (``evaluate``'s ``context``)
        self._ctx = None
        self.telemetry = Telemetry(torch.device(cfg.device).index or 0) if cfg.is_cuda else None

    # the reference's outputs, as the correctness rounds use them (tests call these)
    def reference(self):
        return self.oracle.reference()

    def run_reference(self, values: dict) -> list[torch.Tensor]:
        return self.oracle.run(values)

    # ------------------------------------------------------------ public
    def evaluate(self, solution: Solution, on_trace=None, context=None) -> list[Trace]:
        """One finished Trace per selected workload, in order; each is passed to ``on_trace``
        (or ``cfg.on_trace``) as soon as it is made. Never raises for candidate behaviour.

        ``context``: a :class:`solbench.run.context.TraceContext` (what is known before the
        harness runs: solution hash, label, executor stamp, advisory findings, the SOL step);
        its evidence joins the harness's before the one status decision
        (:func:`.verdict.judge`), so no trace's status changes after it is made."""
        cfg = self.cfg
        self._ctx = context
        # what this candidate's worker will import that the parent never does, for the
        # bytecode cache of a host whose packages have none (solbench/bytecode.py)
        bytecode.want([s.content for s in solution.sources], list(solution.spec.languages), cfg.device)
        self._cand_box: dict | None = None  # the candidate worker's own sandbox report
        self.refs.cfg = cfg
        self.oracle.device = cfg.device
        emit = on_trace or cfg.on_trace
        workloads = select_workloads(self.problem, cfg)
        traces: list[Trace] = []
        handle: WorkerHandle | None = None
        stop: Failure | None = None  # compile error, or a timeout without keep_going
        timed_out: Trace | None = None
        pending_start_s = 0.0
        warmed: dict | None = None

        def add(tr: Trace) -> None:
            traces.append(tr)
            if emit is not None:
                emit(tr)

        # a reference that needs another device (an op without a CPU kernel): every workload
        # is recorded as such before any worker starts or any input is made
        need = unmet_need(self.problem.definition, cfg.device)
        try:
            for j, w in enumerate(workloads):
                if cfg.progress:
                    cfg.progress(w.uuid, j, len(workloads))
                self._phases = {}
                if need is not None:
                    add(self._not_runnable(solution, w, need.reason,
                                           {"need": need.tag, "device": cfg.device, "reason": need.reason}))
                    continue
                if timed_out is not None:
                    add(self._trace(solution, w, None, Failure(Status.TIMEOUT, (
                        f"not run: workload {timed_out.workload.uuid} of this solution timed out "
                        "(--keep-going runs the rest)")), findings=[finding(
                            "skipped_after_timeout",
                            f"not run: workload {timed_out.workload.uuid} of this solution timed out",
                            {"timed_out_workload": timed_out.workload.uuid})]))
                    continue
                if stop is not None:
                    add(self._trace(solution, w, None, stop))
                    continue
                # what the workload will hold, before its worker or any input of it: one too
                # big for this machine is recorded with the figures, and the run goes on
                mplan = self._memory_plan(w, solution)
                if mplan is not None and not mplan.fits:
                    add(self._not_runnable(solution, w, "does not fit this machine's memory: " + mplan.describe(),
                                           {"need": "memory", "device": cfg.device, **mplan.evidence()}))
                    continue
                if handle is None or not handle.alive:
                    t_start = time.perf_counter()
                    self.refs.prestart(w)
                    # the parent's own kernels loaded while it waits for the worker (harness.warmup)
                    warm = ParentWarmup(self.problem, w, cfg.device)
                    started: dict = {}
                    try:
                        handle, fail = start_candidate(self.problem, solution, cfg, self.spares, started=started)
                    finally:
                        warmed = warm.join()
                    # the worker's own sandbox report, its build failed or not: a candidate's
                    # import runs in the build, so its trace says what that ran under
                    self._cand_box = started.get("sandbox")
                    pending_start_s = time.perf_counter() - t_start
                    if self.spares is not None:  # the next pair's workers start meanwhile
                        self.spares.fill()
                    if fail is not None:
                        if fail.status == Status.COMPILE_ERROR:
                            stop = fail
                        add(self._trace(solution, w, None, fail))
                        handle = None
                        continue
                self._phases = {"worker_start": round(pending_start_s, 3)}
                if pending_start_s and warmed is not None:
                    # its own time, overlapped with (and part of) the wait for the worker
                    self._phases["worker_start.parent_warmup"] = warmed["seconds"]
                if pending_start_s and getattr(handle, "build_s", None) is not None:
                    self._phases["build"] = round(handle.build_s, 3)  # part of worker_start
                if pending_start_s and not getattr(handle, "from_spare", False):
                    # where a worker started now spent its start (harness/process.py)
                    self._phases.update({f"worker_start.{k}": v
                                         for k, v in getattr(handle, "start_phases", {}).items()})
                self._build_cache = getattr(handle, "build_cache", None)
                pending_start_s = 0.0
                tr = self._workload_planned(handle, solution, w, j, mplan)
                add(tr)
                need = need or runtime_need_of(tr)
                if tr.evaluation.status in _BAD:
                    handle.kill()
                    handle = None
                    if self.spares is not None:  # started while this candidate ran
                        self.spares.discard()
                if tr.evaluation.status == Status.TIMEOUT and not cfg.keep_going:
                    timed_out = tr
        finally:
            if handle is not None:
                handle.close()
            # no thread of this evaluation outlives it: a reference worker prestarted for a
            # candidate that never reached its timing (no build, wrong everywhere) ends its start
            # and warm-up calls here, not beside a window another evaluator opens next
            self.refs.settle()
            self.flushes.drop("candidate")
            if any(t.evaluation.status in _BAD for t in traces):
                # a candidate that crashed, hung or cheated may have touched processes of this
                # user: the next candidate gets a fresh reference worker
                self.close()
        return traces

    def close(self) -> None:
        self.refs.close()
        self.flushes.close()

    # ------------------------------------------------------------ one workload
    def _trace(self, solution: Solution, w: Workload, run: WorkloadRun | None, failure: Failure | None,
               log: str = "", correctness: Correctness | None = None, timing: TimingStats | None = None,
               ref_timing: TimingStats | None = None, findings: list[Finding] | None = None,
               telemetry: dict | None = None, resolution: dict | None = None) -> Trace:
        """The finished trace of one workload; its status comes from :func:`verdict.judge`
        alone, once, with every piece of evidence in."""
        findings = list(findings if findings is not None else (run.findings if run else []))
        box = self.env.sandbox or {}
        if box.get("warning") and not any(f.check == "not_sandboxed" for f in findings):
            # never silently: every trace of an unisolated worker says so (and its table row)
            findings.append(finding("not_sandboxed", box["warning"], {"mode": box.get("mode")}))
        env = self.env
        cbox = getattr(self, "_cand_box", None) or {}
        if box.get("seccomp") and cbox.get("seccomp") is False:
            # the worker said, before the candidate existed, that its filter is not in force:
            # the trace says what the candidate ran under, not what this host should give
            why = cbox.get("seccomp_failure") or "not loaded"
            env = env.model_copy(update={"sandbox": {**box, "seccomp": False, "seccomp_failure": why}})
            if not any(f.check == "seccomp_missing" for f in findings):
                findings.append(finding("seccomp_missing", f"the sandbox's system-call filter is not in force in "
                                        f"the candidate's worker: {why}", {"why": why}))
        ctx = self._ctx
        if failure is not None and failure.reason:
            # the worker's output first, the verdict's reason last: the cap keeps the tail
            log = "\n".join(x for x in (log, failure.reason) if x)
        perf = bound = None
        if failure is None and timing is not None and timing.median_ms is not None \
                and math.isfinite(timing.median_ms):
            # a side whose time the CPU path could not resolve gives no ratio: the reference's
            # time is left out too, so no reader recomputes one from latency_ms
            ref_ms = ref_timing.median_ms if ref_timing and ref_timing.resolved is not False else None
            ok = timing.resolved is not False
            # with exactly one side unresolved, the other still proves a bound on the ratio
            # (a candidate slow only where the reference is too fast to resolve is no longer hidden)
            bound = speedup_bound(timing, ref_timing)
            if bound is not None and resolution is not None and not resolution.get("resolved"):
                # the paired blocks do not bear the bound out (a loaded host, a moved no-op
                # baseline, block ratios on both sides of 1): no bound is claimed
                resolution = {**resolution, "unclaimed_bound": f"{bound[0]}{bound[1]:.4g}"}
                bound = None
            perf = Performance(latency_ms=timing.median_ms, reference_latency_ms=ref_ms,
                               speedup_factor=(ref_ms / timing.median_ms)
                               if ok and ref_ms and timing.median_ms > 0 else None)
        status, perf, sol = judge(findings, failure, w, perf, timing, ctx, self._phases)
        if status != Status.PASSED:
            bound = None
        seeds = run.seeds if run is not None else None
        return Trace(
            definition=self.problem.name, solution=solution.name, workload=w,
            evaluation=Evaluation(
                status=status, log=log[-self.cfg.log_cap:], correctness=correctness,
                performance=perf, environment=env, timing=timing,
                reference_timing=ref_timing, findings=findings, telemetry=telemetry or None,
                speedup_bound=SpeedupBound(op=bound[0], value=bound[1]) if bound else None,
                speedup_resolution=resolution if status == Status.PASSED and ref_timing is not None else None,
                solution_hash=(ctx.solution_hash if ctx is not None and ctx.solution_hash
                               else solution.content_hash()),
                label=ctx.label if ctx is not None else None, suite=self.problem.suite,
                executor=ctx.executor if ctx is not None else None,
                sol=sol, device=self.cfg.device,
                phases_s=dict(self._phases) if self._phases else None,
                build_cache=getattr(self, "_build_cache", None) if run is not None else None,
                input_seed=fingerprint(self.cfg.seed) if self.cfg.seed is not None else None,
                input_seeds=seeds.record() if seeds is not None and seeds.used else None,
            ),
        )

    def _not_runnable(self, solution: Solution, w: Workload, reason: str, evidence: dict) -> Trace:
        """NOT_RUNNABLE: nothing of ``w`` ran; the log's one line and the finding say why."""
        line = f"not runnable on {self.cfg.device}: {reason}"
        return self._trace(solution, w, None, Failure(Status.NOT_RUNNABLE, line),
                           findings=[finding("not_runnable", line, evidence)])

    def _memory_plan(self, w: Workload, solution: Solution) -> MemoryPlan | None:
        """The memory plan of ``w`` (:mod:`.memory_plan`); None when it cannot be made (an
        axis the workload does not resolve: the workload's own evaluation names it)."""
        try:
            return memory_plan.plan(self.problem, w, self.cfg, flush_bytes=flush_bytes(self.cfg),
                                    dps=bool(solution.spec.destination_passing_style))
        except (ValueError, SpecError, OSError, RuntimeError):
            return None

    def _workload_planned(self, h: WorkerHandle, solution: Solution, w: Workload, j: int,
                          mplan: MemoryPlan | None) -> Trace:
        """:meth:`_workload` under ``mplan``: without timing the eager reference when the plan
        leaves it out to fit (the ``memory_plan`` finding records it), else as configured."""
        if mplan is None or mplan.reference_timing or not (self.cfg.timing and self.cfg.reference_timing):
            return self._workload(h, solution, w, j)
        cfg = self.cfg
        self.cfg = self.refs.cfg = dataclasses.replace(cfg, reference_timing=False)
        try:
            note = finding("memory_plan", "; ".join(mplan.notes) + ": " + mplan.describe(), mplan.evidence())
            return self._workload(h, solution, w, j, pre_findings=[note])
        finally:
            self.cfg = self.refs.cfg = cfg

    def _workload(self, h: WorkerHandle, solution: Solution, w: Workload, j: int,
                  pre_findings: list[Finding] = ()) -> Trace:
        cfg = self.cfg
        run = WorkloadRun(problem=self.problem, cfg=cfg, w=w, j=j, h=h, seeds=InputSeeds(cfg.seed, j),
                          phases=self._phases, call_timeout_s=cfg.later_call_timeout(0.0))
        run.findings.extend(pre_findings)

        def done(failure: Failure | None, corr: Correctness | None = None, **kw) -> Trace:
            h.check_channels("the end of the workload", full=True)  # the parent's own look
            run.findings.extend(h.tamper_findings())
            cap = getattr(h, "taskcap", None)
            if failure is None and cap is not None and cap.hit is not None:
                # killed at its task limit after its last reply of this workload: the worker
                # is gone, so nothing it said stands
                failure = Failure(Status.RUNTIME_ERROR, cap.describe())
            mem = getattr(h, "memcap", None)
            if failure is None and mem is not None and mem.hit() is not None:
                failure = Failure(Status.RUNTIME_ERROR, mem.describe())  # likewise, at its memory cap
            refused = mem.refusal(failure.reason) if (failure is not None and mem is not None and
                                                      failure.status is Status.RUNTIME_ERROR) else None
            if refused is not None:  # under RLIMIT_DATA the cap shows as the failed allocation
                why = mem.describe_refusal()
                run.findings.append(finding("memory_limit", why, refused))
                failure = Failure(Status.RUNTIME_ERROR, f"{failure.reason} ({why})")
            log = "\n".join(run.logs + [h.log_since_last(cfg.log_cap)])
            return self._trace(solution, w, run, failure, log, correctness=corr, **kw)

        t_phase = time.perf_counter()
        h.cap_harness_ops(cfg.call_timeout_s)  # --timeout bounds the harness's own ops too
        try:  # upstream rounds, then the strict and stress rounds the inputs call for
            plan = round_plan(cfg.rounds, self.problem, w)
        except SpecError as e:
            return self._trace(solution, w, run, Failure(Status.INVALID_REFERENCE, f"input rules: {e}"))
        t_set = time.perf_counter()
        first = make_set(run, plan[0])
        if isinstance(first, Failure):
            return self._trace(solution, w, run, first)
        t_set = time.perf_counter() - t_set
        wbytes = max(self.problem.workload_bytes(w), 1)
        k = cfg.n_slots(wbytes)
        note = input_sets_notice(self.problem.name, w.uuid, len(plan), k, cfg, t_set,
                                 sum(v.nbytes for v in first.values() if isinstance(v, torch.Tensor)),
                                 late=1 + any(spec.profile == "stress_sparse" for spec in plan))
        if note:
            print(note, file=sys.stderr, flush=True)
        try:
            run.slots = SlotPool(self.problem, w, k, cfg.device, first)
        except (MemoryError, OSError, RuntimeError) as e:  # mmap/ftruncate/CUDA out of memory
            return self._trace(solution, w, run, Failure(Status.INVALID_REFERENCE, (
                f"could not allocate the workload's buffers ({k} slots of {wbytes:,} bytes): "
                f"{type(e).__name__}: {e}")))
        try:
            run.tol = w.tolerance_or_default()
            run.flush_bytes = flush_bytes(cfg)
            if cfg.timing:
                run.slots.use_flush(self.flushes.get("candidate", h, run.flush_bytes, cfg.device))
            try:
                protocol.request(h, protocol.Load(slots=run.slots.wire, flush=run.slots.flush_wire,
                                                  flush_bytes=run.flush_bytes), timeout_s=limits.LOAD_S)
            except (WorkerDied, WorkerTimeout, ProtocolError) as e:
                return done(Failure(Status.RUNTIME_ERROR, f"worker failed to receive inputs: {e}"))
            self._phases["inputs"] = round(time.perf_counter() - t_phase, 3)
            t_phase = time.perf_counter()

            failure, corr = run_rounds(run, self.oracle, plan, first)
            if failure is not None:
                if failure.status in (Status.INCORRECT_NUMERICAL, Status.INCORRECT_SHAPE, Status.INCORRECT_DTYPE):
                    # the worker is alive: its integrity evidence still counts (lowered precision
                    # flags and an error vs the fp64 truth far beyond the reference's is a
                    # downgrade, passing or not: set_float32_matmul_precision("medium") on a CPU
                    # whose oneDNN uses bf16). A numerical failure had this check once already,
                    # before its repeat (rounds.run_rounds); this one sees what the repeat did,
                    # and is skipped only when the repeat ended the worker
                    repeat = (corr.extra.get("repeat_call") or {}) if corr is not None else {}
                    if not ("error" in repeat and not h.alive):
                        guard_findings(run, "after correctness")
                return done(failure, corr)
            t_guard = time.perf_counter()
            # the whole dispatcher read once per workload, at its last check: a registration
            # still in place after the timed blocks is seen there, one made and undone within
            # the correctness rounds changed only the candidate's own (checked) results, and
            # the operators the worker itself runs are read after every call
            # (docs/integrity.md, "One full dispatcher read per workload")
            guard_findings(run, "after correctness", full=not cfg.timing)
            run.tick("correctness.guards", t_guard)
            self._phases["correctness"] = round(time.perf_counter() - t_phase, 3)
            t_phase = time.perf_counter()

            timing = ref_timing = None
            tele: dict[str, Any] = {}
            if cfg.timing and not run.hack():
                try:
                    self._phases["reference_timing"] = 0.0
                    blocks = TimedBlocks(run, self.oracle, self.refs, self.telemetry,
                                         dps=solution.spec.destination_passing_style, flushes=self.flushes)
                    if cfg.reference_timing:  # its start (a spare's, maybe) ends outside the window
                        t_ref = time.perf_counter()
                        self.refs.handle()
                        run.tick("ref_timing.worker", t_ref)
                        run.tick("reference_timing", t_ref)
                    else:  # a reference worker prestarted all the same: its warm-up ends first
                        self.refs.settle()
                    with timed_window(cfg.device, f"{self.problem.name}/{w.uuid}"):
                        timing, ref_timing, tele = blocks.time()
                    self._phases["timing"] = round(time.perf_counter() - t_phase, 3)
                except WorkerTimeout as e:
                    return done(Failure(Status.TIMEOUT, f"timing: {e}"), corr)
                except protocol.ReplyInvalid as e:
                    run.findings.append(finding("malformed_reply", f"timing: {e}", {"op": e.op, "reason": e.reason}))
                    return done(Failure(Status.RUNTIME_ERROR, f"timing: {e}"), corr)
                except (WorkerDied, ProtocolError, CandidateError) as e:
                    return done(Failure(Status.RUNTIME_ERROR, f"timing: {e}"), corr)
                t_guard = time.perf_counter()
                guard_findings(run, "after timing")
                run.tick("guards_after_timing", t_guard)
            return done(None, corr, timing=timing, ref_timing=ref_timing, telemetry=tele,
                        resolution=getattr(blocks, "resolution", None) if timing is not None else None)
        except torch.OutOfMemoryError as e:
            # raised here, in the parent (a worker's own shortage comes back as its error
            # reply): the reference, its float64 truth or the comparisons did not fit beside
            # both workers, which is no verdict on the candidate; the run goes on (the slots are
            # closed below, and the next candidate call hands the parent's reserve back first)
            first_line = str(e).splitlines()[0] if str(e) else type(e).__name__
            return done(Failure(Status.INVALID_REFERENCE, (
                f"the harness ran out of device memory judging this workload ({wbytes:,} bytes of inputs "
                f"and outputs, {k} slot(s)): {first_line}")))
        except Exception as e:  # noqa: BLE001 - a candidate's data must never crash the run
            # whatever the typed replies and range checks did not foresee: a recorded status
            # of this workload (the worker is replaced), never a traceback out of the run
            import traceback

            tb = traceback.format_exc()
            where = traceback.extract_tb(e.__traceback__)[-1]
            run.findings.append(finding(
                "candidate_data_error",
                f"the parent raised {type(e).__name__} handling the candidate's data: {str(e)[:300]}",
                {"type": type(e).__name__, "message": str(e)[:2000],
                 "at": f"{where.filename.rsplit('/', 1)[-1]}:{where.lineno} ({where.name})"}))
            try:
                return done(Failure(Status.RUNTIME_ERROR, f"the parent raised {type(e).__name__} handling "
                                                          f"the candidate's data: {e}\n{tb[-3000:]}"))
            except Exception:  # noqa: BLE001 - the worker's own state is what failed: no look at it
                return self._trace(solution, w, run, Failure(Status.RUNTIME_ERROR, f"{type(e).__name__}: {e}"
                                                             f"\n{tb[-3000:]}"))
        finally:
            run.slots.close()


def evaluate(problem: Problem, solution: Solution, config: EvalConfig | None = None,
             on_trace=None) -> list[Trace]:
    """Evaluate ``solution`` on ``problem``'s workloads in an isolated worker.

    Args:
        problem: a loaded problem (see :func:`solbench.spec.load_problem`).
        solution: the candidate (see :func:`solbench.spec.load_solution`).
        config: settings; defaults to CPU with 5 correctness rounds and timing.
        on_trace: called with each Trace as soon as its workload is finished.

    Returns:
        One Trace per selected workload, in order. Never raises for candidate behaviour
        (crash, hang, wrong output, malformed replies, tampering): those are statuses. Raises
        SpecError for a bad workload selection, ValueError for ``config.rounds < 1``.
    """
    ev = Evaluator(problem, config or EvalConfig())
    try:
        return ev.evaluate(solution, on_trace=on_trace)
    finally:
        ev.close()
