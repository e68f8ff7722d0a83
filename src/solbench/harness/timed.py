"""Timed blocks: the candidate's timed iterations interleaved with the eager reference's.

Only the process being timed runs: the reference's worker is up and stopped while the
candidate is timed, and the candidate's worker, every descendant of it and anything
re-parented to the harness are stopped (SIGSTOP by pid) while the reference is
(:mod:`.freeze`). Every timed call gets values never seen before at one of K addresses
(:class:`~.slots.SlotPool`); a random sample of iterations, drawn after the call from the
OS's secure random source, is verified against the reference, and after the whole loop one
more call is judged (:mod:`.recheck`); after each call the parent reads the flush buffer it
owns, the worker's threads and processes, and its own round-trip window (:mod:`.evidence`).
On the CPU a non-DPS side's returned outputs are read by the parent from the stopped worker
(:mod:`.peek`). From the blocks, :func:`~.measure.timing_stats` makes the statistics.

:meth:`TimedBlocks.time` runs, in order: the first fill of the K slots, the candidate's own
no-op baseline, the warm-up calls, the block plan (a pilot, then the stopping rule of
:mod:`.stopping`), the blocks themselves (candidate and reference alternating, C R R C ...),
the trusted no-op again, the late re-check, then the statistics, the notes that say how they
were made, and the advisories read from them.
"""

from __future__ import annotations

import math
import os
import secrets
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import limits
from ..proc import procfs
from ..spec.trace import Finding, TimingStats
from . import freeze, guards, peek, protocol, recheck
from .checks import add_once, finding, has
from .correctness import poison_
from .evidence import (THREAD_END_GRACE_S, THREAD_GRACE_S, CandidateError, WorkloadRun, interposition_seen, kernel_precision_check,
                       kids_since_last_check, new_threads, outlived_a_call, process_check, window_check)
from .measure import FIRST_CALL_MIN_BLOCK, Block, first_call_outliers, timing_stats
from .process import WorkerHandle
from .rounds import Oracle
from .slots import FlushBuffers, release_cached
from .resolution import SideEvidence, pair_resolution, split_sizes
from .stopping import relative_halfwidth, total_iterations
from .telemetry import Telemetry, clock_summary, throttled
from .workers import ReferenceWorkers

#: IQR / median above which a timing is reported as unstable (advisory ``timing_unstable``)
UNSTABLE_IQR_RATIO = 0.5
#: no-op round trips whose median is the baseline subtracted from both sides' CPU samples
NOOP_N = 9

#: the flush of timed iteration i writes this value (the worker's _timed_iter flushes i + 1)
def flush_value(i: int) -> int:
    return (i + 1) & 0x7FFFFFFF


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _load(run: WorkloadRun, h: WorkerHandle) -> None:
    protocol.request(h, protocol.Load(slots=run.slots.wire, flush=run.slots.flush_wire,
                                      flush_bytes=run.flush_bytes), timeout_s=limits.LOAD_S)


def noop_ms(h: WorkerHandle, findings: list[Finding] | None, n: int = 5, dps: bool | None = None,
            hold: freeze.Hold | None = None, windows: list[float] | None = None) -> float:
    """Median round trip (ms) of ``n`` no-op requests to ``h`` (flush, checks, messaging: the
    timed path without the call). ``dps``: the path measured (True: destination passing, no
    copy-out; False: with the copy-out of returned outputs; None: the worker's own
    solution's). ``hold``: measured through the same stop/resume path as a held timed call
    (:class:`~.freeze.Hold`), without the flush (on that path the parent's, outside the
    window), so what is subtracted is what a held call's window holds besides the call.
    ``windows``: when given, each round trip (ms) is appended to it (their spread is the
    baseline's uncertainty, :func:`~.measure.cpu_resolution`)."""
    rts = []
    if hold is not None:
        hold.settle()
    for _ in range(n):
        if hold is not None:
            # the held path's window holds no flush (the parent's, before the inputs)
            t0 = time.perf_counter()
            hold.cont()
            rep = protocol.request(h, protocol.Noop(slot=0, dps=dps, flush=False), timeout_s=limits.TIME_BEGIN_S)
            hold.stop()
            rts.append((time.perf_counter() - t0) * 1e3)
            hold.settle()
        else:
            t0 = time.perf_counter()
            rep = protocol.request(h, protocol.Noop(slot=0, dps=dps), timeout_s=limits.TIME_BEGIN_S)
            rts.append((time.perf_counter() - t0) * 1e3)
        interposition_seen(rep, findings, "no-op round trip")
    if hold is not None:
        hold.cont()  # left running, as it was found
    if windows is not None:
        windows.extend(rts)
    return sorted(rts)[len(rts) // 2]


def load_wait_mark(worker_pid: int, reader_tid: int | None = None, worker: bool = True,
                   cpu: bool = True) -> tuple[float | None, float | None]:
    """A mark for :func:`load_wait_since`: (run-queue wait of the parent's calling thread, of
    the parent's thread that reads the worker's replies (``reader_tid``: the reply waits for
    it to get a CPU before the calling thread sees it; a thread of the trusted parent, whose
    wait is the host's load), plus the worker's main thread (:func:`procfs.runqueue_wait_ms`;
    with ``worker=False`` none of the worker's: the trusted reference's threads are read once
    a block, :func:`worker_wait_ms`), ms, None when unknown; CPU time the worker process has
    used, ms: :func:`procfs.process_cpu_ms`, None when ``cpu`` is False: only the CPU's
    plausibility check reads it)."""
    a = procfs.runqueue_wait_ms(None)
    if a is not None and reader_tid is not None:
        r = procfs.thread_wait_ms(reader_tid)
        a = None if r is None else a + r
    if worker:
        b = procfs.runqueue_wait_ms(worker_pid)
        a = None if a is None or b is None else a + b
    return a, (procfs.process_cpu_ms(worker_pid) if cpu else None)


def load_wait_since(mark: tuple[float | None, float | None], worker_pid: int, reader_tid: int | None = None,
                    worker: bool = True, cpu: bool = True) -> tuple[float | None, float | None]:
    """(wait, cpu) since ``mark``, ms, each None when unknown. ``wait``: the part of the time
    in which the parent's calling thread or the worker's main thread was runnable but had no
    CPU (in a held window they take turns: the parent sleeps on the reply while the worker
    runs, and the reverse, so the two do not overlap); a thread pool joined inside the call
    waits inside the worker's own clock, so it is not needed here. ``cpu``: the worker's CPU
    time, which load cannot stretch. Both serve only the plausibility cross-check, never a
    sample. ``reader_tid``, ``worker``, ``cpu``: as for :func:`load_wait_mark`."""
    now = load_wait_mark(worker_pid, reader_tid, worker, cpu)
    return tuple(None if a is None or b is None else max(b - a, 0.0) for a, b in zip(mark, now))


def worker_wait_ms(worker_pid: int) -> float | None:
    """Run-queue wait (ms) of every thread of the worker so far (:func:`procfs.process_wait_ms`),
    read at the start and at the end of a block of the trusted reference: that worker runs
    nothing between its calls (on the CPU every process of it is stopped there, on CUDA it
    waits for the next request), so the difference is its threads' wait inside the block's
    windows, for one read of every thread per block instead of two per call (0.4-1.2 ms a
    read of a 40-thread process on a 2-core host, ``bench/procfs_cost.py``). None when
    unknown."""
    return procfs.process_wait_ms(worker_pid)



def ref_sched_tampered(refs: ReferenceWorkers, rh: WorkerHandle, findings: list[Finding], when: str) -> bool:
    """The reference worker's threads no longer run as it started (policy, nice, CPU
    affinity): the candidate, the only untrusted process here, demoted it to inflate its
    speedup. The reference's timing is discarded, the worker replaced, REWARD_HACK."""
    base = getattr(rh, "sched0", None)
    bad = guards.sched_tampered(rh.pid, base) if base is not None else []
    if not bad:
        return False
    add_once(findings, finding("reference_tampered",
                               f"the eager reference's worker was demoted {when} its timed block: {bad[:3]}",
                               {"threads": bad[:20]}))
    refs.close()
    return True



@dataclass
class BlockPlan:
    """How many timed calls each side gets, in which blocks (:meth:`TimedBlocks._plan`)."""

    n_min: int
    n_max: int
    #: the stopping rule decides the count (n_min < n_max); else a fixed count
    adaptive: bool
    #: iterations per side: n_min until the pilot is judged, then the stopping rule's count
    n: int
    #: iterations per side in the first half of the blocks (the pilot)
    first: int
    #: blocks per side
    nb: int
    #: iterations of each block per side, in order (the second half appended after the pilot)
    sizes: list[int]
    #: two halves (reference timing or the stopping rule); else one block
    two: bool
    #: verified timed iterations in all: as many as the fixed count n_max had
    quota: int


@dataclass
class _BlockRun:
    """One timed block in progress (:meth:`TimedBlocks._block`)."""

    h: WorkerHandle
    candidate: bool
    #: sub-phase prefix of :meth:`WorkloadRun.tick` ("timing." or "ref_timing.")
    pre: str
    hold: freeze.Hold | None
    #: the worker's memory, read by the parent for a non-DPS side's copy-out (:mod:`.peek`)
    mem_fd: int | None
    blk: Block
    base_tids: set[int]
    to_verify: set[int]
    #: the last sub-phase mark (perf_counter seconds)
    tp: float
    #: the reference's threads' run-queue wait at the block's start (:func:`worker_wait_ms`);
    #: None for the candidate, or when unknown
    worker_wait0: float | None = None
    seen_threads: set[int] = field(default_factory=set)
    #: threads new after a previous call, still there (stopped) when it ended -> their CPU
    #: time (ns) then: they count when they outlive a later call having run in it
    #: (:func:`~.evidence.outlived_a_call`; a joined pool's OS threads linger about a
    #: millisecond after join and were stopped before they could exit)
    pending: dict[int, int | None] = field(default_factory=dict)


class TimedBlocks:
    """The timing of one workload (candidate and, interleaved, the eager reference)."""

    def __init__(self, run: WorkloadRun, oracle: Oracle, refs: ReferenceWorkers,
                 telemetry: Telemetry | None, dps: bool = False, flushes: FlushBuffers | None = None):
        self.run = run
        self.oracle = oracle
        self.refs = refs
        self.telemetry = telemetry
        #: the candidate's calling convention (destination passing: no copy-out on its path)
        self.dps = dps
        self._set = 1000  # timed input sets are numbered from here (their seeds under --seed)
        self._ref_pool = None  # the reference's own buffers (SlotPool.twin), made at first use
        #: reference timing given up for this workload (it ran out of device memory)
        self._ref_off = False
        #: the workers' kept flush buffers (None: the reference's twin pool makes its own)
        self.flushes = flushes
        #: NVML readings after the first and last timed call of every block (``_block``)
        self._clock_samples: list[dict] = []
        #: no-op windows (ms), whose spread says which CPU times are resolved (the trusted
        #: reference worker's; the candidate's own where there is none)
        self._noop_windows: list[float] = []
        #: the reference worker's no-op windows at its first and at its last block (drift)
        self._noop_first: list[float] = []
        self._noop_last: list[float] = []
        #: the order the blocks were timed in ("C", "R")
        self._order: list[str] = []
        #: the paired-block judgement of the speedup (:func:`~.resolution.pair_resolution`);
        #: None without reference timing
        self.resolution: dict[str, Any] | None = None

    def _next_seed(self) -> int:
        """The seed of the next timed input set (:meth:`~solbench.inputs.seeds.InputSeeds.next`)."""
        self._set += 1
        return self.run.seeds.next(self._set)

    def fresh(self) -> dict:
        """A new input set for a timed call (a fresh seed each)."""
        run = self.run
        from ..inputs import make_inputs

        return make_inputs(run.problem, run.w, self._next_seed(), run.cfg.device)

    def time(self) -> tuple[TimingStats, TimingStats | None, dict[str, Any]]:
        """Time the workload (module doc). Returns (the candidate's timing, the eager
        reference's or None, the telemetry block); findings go to ``run.findings``. Raises
        :class:`CandidateError` when the candidate breaks a rule of the timed path (the
        workload ends there), and the worker's own errors (timeout, death, an invalid reply)."""
        cfg = self.run.cfg
        # only the process being timed runs (red team round 6: the reference's start-up, or
        # its OpenMP threads still spinning after its own block, slowed the candidate's calls,
        # the eager reference timed against itself scored 0.06-0.3x on 2 CPU cores); on the CPU
        # the parent's own torch work between calls (fresh inputs, verification) runs
        # single-threaded for the same reason
        ref_idle = self.refs.handle() if cfg.reference_timing and cfg.timing else None
        if ref_idle is not None:
            ref_idle.pause()
        n = None
        if not cfg.is_cuda:
            n = torch.get_num_threads()
            torch.set_num_threads(1)
        try:
            return self._body()
        finally:
            if self._ref_pool is not None:
                self._ref_pool.close()
                self._ref_pool = None
            if n is not None:
                torch.set_num_threads(n)
            if self.refs.worker is not None and self.refs.worker.alive:
                self.refs.worker.resume()

    def _body(self) -> tuple[TimingStats, TimingStats | None, dict[str, Any]]:
        """The steps of :meth:`time`, in the order of the module doc."""
        run, cfg = self.run, self.run.cfg
        h, findings = run.h, run.findings
        t = time.perf_counter()
        scalars = self._first_fill()
        t = run.tick("timing.fill", t)
        # no-op round trip of the candidate's own path (flush, messaging, its copy-out if
        # non-DPS) in its own worker: the baseline of the plausibility check only, which
        # judges the worker's clock against the parent's window
        hold = None if cfg.is_cuda else freeze.Hold(h, findings, candidate=True)
        overhead = noop_ms(h, findings, n=NOOP_N, hold=hold)
        t = run.tick("timing.noop", t)
        self._warm_up(scalars)
        run.tick("timing.warmup", t)
        tele_samples = []
        if self.telemetry is not None and self.telemetry.ok:
            tele_samples.append(self.telemetry.sample())
        plan = self._plan()
        cand_blocks, ref_blocks, ref_overhead = self._run_blocks(plan, scalars, overhead)
        if cfg.reference_timing and not self._ref_off and not cfg.is_cuda and ref_blocks:
            # the trusted no-op again, after the last block: a baseline that moved says the host
            # changed under the timing (harness.resolution)
            self._noop_again()
        t = time.perf_counter()
        recheck.late_recheck(run, self.oracle, scalars, fresh=self.fresh, next_seed=self._next_seed)
        recheck.ask_again(run, self.oracle, scalars)  # only after a failed verification
        run.tick("timing.late_recheck", t)
        if self.telemetry is not None and self.telemetry.ok:
            tele_samples.append(self.telemetry.sample())
        over, where = self._baseline(ref_overhead, overhead, hold)
        # (the plausibility verdict keeps the candidate's own no-op: measured under the same
        # host load as its calls, it does not turn a busy moment into a hack)
        common = dict(is_cuda=cfg.is_cuda, warmup=cfg.n_warmup(), flush_bytes=run.flush_bytes,
                      noop_windows=None if cfg.is_cuda else self._noop_windows)
        timing = timing_stats(cand_blocks, findings=findings, overhead=over,
                              plausibility_overhead=overhead, **common)
        ref_timing = timing_stats(ref_blocks, findings=None, overhead=over, **common) if ref_blocks else None
        sides = (("candidate", cand_blocks, timing), ("eager reference", ref_blocks, ref_timing))
        if ref_timing is not None:
            self.resolution = pair_resolution(
                *(SideEvidence(ts.samples_ms, [len(b.roundtrip) for b in bl], ts.resolved, ts.resolution_ms,
                               [x for b in bl for x in b.wait], [x for b in bl for x in b.roundtrip],
                               None if who == "candidate" else [b.worker_wait for b in bl])
                  for who, bl, ts in sides),
                is_cuda=cfg.is_cuda, noop_first=self._noop_first, noop_last=self._noop_last, order=self._order)
        self._notes(plan, over, where, sides)
        self._advisories(sides)
        return timing, ref_timing, self._telemetry_block(tele_samples)

    def _first_fill(self) -> list:
        """Every slot filled for the timed calls; returns each slot's scalar arguments."""
        slots = self.run.slots
        # slot 0 keeps the last judged round's set; none when the last round was skipped
        # before its fill (its set was dropped with the round: rounds.run_rounds)
        first = slots.pristine[0]
        scalars = [slots.fill(0, first if first is not None else self.fresh())]
        for i in range(1, slots.k):
            scalars.append(slots.fill(i, self.fresh()))
        return scalars

    def _warm_up(self, scalars: list) -> None:
        """The candidate's warm-up calls (untimed, judged for interposition and processes)."""
        run = self.run
        h, slots, findings, k = run.h, run.slots, run.findings, run.slots.k
        for i in range(run.cfg.n_warmup()):
            # an input written in place gets its values back before every call on its slot
            # (a repeated non-idempotent update, x += 1, must not drift the warm-up's values)
            slots.restore(i % k, run.inplace_inputs)
            # the last check's walk where there was one (the rounds' or the previous warm-up
            # call's): a process started in between counts as new (as in _timed_call)
            before = kids_since_last_check(run)
            rep = protocol.request(h, protocol.Call(slot=i % k, scalars=scalars[i % k], ordering=False),
                                   timeout_s=run.call_timeout_s)
            if isinstance(rep, protocol.ErrorReply):
                raise CandidateError(f"warm-up call: {rep.type}: {rep.message}")
            interposition_seen(rep, findings, f"warm-up call {i}")
            process_check(run, before, f"in warm-up call {i}", late=True)

    def _plan(self) -> BlockPlan:
        """The blocks before the pilot is judged (:class:`BlockPlan`)."""
        cfg = self.run.cfg
        # iterations per side: a pilot half, then the rest by the stopping rule (stopping.py);
        # with a fixed count (--iters, or min == max) the two halves of before
        n_max, n_min = cfg.n_iters(), cfg.n_iters_min()
        adaptive = n_min < n_max
        n = n_min if adaptive else n_max
        two = cfg.reference_timing or adaptive
        first = n // 2 if two else n
        # blocks per side, the first half of them the pilot; the candidate's and the
        # reference's alternate C R R C C R R C (harness.resolution: each block pair is judged)
        nb = max(2, cfg.n_blocks(n)) if two else 1
        sizes = split_sizes(first, max(1, nb // 2)) or [first]
        # verified timed iterations: as many as the fixed count n_max had, however many
        # iterations the stopping rule keeps (a candidate wrong on a fraction of its calls is
        # caught with the same probability)
        quota = max(cfg.verify, math.ceil(cfg.verify_fraction * n_max))
        return BlockPlan(n_min=n_min, n_max=n_max, adaptive=adaptive, n=n, first=first, nb=nb, sizes=sizes,
                         two=two, quota=quota)

    def _run_blocks(self, plan: BlockPlan, scalars: list,
                    overhead: float) -> tuple[list[Block], list[Block], float | None]:
        """The timed blocks, candidate and reference alternating (C R R C ...); after the
        pilot half, the rest of the calls by the stopping rule (``plan`` is extended).
        Returns (the candidate's blocks, the reference's, the reference's no-op baseline in
        ms: None without reference timing)."""
        run, cfg = self.run, self.run.cfg
        sizes = plan.sizes
        pilot = True
        cand_blocks: list[Block] = []
        ref_blocks: list[Block] = []
        #: no-op round trip (ms), measured in the trusted reference worker
        ref_overhead: float | None = None
        verified = 0
        rng = secrets.SystemRandom()
        b = 0
        while b < len(sizes):
            m = sizes[b]
            verify_n = max(0, min(m, math.ceil((plan.quota - verified) / (len(sizes) - b))))
            ref_first = b % 2 == 1 and cfg.reference_timing and not self._ref_off
            if ref_first:
                ref_overhead = self._ref_turn(b, m, scalars, rng, ref_blocks, ref_overhead, last=False)
            blk = self._block(run.h, scalars, m, verify=True, rng=rng, verify_n=verify_n, findings=run.findings)
            self._order.append("C")
            verified += blk.verified
            cand_blocks.append(blk)
            if not ref_first and cfg.reference_timing and not self._ref_off:
                ref_overhead = self._ref_turn(b, m, scalars, rng, ref_blocks, ref_overhead, last=False)
            b += 1
            if pilot and b == len(sizes) and plan.two:
                # the pilot is done: the rest of the calls in the other half of the blocks
                pilot = False
                if plan.adaptive:
                    plan.n = self._total(cand_blocks, ref_blocks, ref_overhead, overhead, plan.n_min, plan.n_max)
                sizes += split_sizes(plan.n - plan.first, max(1, plan.nb - len(sizes)))
        return cand_blocks, ref_blocks, ref_overhead

    def _baseline(self, ref_overhead: float | None, overhead: float,
                  hold: freeze.Hold | None) -> tuple[float, str | None]:
        """(the no-op baseline subtracted from both sides' samples, ms; where it was measured,
        None when nothing is subtracted)."""
        cfg = self.run.cfg
        # one baseline for both sides: the no-op round trip of the DPS path (checks and
        # messaging; on the CPU through the same stop/resume path as a held call, whose window
        # holds no flush; on CUDA with the flush, for the plausibility check), measured in
        # the trusted reference worker, since the candidate's own worker could make its no-op
        # slower (a larger subtraction). Nothing proportional to the outputs is subtracted:
        # a non-DPS side's copy-out stays in its window, the candidate's as the reference's,
        # because the parent cannot tell from its window whether the candidate's worker did
        # the copy-out (writing its result straight into the output buffer skips it) and a
        # subtracted copy-out it skipped read as time it never spent.
        if ref_overhead is not None:
            return ref_overhead, "the trusted reference worker"
        if cfg.is_cuda:
            return overhead, "the candidate's worker (no reference worker)"
        # no trusted worker to measure the baseline in: the candidate's own no-op could be
        # made slower (a larger subtraction, a faster figure), so on the CPU nothing is
        # subtracted and each sample is the whole held window, an upper bound on the call.
        # Its no-op windows still judge the resolution: slowing them only costs it its figure
        noop_ms(self.run.h, self.run.findings, n=NOOP_N, dps=True, hold=hold, windows=self._noop_windows)
        return 0.0, None

    def _notes(self, plan: BlockPlan, over: float, where: str | None, sides: tuple) -> None:
        """The notes each side's timing carries on how it was made: the stopping rule's count,
        the baseline subtracted, one slot, the parent's flush and copy-out. ``sides``: (who,
        blocks, timing or None) of the candidate and of the eager reference."""
        run, cfg = self.run, self.run.cfg
        timed = [(bl, ts) for _, bl, ts in sides if ts is not None]
        if plan.adaptive:
            for _, ts in timed:
                hw = relative_halfwidth(ts.samples_ms)
                ts.notes.append(
                    f"adaptive iterations: {plan.n} per side (stopping rule: the median's notch interval "
                    f"1.57 IQR/sqrt(n) within {cfg.noise_target:.3g} of the median, from a pilot of "
                    f"{plan.first} per side; min {plan.n_min}, max {plan.n_max}); reached "
                    + (f"+-{hw:.3g}" if hw is not None else "n/a"))
        if not cfg.is_cuda:
            for _, ts in timed:
                if where is None:
                    ts.notes.append("no no-op baseline subtracted: no trusted reference worker to measure it "
                                    "in, so each sample is the whole held window (an upper bound on the "
                                    "call, the harness's messaging and checks included)")
                else:
                    ts.notes.append(f"no-op baseline {over:.4g} ms (messaging and checks, no flush, no copy-out; "
                                    f"the same for both sides, measured in {where})")
        if run.slots.k == 1:
            for _, ts in timed:
                ts.notes.append("one input slot (two copies of this workload exceed the slot budget): "
                                "every timed call still gets new values, at the same address")
        for blocks, ts in timed:
            fl = [x for b in blocks for x in b.flush_ms]
            if fl:
                # the evidence that every iteration had its flush, none of it the worker's
                ts.notes.append(
                    f"cache flush ({run.flush_bytes / 2**20:.4g} MiB) written by the parent before each of "
                    f"{len(fl)} calls with every process of the worker stopped (median {statistics.median(fl):.4g} ms, "
                    f"max {max(fl):.4g} ms; on the CPU the worker's main thread last ran on: "
                    f"{sum(b.flush_pinned for b in blocks)} of {len(fl)}); the worker ran only inside the windows")
            pc = {b.parent_copy for b in blocks} - {None}
            if pc:
                ts.notes.append("returned outputs copied into the slots by the parent from the stopped worker, "
                                "outside the windows" if pc == {True} else
                                "returned outputs copied by the worker inside its windows on "
                                f"{sum(b.parent_copy is False for b in blocks)} block(s) (the parent could "
                                "not read the worker's memory)")

    def _advisories(self, sides: tuple) -> None:
        """Findings read from the finished timings: precision-downgrade kernels (CUDA),
        ``first_call_outlier`` and ``timing_unstable`` (advisory). ``sides`` as for
        :meth:`_notes`."""
        run, cfg = self.run, self.run.cfg
        findings = run.findings
        (_, cand_blocks, timing), (_, ref_blocks, _) = sides
        if cfg.is_cuda and timing.method == "cupti":
            # the kernels that ran are evidence of a precision downgrade on their own (a flag
            # change alone is not: harness/precision.py)
            kernel_precision_check(run.problem, findings, [s for b in cand_blocks for s in (b.end.kernel_sets or [])],
                                   [s for b in ref_blocks for s in (b.end.kernel_sets or [])])
        for who, blocks, ts in sides:
            if ts is None:
                continue
            sizes = [len(b.roundtrip) for b in blocks]
            outs = first_call_outliers(ts.samples_ms, sizes)
            judged = sum(n >= FIRST_CALL_MIN_BLOCK for n in sizes)
            # a cost paid once per block recurs in every block; one slow first call is what a
            # busy host does to any kernel (seen on honest candidates on a loaded 2-core CPU)
            if judged >= 2 and len(outs) == judged:
                o = outs[0]
                add_once(findings, finding(
                    "first_call_outlier",
                    f"{who}: the first call of each of the {judged} timed blocks was an outlier "
                    f"(block {o['block']}: {o['first_ms']:.4g} ms, the block's other calls "
                    f"{o['median_ms']:.4g} ms median, limit {o['limit_ms']:.4g} ms): state the harness "
                    "does not reset (page faults, lazy initialisation, caches warmed by one call) "
                    "was paid once per block",
                    {"who": who, **o, "blocks": outs}))
        for who, _, ts in sides:
            # a spread as large as the median: the host (or GPU) was busy with something else;
            # the speedup of such a run says little (seen on a shared 2-core CPU host, where
            # scheduler ticks of 4-16 ms land inside sub-ms calls)
            if ts is not None and ts.n_samples >= 5 and ts.median_ms and ts.iqr_ms is not None \
                    and ts.iqr_ms > UNSTABLE_IQR_RATIO * ts.median_ms:
                findings.append(finding(
                    "timing_unstable",
                    f"{who}: IQR {ts.iqr_ms:.4g} ms vs median {ts.median_ms:.4g} ms over {ts.n_samples} "
                    "samples; the machine was not quiet, rerun before trusting this time",
                    {"who": who, "iqr_ms": ts.iqr_ms, "median_ms": ts.median_ms}))

    def _telemetry_block(self, tele_samples: list[dict]) -> dict[str, Any]:
        """The trace's telemetry: NVML samples before and after the blocks, the clocks the
        timed calls ran at, and ``throttled`` when a throttle reason was seen."""
        cfg = self.run.cfg
        tele: dict[str, Any] = {"samples": tele_samples}
        if self.telemetry is None:
            why = "CPU device: no GPU clocks" if not cfg.is_cuda else "no NVML reader"
        else:
            why = self.telemetry.reason
        tele["clocks"] = clock_summary(tele_samples + self._clock_samples, why)
        thr = throttled(tele_samples + self._clock_samples)
        if thr:
            tele["throttled"] = thr
            self.run.findings.append(finding("throttled", f"clock throttle reasons during timing: {thr}"))
        return tele

    def _total(self, cand_blocks: list[Block], ref_blocks: list[Block],
               ref_overhead: float | None, overhead: float, n_min: int, n_max: int) -> int:
        """Iterations per side from the pilot blocks (:func:`stopping.total_iterations`):
        each side's samples as :func:`~.measure.timing_stats` makes them, no findings."""
        cfg = self.run.cfg
        common = dict(is_cuda=cfg.is_cuda, warmup=cfg.n_warmup(), flush_bytes=self.run.flush_bytes, findings=None)
        pilots = [timing_stats(cand_blocks, overhead=ref_overhead if ref_overhead is not None else overhead,
                               **common).samples_ms]
        if ref_blocks:
            pilots.append(timing_stats(ref_blocks, overhead=ref_overhead if ref_overhead is not None else overhead,
                                       **common).samples_ms)
        return total_iterations(pilots, n_min, n_max, cfg.noise_target)

    def _ref_turn(self, b: int, m: int, scalars: list, rng, ref_blocks: list[Block],
                  ref_overhead: float | None, last: bool) -> float | None:
        """The reference's block ``b`` (:meth:`_reference_block`), then the candidate's view
        of the slots restored. Returns the reference's no-op baseline (ms)."""
        n0 = len(ref_blocks)
        ref_overhead = self._reference_block(b, m, scalars, rng, ref_blocks, ref_overhead)
        if len(ref_blocks) > n0:
            self._order.append("R")
        t = time.perf_counter()
        _load(self.run, self.run.h)
        self.run.tick("timing.reload", t)
        return ref_overhead

    def _noop_again(self) -> None:
        """The trusted reference worker's no-op windows once more, after the last block
        (``_noop_last``), held the same way as at its first block; best effort."""
        rh = self.refs.handle()
        if rh is None or not self._noop_first:
            return
        frozen = freeze.freeze_candidate(self.run.h, self.run.findings)
        rh.resume()
        try:
            noop_ms(rh, None, n=NOOP_N, dps=True, hold=freeze.Hold(rh, None, candidate=False), windows=self._noop_last)
        except Exception:  # noqa: BLE001 - evidence only: no drift figure then
            self._noop_last.clear()
        finally:
            if rh.alive:
                rh.pause()
            freeze.thaw(self.run.h, frozen)

    def _reference_block(self, b: int, m: int, scalars: list, rng, ref_blocks: list[Block],
                         ref_overhead: float | None) -> float | None:
        """One block of the eager reference in its own (trusted) worker, with every process of
        the candidate's stopped. Returns the reference worker's no-op baseline (ms), measured
        at its first block."""
        run, cfg = self.run, self.run.cfg
        h, slots, findings, k = run.h, run.slots, run.findings, run.slots.k
        t_ref = time.perf_counter()
        rh = self.refs.handle()
        run.tick("ref_timing.worker", t_ref)
        if rh is not None and ref_sched_tampered(self.refs, rh, findings, "before"):
            rh = None
        if rh is not None:
            # the candidate cannot run (or slow the reference) while it is timed
            t = time.perf_counter()
            frozen = freeze.freeze_candidate(h, findings)
            rh.resume()
            t = run.tick("ref_timing.freeze", t)
            # the reference computes in buffers of its own, filled by the parent (never ones
            # the candidate's worker mapped); run.slots is the candidate's pool again after
            cand_slots = run.slots
            try:
                self._load_reference_pool(rh)
                t = run.tick("ref_timing.load", t)
                if ref_overhead is None and not cfg.is_cuda:
                    ref_overhead = self._reference_noop(rh)
                    t = run.tick("ref_timing.noop", t)
                self._reference_timed(rh, b, m, scalars, rng, ref_blocks)
            except Exception as e:  # noqa: BLE001 - reference timing is best effort
                self._reference_failed(rh, e)
            finally:
                t = time.perf_counter()
                run.slots = cand_slots
                # reference outputs must not be left where the candidate can read them
                for sl in range(k):
                    for o in slots.outputs(sl):
                        poison_(o)
                _sync(cfg.device)
                if rh.alive:
                    rh.pause()
                freeze.thaw(h, frozen)
                run.tick("ref_timing.thaw", t)
            if self.refs.worker is rh and ref_sched_tampered(self.refs, rh, findings, "after"):
                ref_blocks.clear()
        run.phases["reference_timing"] = round(run.phases.get("reference_timing", 0.0)
                                               + time.perf_counter() - t_ref, 3)
        return ref_overhead

    def _load_reference_pool(self, rh: WorkerHandle) -> None:
        """The reference's own buffers (made at its first block, a twin of the candidate's
        pool) made ``run.slots`` and loaded in its worker; the caller restores the
        candidate's pool."""
        run, cfg = self.run, self.run.cfg
        if self._ref_pool is None:
            keep = None
            if self.flushes is not None and run.slots.flush is not None:
                keep = self.flushes.get("reference", rh, run.flush_bytes, cfg.device)
            self._ref_pool = run.slots.twin(flush=keep)
        run.slots = self._ref_pool
        _load(run, rh)

    def _reference_noop(self, rh: WorkerHandle) -> float:
        """The no-op baseline (ms) measured with trusted code (the reference's worker), at its
        first block: the candidate's own worker runs the candidate's hooks and could make its
        no-op slower, i.e. its subtraction larger. The DPS path (no copy-out) on the held path
        both sides' calls take: see :meth:`_baseline`. CPU only: on CUDA a sample is device
        time (CUPTI, else CUDA events), from which nothing is subtracted, the plausibility
        check reads the candidate's own no-op, and the paired-block rule's no-op drift is a
        CPU rule, so these nine requests had no reader there
        (``tests/harness/test_timing_stats.py::test_cuda_samples_do_not_read_the_noop_baseline``)."""
        cfg = self.run.cfg
        ref_overhead = noop_ms(rh, None, n=NOOP_N, dps=True,
                               hold=None if cfg.is_cuda else freeze.Hold(rh, None, candidate=False),
                               windows=self._noop_windows)
        self._noop_first = list(self._noop_windows)
        return ref_overhead

    def _reference_timed(self, rh: WorkerHandle, b: int, m: int, scalars: list, rng,
                         ref_blocks: list[Block]) -> None:
        """The reference's warm-up (all of it before its first block, one call before the
        others) and its timed block, appended to ``ref_blocks``."""
        run, cfg = self.run, self.run.cfg
        k = run.slots.k
        t = time.perf_counter()
        for i in range(cfg.n_warmup() if b == 0 else 1):
            run.slots.restore(i % k, run.inplace_inputs)
            protocol.request(rh, protocol.Call(slot=i % k, scalars=run.slots.scalars(i % k), ordering=False),
                             timeout_s=run.call_timeout_s)
        run.tick("ref_timing.warmup", t)
        ref_blocks.append(self._block(rh, scalars, m, verify=False, rng=rng, verify_n=0, findings=None))

    def _reference_failed(self, rh: WorkerHandle, e: Exception) -> None:
        """Reference timing failed (best effort): ``reference_timing_failed``, the worker
        dropped, and after an out-of-memory no reference timing for the rest of the workload."""
        cfg = self.run.cfg
        self.refs.worker = None
        self.run.findings.append(finding("reference_timing_failed", f"{type(e).__name__}: {e}"))
        if isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower():
            # the reference's own buffers and worker do not fit beside the candidate's:
            # both go now (the dropped worker held its memory until the run's end), and
            # no later block starts them again (each try costs a worker's start and
            # runs out the same way); the candidate's timing goes on
            self._ref_off = True
            if self._ref_pool is not None:
                self._ref_pool.close()
                self._ref_pool = None
            rh.kill()
            release_cached(cfg.device)

    def _block(self, h: WorkerHandle, scalars: list, m: int, *, verify: bool, rng, verify_n: int,
               findings: list[Finding] | None) -> Block:
        """One timed block of ``m`` calls in worker ``h``: the candidate's (``findings`` given:
        its checks run, ``verify_n`` of its calls are verified) or the reference's."""
        br = self._begin_block(h, m, verify=verify, rng=rng, verify_n=verify_n, findings=findings)
        try:
            for i in range(m):
                rep, rt, before = self._timed_call(br, scalars, i)
                self._after_call(br, rep, rt, before, i, m, findings)
        except BaseException:
            if br.hold is not None:  # never leave a worker stopped behind an error
                br.hold.cont()
            raise
        finally:
            if br.mem_fd is not None:
                os.close(br.mem_fd)
        return self._end_block(br, m, findings)

    def _begin_block(self, h: WorkerHandle, m: int, *, verify: bool, rng, verify_n: int,
                     findings: list[Finding] | None) -> _BlockRun:
        """The worker's profiler started, on the CPU every process of it held
        (:class:`~.freeze.Hold`), the worker's memory opened for a non-DPS side's copy-out,
        and which calls are verified drawn."""
        run, cfg = self.run, self.run.cfg
        candidate = findings is not None
        # sub-phases (seconds, summed over blocks; "ref_timing." for the reference's blocks):
        # where the harness's own time goes, so per-pair cost can be measured and not guessed
        pre = "timing." if candidate else "ref_timing."
        release_cached(cfg.device)  # the parent's reserve, for this block's worker
        tp = time.perf_counter()
        info = protocol.request(h, protocol.TimeBegin(cupti=cfg.cupti, markers=cfg.cupti_markers), timeout_s=limits.TIME_BEGIN_S)
        if isinstance(info, protocol.ErrorReply):
            raise CandidateError(f"time_begin: {info.type}: {info.message}")
        tp = run.tick(pre + "profiler", tp)
        # CPU: every process of this worker's sandbox is stopped outside each timed call
        # (Hold); the parent fills a call's inputs only once nothing of it runs
        hold = None if cfg.is_cuda else freeze.Hold(h, findings, candidate)
        if hold is not None:
            hold.settle()
        # a non-DPS side's returned outputs are copied into the slot by the parent, from the
        # stopped worker, outside the window (docs/harness.md, "DPS and non-DPS alike"): no
        # side's sample holds a copy the harness makes, and none can skip one to read faster
        non_dps = (not self.dps) if candidate else True
        mem_fd = peek.open_worker_memory(h.pid) if hold is not None and non_dps else None
        base_tids = procfs.thread_ids(h.pid)
        to_verify = set(rng.sample(range(m), min(verify_n, m))) if verify and m else set()
        blk = Block(cupti_reason=info.reason, l2_reset=info.l2_reset,
                    parent_copy=mem_fd is not None if non_dps and hold is not None else None)
        # the trusted reference's threads are read once a block (worker_wait_ms), after
        # its profiler started and (CPU) every process of it stopped
        wait0 = None if candidate else worker_wait_ms(h.pid)
        return _BlockRun(h=h, candidate=candidate, pre=pre, hold=hold, mem_fd=mem_fd, blk=blk,
                         base_tids=base_tids, to_verify=to_verify, tp=tp, worker_wait0=wait0)

    def _timed_call(self, br: _BlockRun, scalars: list, i: int) -> tuple[Any, float, set[int]]:
        """Timed call ``i`` of the block: its flush (held path: the parent's), its fresh inputs,
        the call in its window. Returns (the reply, the parent's round trip in ms, the
        candidate's processes before the call)."""
        run = self.run
        h, hold, blk, slots, pre = br.h, br.hold, br.blk, run.slots, br.pre
        s = i % slots.k
        reader = getattr(h, "reader_tid", None)
        if hold is not None:
            # the cache flush, by the parent, with every process of the worker still
            # stopped since the previous window; then the fill, still stopped: the
            # worker runs only inside the window below
            fms, pinned = freeze.parent_flush(slots, flush_value(i), h.pid)
            blk.flush_ms.append(fms)
            blk.flush_pinned += pinned
            br.tp = run.tick(pre + "flush", br.tp)
        # every timed call gets values never seen before (by either worker), at one of K
        # addresses; outputs are poisoned again by fill(). The trusted reference too: its
        # time may depend on the values (a routing, a sort), and the paired-block rule takes
        # agreeing blocks for independent evidence, which a set reused across its calls is
        # not (bench/set_reuse_sim.py: with each set serving four calls, a reference whose
        # time spreads 5% between sets, timed against itself in blocks of 25 calls, resolved
        # in 8-11% of trials instead of 5%)
        scalars[s] = slots.fill(s, self.fresh())
        br.tp = run.tick(pre + "inputs", br.tp)
        # the processes after the previous call's check (none of the candidate's runs between
        # its calls but its own threads: whatever one of them starts there counts as new, a
        # stricter baseline than a walk now), so each call walks the worker's tree once.
        # A block's first call too (red team 24): the previous check is the last call of the
        # block before, or the warm-up's or a round's; between them the worker runs free (the
        # reference's block, the phases), and a process a candidate's thread started there
        # was in a fresh walk's baseline, so it lived through every call of the block
        # unflagged (tests/harness/cand_red24_gap_helper.py PASSED)
        before = kids_since_last_check(run) if br.candidate else set()
        if hold is not None:
            # the call's window on the parent's clock: resume, request, reply, stop
            # the candidate's: its main thread's (the plausibility cross-check); the
            # trusted reference's threads are read at the block's start and end instead
            # (worker_wait_ms: harness.resolution's load check; a candidate's own threads
            # must not be able to call the host loaded), the parent's threads here
            w0 = load_wait_mark(h.pid, reader_tid=reader, worker=br.candidate)
            t0 = time.perf_counter()
            hold.cont()
            # check: on both sides here. A sample on the CPU is this window less the no-op
            # baseline, measured in the reference's worker with the check inside (Worker._on_noop):
            # a reference call without it read ~0.9 ms (the dispatcher dumps on a 2-core host)
            # short, 0.001 ms for any call below that (red team 25). On CUDA a sample is device
            # time, which the check (after the call's sync) is not part of
            rep = protocol.request(h, protocol.TimeIter(slot=s, scalars=scalars[s], i=i, flush=False,
                                                        parent_copy=br.mem_fd is not None,
                                                        check=True),
                                   timeout_s=run.call_timeout_s)
            hold.stop()
            rt = (time.perf_counter() - t0) * 1e3
            if w0 is not None:
                wait_ms, cpu_ms = load_wait_since(w0, h.pid, reader_tid=reader, worker=br.candidate)
                blk.wait.append(wait_ms)
                blk.cpu.append(cpu_ms)
            hold.settle()
            if br.mem_fd is not None and not isinstance(rep, protocol.ErrorReply):
                peek.parent_copy_out(br.mem_fd, rep.returned, slots.outputs(s))
        else:
            # the run-queue wait around the call (outside the device span): a loaded
            # host stretches a launch-bound call's gaps (harness.resolution's load check)
            w0 = load_wait_mark(h.pid, reader_tid=reader, worker=br.candidate, cpu=False)
            t0 = time.perf_counter()
            rep = protocol.request(h, protocol.TimeIter(slot=s, scalars=scalars[s], i=i, check=br.candidate,
                                                        copy_out=br.candidate),
                                   timeout_s=run.call_timeout_s)
            rt = (time.perf_counter() - t0) * 1e3
            blk.wait.append(load_wait_since(w0, h.pid, reader_tid=reader, worker=br.candidate, cpu=False)[0])
        br.tp = run.tick(pre + "calls", br.tp)
        return rep, rt, before

    def _after_call(self, br: _BlockRun, rep, rt: float, before: set[int], i: int, m: int,
                    findings: list[Finding] | None) -> None:
        """What the parent records and checks after timed call ``i`` (of ``m``): the reply's
        clocks, the GPU clocks after the first and last call, the candidate's checks
        (:meth:`_call_checks`) and, when drawn, its verification (:func:`~.recheck.verify_timed`)."""
        run, blk = self.run, br.blk
        if isinstance(rep, protocol.ErrorReply):
            raise CandidateError(f"timed call {i}: {rep.type}: {rep.message}")
        if (i == 0 or i == m - 1) and self.telemetry is not None and self.telemetry.ok:
            # the clocks the timed calls ran at, read by the parent right after a call
            # (on CUDA the sample is the device span: the read is outside it)
            self._clock_samples.append({**self.telemetry.sample(), "side": "C" if br.candidate else "R",
                                        "call": i})
        blk.roundtrip.append(rt)
        blk.host.append(rep.host_ms)
        blk.event.append(rep.event_ms)
        if br.candidate:
            self._call_checks(br, rep, rt, before, i, findings)
        br.tp = run.tick(br.pre + "guards", br.tp)
        if i in br.to_verify and br.candidate:
            recheck.verify_timed(run, self.oracle, i, i % run.slots.k, dps=self.dps)
            blk.verified += 1
            br.tp = run.tick(br.pre + "verify", br.tp)

    def _call_checks(self, br: _BlockRun, rep, rt: float, before: set[int], i: int,
                     findings: list[Finding]) -> None:
        """The candidate's checks after timed call ``i``: interposition, its clocks against
        the parent's window, new threads and processes, the parent's flush buffer intact,
        plain returned outputs."""
        run, h = self.run, br.h
        interposition_seen(rep, findings, f"timed iteration {i}")
        window_check(run, f"timed iteration {i}", {"host_ms": rep.host_ms, "event_ms": rep.event_ms}, rt)
        if br.hold is None:
            br.seen_threads |= new_threads(run, br.base_tids, br.seen_threads)
        else:
            now = procfs.thread_ids(h.pid)
            br.seen_threads |= outlived_a_call(h.pid, br.pending, now)
            br.pending = {t: br.pending[t] if t in br.pending else procfs.thread_run_ns(h.pid, t)
                          for t in now - br.base_tids - br.seen_threads}
        process_check(run, before, f"in timed iteration {i}", late=True)
        bad = run.slots.flush_written(flush_value(i))
        if bad and not has(findings, "flush_skipped"):
            findings.append(finding(
                "flush_skipped",
                f"timed iteration {i}: {len(bad)} of 64 random words of the parent's flush buffer "
                f"do not hold the value its flush writes ({flush_value(i)})",
                {"iteration": i, "positions": bad[:16]}))
        nonplain = [x for x in (rep.returned or []) if not x.plain]
        if nonplain:
            add_once(findings, finding("non_plain_output", f"timed iteration {i} returned {nonplain[0].type}",
                                       nonplain[0].model_dump()))

    def _end_block(self, br: _BlockRun, m: int, findings: list[Finding] | None) -> Block:
        """The block's end: the worker resumed (the last call's new threads given their
        grace), its profiler's device spans, each within its call's window, and
        ``background_thread`` for threads that appeared during the calls."""
        run, h, blk, hold = self.run, br.h, br.blk, br.hold
        if not br.candidate:
            w1 = worker_wait_ms(h.pid)
            blk.worker_wait = None if w1 is None or br.worker_wait0 is None else max(w1 - br.worker_wait0, 0.0)
        if hold is not None:
            hold.cont()
            if br.candidate and br.pending:
                # the last call's new threads, now running, get THREAD_END_GRACE_S to be gone
                left, t_end = set(br.pending), time.monotonic() + THREAD_END_GRACE_S
                time.sleep(THREAD_GRACE_S)
                left &= procfs.thread_ids(h.pid)
                while left and time.monotonic() < t_end:
                    time.sleep(0.002)
                    left &= procfs.thread_ids(h.pid)
                br.seen_threads |= left
        end = protocol.request(h, protocol.TimeEnd(), timeout_s=limits.TIME_END_S)
        if isinstance(end, protocol.ErrorReply):
            raise CandidateError(f"time_end: {end.type}: {end.message}")
        run.tick(br.pre + "profiler", br.tp)
        if br.candidate and end.cupti:
            # a call's device span lies inside the parent's round trip around it (the kernel
            # sum may not: kernels on several streams overlap)
            for i, (x, rt) in enumerate(zip(end.span_ms, blk.roundtrip)):
                window_check(run, f"timed iteration {i}", {"span_ms": x}, rt)
        if br.candidate and br.seen_threads:
            add_once(findings, finding("background_thread",
                                    f"{len(br.seen_threads)} OS thread(s) appeared during timed calls",
                                    {"thread_ids": sorted(br.seen_threads)[:20]}))
        blk.end = end
        blk.cupti_reason = blk.cupti_reason or end.reason
        if end.cupti and len(end.span_ms) != m:
            raise CandidateError(f"time_end: {len(end.span_ms)} device spans for {m} timed calls")
        return blk
