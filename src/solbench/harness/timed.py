"""Timed blocks: the candidate's timed iterations interleaved with the eager reference's.

Only the process being timed runs: the reference's worker is up and stopped while the
candidate is timed, and the candidate's worker, every descendant of it and anything
re-parented to the harness are stopped (SIGSTOP by pid) while the reference is. Every timed
call gets values never seen before at one of K addresses (:class:`~.slots.SlotPool`); a
random sample of iterations, drawn after the call from the OS's secure random source, is
verified against the reference; after each call the parent reads the flush buffer it owns,
the worker's threads and processes, and its own round-trip window (:mod:`.evidence`).
From the blocks, :func:`~.measure.timing_stats` makes the statistics.
"""

from __future__ import annotations

import math
import os
import secrets
import signal
import statistics
import time
from typing import Any

import torch

from ..proc import procfs, signals
from ..spec.trace import Finding, TimingStats
from . import guards, protocol
from .checks import add_once, finding, has
from .correctness import bits_equal, poison_
from .evidence import (THREAD_GRACE_S, CandidateError, WorkloadRun, interposition_seen, kernel_precision_check,
                       kids_before,
                       new_threads, process_check, returned_issue, window_check)
from .measure import FIRST_CALL_MIN_BLOCK, Block, first_call_outliers, timing_stats
from .process import WorkerHandle, unregistered_children
from .rounds import Oracle, inplace_judged
from .shm import max_span, strided_span
from .slots import FlushBuffers, release_cached
from .resolution import SideEvidence, pair_resolution, split_sizes
from .stopping import relative_halfwidth, total_iterations
from .telemetry import Telemetry, clock_summary, throttled
from .workers import ReferenceWorkers

#: input-set index of the sparse stress set of the re-check after the timed loop (its seed
#: under ``--seed``)
LATE_STRESS_SET = 503

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
                                      flush_bytes=run.flush_bytes), timeout_s=120)


def noop_ms(h: WorkerHandle, findings: list[Finding] | None, n: int = 5, dps: bool | None = None,
            hold: "Hold | None" = None, windows: list[float] | None = None) -> float:
    """Median round trip (ms) of ``n`` no-op requests to ``h`` (flush, checks, messaging: the
    timed path without the call). ``dps``: the path measured (True: destination passing, no
    copy-out; False: with the copy-out of returned outputs; None: the worker's own
    solution's). ``hold``: measured through the same stop/resume path as a held timed call
    (:class:`Hold`), without the flush (on that path the parent's, outside the window), so
    what is subtracted is what a held call's window holds besides the call. ``windows``: when
    given, each round trip (ms) is appended to it (their spread is the baseline's
    uncertainty, :func:`~.measure.cpu_resolution`)."""
    rts = []
    if hold is not None:
        hold.settle()
    for _ in range(n):
        if hold is not None:
            # the held path's window holds no flush (the parent's, before the inputs)
            t0 = time.perf_counter()
            hold.cont()
            rep = protocol.request(h, protocol.Noop(slot=0, dps=dps, flush=False), timeout_s=60)
            hold.stop()
            rts.append((time.perf_counter() - t0) * 1e3)
            hold.settle()
        else:
            t0 = time.perf_counter()
            rep = protocol.request(h, protocol.Noop(slot=0, dps=dps), timeout_s=60)
            rts.append((time.perf_counter() - t0) * 1e3)
        interposition_seen(rep, findings, "no-op round trip")
    if hold is not None:
        hold.cont()  # left running, as it was found
    if windows is not None:
        windows.extend(rts)
    return sorted(rts)[len(rts) // 2]


def open_worker_memory(pid: int) -> int | None:
    """A read-only fd on ``/proc/<pid>/mem`` once one read of the worker's first mapping
    succeeded (the parent may read the worker's memory: the same ptrace access check as a
    debugger's), else None."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            first = f.readline().split()
        lo = int(first[0].split("-")[0], 16)
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except (OSError, ValueError, IndexError):
        return None
    try:
        if len(os.pread(fd, 1, lo)) == 1:
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def parent_copy_out(mem_fd: int, returned: list | None, outs: list[torch.Tensor]) -> None:
    """Copy a non-DPS call's returned outputs from the stopped worker's memory into the
    parent's slot outputs ``outs`` (CPU, outside the timed window; every process of the
    worker is stopped, so the bytes are those the call left). Only the address comes from
    the worker (``returned[j].addr``, untrusted): the byte count is the parent's own slot's,
    and an output whose reported shape or dtype differs from the slot's, or that has no
    address, is left poisoned (the worker copied it itself, or it is wrong, which
    verification judges). Whatever address the worker names, the parent only reads
    ``nbytes`` from it: a worker that wrote its result straight into the slot and names the
    slot's own mapping gains nothing (it is a DPS call), one that names a buffer it never
    filled is judged wrong. Raises :class:`CandidateError` when a named address cannot be
    read (an honest worker's returned tensor is mapped until its next request)."""
    if not returned or len(returned) != len(outs):
        return
    for r, dst in zip(returned, outs):
        if r.addr is None or not r.plain or list(dst.shape) != list(r.shape or []) \
                or str(dst.dtype).replace("torch.", "") != r.dtype:
            continue
        strided = None
        if r.strides is not None:
            # a strided output (a transpose): read the span its strides cover, copy it here
            if len(r.strides) != dst.dim():
                raise CandidateError(f"the returned output's strides {r.strides[:8]} do not fit its "
                                     f"shape {list(dst.shape)}")
            span = strided_span(list(dst.shape), list(r.strides))
            if span > max_span(dst.numel()):
                raise CandidateError(f"the returned output's strides {r.strides[:8]} span {span} elements "
                                     f"for {dst.numel()}: more than the parent reads")
            strided = torch.empty(span * dst.element_size(), dtype=torch.uint8)
            view = memoryview(strided.numpy())
        else:
            view = memoryview(dst.detach().reshape(-1).view(torch.uint8).numpy())
        try:
            got = os.preadv(mem_fd, [view], r.addr)
        except (OSError, OverflowError, ValueError) as e:  # the address is the worker's word
            raise CandidateError(f"the returned output at the address the worker reported could not be "
                                 f"read: {e}") from None
        if got != view.nbytes:
            raise CandidateError(f"the returned output at the address the worker reported: {got} of "
                                 f"{view.nbytes} bytes readable")
        if strided is not None and dst.numel():
            dst.copy_(torch.as_strided(strided.view(dst.dtype), tuple(dst.shape), tuple(r.strides)))


def parent_flush(slots, value: int, pid: int) -> tuple[float, bool]:
    """The CPU held path's cache flush, written by the parent into the flush buffer it owns
    (``slots.flush``, int32, every element set to ``value``) while every process of the
    worker ``pid`` is stopped: no code of the worker's runs for it, so nothing of the
    candidate's can run outside a timed window (docs/harness.md, "CPU: the parent's clock
    only"). The writing thread is moved for the flush onto the CPU the worker's main thread
    last ran on, so that CPU's private caches are evicted as by the worker's own flush
    before (a worker thread elsewhere keeps its private caches, as it did then); where that
    CPU is not allowed to the parent, the flush runs where the parent is. One thread
    (numpy's fill): the parent's torch runs single-threaded while timing. Returns (ms the
    write took on the parent's clock, whether it ran on the worker's CPU)."""
    if slots.flush is None:
        return 0.0, False
    cpu = procfs.last_cpu(pid)
    prev = None
    if cpu is not None:
        try:
            prev = os.sched_getaffinity(0)  # 0: the calling thread (Linux)
            if cpu in prev:
                os.sched_setaffinity(0, {cpu})
            else:
                prev = None
        except OSError:
            prev = None
    t0 = time.perf_counter()
    try:
        slots.flush.numpy().fill(value & 0x7FFFFFFF)
    finally:
        ms = (time.perf_counter() - t0) * 1e3
        if prev is not None:
            os.sched_setaffinity(0, prev)
    return ms, prev is not None


def freeze_all(h: WorkerHandle) -> list[int]:
    """SIGSTOP, by pid, every descendant of the candidate's worker and every unregistered child
    of this process, after the worker's process group was stopped: a process in its own
    session or re-parented here is outside that group. No allow-list: an honest runtime
    helper (inductor's compile pool) is stopped too, it has nothing to do while the reference
    runs. Returns the pids stopped (for :func:`thaw`)."""
    pids = sorted(procfs.descendants(h.pid)) + h.outside_worker_tree() + unregistered_children()
    signals.send(pids, signal.SIGSTOP)
    return pids


def thaw(h: WorkerHandle, pids: list[int]) -> None:
    signals.send(pids, signal.SIGCONT)
    h.resume()


def unfrozen(h: WorkerHandle, frozen: list[int], wait_s: float = 0.2, poll_s: float = 0.0005) -> list[dict]:
    """Processes of the candidate's that escaped the pause: any descendant of its worker in
    another session than the worker's (it left the process group on purpose; honest runtime
    helpers, inductor's compile pool included, stay in it), any unregistered child of this
    process (re-parented here: a double fork), and any of them with a thread that still runs
    once SIGSTOP had ``wait_s`` to land (every thread is read: a process whose main thread
    exited runs on in its others)."""
    sid = procfs.session_id(h.pid)
    deadline = time.monotonic() + wait_s
    while True:
        out = []
        for pid in sorted(set(procfs.descendants(h.pid)) | set(frozen)):
            run = procfs.running_tasks(pid)
            if not run and procfs.state(pid) in (None, "Z", "X") and len(procfs.thread_ids(pid)) <= 1:
                continue  # gone, or a zombie with no thread left (nothing can run)
            other = sid is not None and procfs.session_id(pid) not in (None, sid)
            if other or run:
                out.append({"pid": pid, "other_session": other, "running": run,
                            "cmdline": procfs.cmdline(pid)[:200]})
        out += [{"pid": pid, "reparented": True, "cmdline": procfs.cmdline(pid)[:200]}
                for pid in unregistered_children()
                if procfs.running_tasks(pid) or procfs.state(pid) not in (None, "Z", "X")]
        # in the sandbox but outside the worker's tree: left it on purpose (CLONE_PARENT)
        out += [{"pid": pid, "outside_worker_tree": True, "cmdline": procfs.cmdline(pid)[:200]}
                for pid in h.outside_worker_tree()
                if procfs.running_tasks(pid) or procfs.state(pid) not in (None, "Z", "X")]
        if not out or time.monotonic() > deadline or any(
                x.get("other_session") or x.get("reparented") or x.get("outside_worker_tree") for x in out):
            return out
        time.sleep(poll_s)


def freeze_candidate(h: WorkerHandle, findings: list[Finding], poll_s: float = 0.0005,
                     wait_s: float = 0.2) -> list[int]:
    """Stop every process of the candidate's (its worker's process group and, by pid, every
    other process of its sandbox and anything re-parented here: :func:`freeze_all`) and
    check that none of them still runs (:func:`unfrozen`). One escaped (another session, a
    process outside the worker's tree, a task still running once SIGSTOP had time to land)
    is ``child_process`` (REWARD_HACK): it is killed and the workload ends
    (:class:`CandidateError`). Returns the pids stopped besides the worker's group.
    ``poll_s``: how often the tasks are read again while some still run (the deadline is
    ``wait_s`` whatever it is; a 10 ms poll made every pause before a reference block wait
    10 ms for a stop that lands within about a millisecond, as the held path's 0.5 ms one does)."""
    h.pause()
    frozen = freeze_all(h)
    running = unfrozen(h, frozen, wait_s=wait_s, poll_s=poll_s)
    if running:
        findings.append(finding(
            "child_process",
            "processes of the candidate kept running while its worker was stopped: "
            f"{running[:3]}", {"processes": running[:20]}))
        signals.send([r["pid"] for r in running], signal.SIGKILL)
        thaw(h, frozen)
        raise CandidateError("a process of the candidate ran while its worker was stopped")
    return frozen


def load_wait_mark(worker_pid: int, all_threads: bool = False) -> tuple[float | None, float | None]:
    """A mark for :func:`load_wait_since`: (run-queue wait of the parent's calling thread plus
    the worker's main thread, ms: :func:`procfs.runqueue_wait_ms`, or with ``all_threads``
    every thread of the worker: :func:`solbench.proc.procfs.process_wait_ms`; None when unknown; CPU
    time the worker process has used, ms: :func:`procfs.process_cpu_ms`)."""
    a = procfs.runqueue_wait_ms(None)
    b = procfs.process_wait_ms(worker_pid) if all_threads else procfs.runqueue_wait_ms(worker_pid)
    return (None if a is None or b is None else a + b), procfs.process_cpu_ms(worker_pid)


def load_wait_since(mark: tuple[float | None, float | None], worker_pid: int,
                    all_threads: bool = False) -> tuple[float | None, float | None]:
    """(wait, cpu) since ``mark``, ms, each None when unknown. ``wait``: the part of the time
    in which the parent's calling thread or the worker's main thread was runnable but had no
    CPU (in a held window they take turns: the parent sleeps on the reply while the worker
    runs, and the reverse, so the two do not overlap); a thread pool joined inside the call
    waits inside the worker's own clock, so it is not needed here. ``cpu``: the worker's CPU
    time, which load cannot stretch. Both serve only the plausibility cross-check, never a
    sample."""
    now = load_wait_mark(worker_pid, all_threads)
    return tuple(None if a is None or b is None else max(b - a, 0.0) for a, b in zip(mark, now))


class Hold:
    """Keeps every process of one worker's sandbox stopped except inside the calls the
    parent times (the CPU timing path; threats.md principle 3).

    A timed call's window is, on the parent's clock: :meth:`cont` (SIGCONT), the request,
    its reply, :meth:`stop` (SIGSTOP, and the wait until no task of the worker or of the
    known processes runs). :meth:`settle`, outside the window, stops every process of the
    sandbox by a full scan (a process made during the call) and waits again; only then does
    the parent fill the next call's inputs. So
    no thread or process of the candidate's can compute anything between its calls (from
    inputs the parent is filling, or to finish a call after its reply): all of its work
    falls inside a window the parent measures. The reference's worker is held the same way
    (``candidate`` False: its own processes only, never the candidate's leftovers), so both
    sides' windows hold the same harness steps."""

    def __init__(self, h: WorkerHandle, findings: list[Finding] | None, candidate: bool):
        self.h = h
        self.findings = findings
        self.candidate = candidate
        #: processes stopped by pid besides the worker's process group (known at the last settle)
        self.pids: list[int] = []
        #: how long a task may take to be seen stopped before it counts as running on (the
        #: longest seen on a loaded 2-vCPU VM was 15 ms; generous, it returns at once when done)
        self.wait_s = 2.0

    def stop(self) -> None:
        """Inside the window: SIGSTOP the worker's group, its pid and the known pids, then wait
        until none of their tasks runs. The window ends there, not when the signals are
        sent: on a loaded host (a VM's vCPUs shared with other jobs) a thread ran on for up
        to 15 ms after kill() returned (p99 12 ms over 200 stops, 2 spinning threads)."""
        self.h.pause()
        # by pid too, whatever pause() reaches (the worker may have left its process group)
        signals.send((self.h.pid, *self.pids), signal.SIGSTOP)
        self._wait([self.h.pid, *self.pids])

    def _wait(self, pids: list[int]) -> None:
        if not signals.wait_stopped(pids, self.wait_s, poll_s=0.0001):
            raise CandidateError("a thread of the worker kept running after SIGSTOP "
                                 f"({self.wait_s} s)")

    def cont(self) -> None:
        signals.send(self.pids, signal.SIGCONT)
        self.h.resume()

    def settle(self) -> None:
        """Outside the window: stop every process of the sandbox and wait until none of its
        tasks runs. Raises :class:`CandidateError` (with a ``child_process`` finding for the
        candidate) when one keeps running."""
        h = self.h
        if self.candidate:
            self.pids = freeze_candidate(h, self.findings if self.findings is not None else [],
                                         poll_s=0.0005, wait_s=self.wait_s)
        else:
            self.h.pause()
            self.pids = sorted(procfs.descendants(h.pid)) + h.outside_worker_tree()
            signals.send(self.pids, signal.SIGSTOP)
        signals.send([h.pid], signal.SIGSTOP)  # by pid, whatever the group stop reached
        self._wait([h.pid, *self.pids])


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

    def fresh(self) -> dict:
        """A new input set for a timed call (a fresh seed each)."""
        self._set += 1
        run = self.run
        from ..inputs import make_inputs

        return make_inputs(run.problem, run.w, run.seeds.next(self._set), run.cfg.device)

    def time(self) -> tuple[TimingStats, TimingStats | None, dict[str, Any]]:
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

    def _body(self):
        run, cfg = self.run, self.run.cfg
        h, slots, findings = run.h, run.slots, run.findings
        k = slots.k
        # slot 0 keeps the last judged round's set; none when the last round was skipped
        # before its fill (its set was dropped with the round: rounds.run_rounds)
        first = slots.pristine[0]
        scalars = [slots.fill(0, first if first is not None else self.fresh())]
        for i in range(1, k):
            scalars.append(slots.fill(i, self.fresh()))
        # no-op round trip of the candidate's own path (flush, messaging, its copy-out if
        # non-DPS) in its own worker: the baseline of the plausibility check only, which
        # judges the worker's clock against the parent's window
        hold = None if cfg.is_cuda else Hold(h, findings, candidate=True)
        overhead = noop_ms(h, findings, n=NOOP_N, hold=hold)
        for i in range(cfg.n_warmup()):
            # an input written in place gets its values back before every call on its slot
            # (a repeated non-idempotent update, x += 1, must not drift the warm-up's values)
            slots.restore(i % k, run.inplace_inputs)
            before = kids_before(run)
            rep = protocol.request(h, protocol.Call(slot=i % k, scalars=scalars[i % k]), timeout_s=run.call_timeout_s)
            if isinstance(rep, protocol.ErrorReply):
                raise CandidateError(f"warm-up call: {rep.type}: {rep.message}")
            interposition_seen(rep, findings, f"warm-up call {i}")
            process_check(run, before, f"in warm-up call {i}", late=True)
        tele_samples = []
        #: NVML readings after the first and last timed call of every block (``_block``)
        self._clock_samples: list[dict] = []
        if self.telemetry is not None and self.telemetry.ok:
            tele_samples.append(self.telemetry.sample())
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
        pilot = True
        cand_blocks: list[Block] = []
        ref_blocks: list[Block] = []
        #: no-op round trip (ms), measured in the trusted reference worker
        ref_overhead: float | None = None
        #: its windows (ms), whose spread says which CPU times are resolved
        self._noop_windows: list[float] = []
        #: the reference worker's no-op windows at its first and at its last block (drift)
        self._noop_first: list[float] = []
        self._noop_last: list[float] = []
        #: the order the blocks were timed in ("C", "R")
        self._order: list[str] = []
        self.resolution: dict[str, Any] | None = None

        # verified timed iterations: as many as the fixed count n_max had, however many
        # iterations the stopping rule keeps (a candidate wrong on a fraction of its calls is
        # caught with the same probability)
        quota = max(cfg.verify, math.ceil(cfg.verify_fraction * n_max))

        verified = 0
        rng = secrets.SystemRandom()
        b = 0
        while b < len(sizes):
            m = sizes[b]
            verify_n = max(0, min(m, math.ceil((quota - verified) / (len(sizes) - b))))
            ref_first = b % 2 == 1 and cfg.reference_timing and not self._ref_off
            if ref_first:
                ref_overhead = self._ref_turn(b, m, scalars, rng, ref_blocks, ref_overhead, last=False)
            blk = self._block(h, scalars, m, verify=True, rng=rng, verify_n=verify_n, findings=findings)
            self._order.append("C")
            verified += blk.verified
            cand_blocks.append(blk)
            if not ref_first and cfg.reference_timing and not self._ref_off:
                ref_overhead = self._ref_turn(b, m, scalars, rng, ref_blocks, ref_overhead, last=False)
            b += 1
            if pilot and b == len(sizes) and two:
                # the pilot is done: the rest of the calls in the other half of the blocks
                pilot = False
                if adaptive:
                    n = self._total(cand_blocks, ref_blocks, ref_overhead, overhead, n_min, n_max)
                sizes += split_sizes(n - first, max(1, nb - len(sizes)))
        if cfg.reference_timing and not self._ref_off and not cfg.is_cuda and ref_blocks:
            # the trusted no-op again, after the last block: a baseline that moved says the host
            # changed under the timing (harness.resolution)
            self._noop_again()
        self._recheck(scalars)
        if self.telemetry is not None and self.telemetry.ok:
            tele_samples.append(self.telemetry.sample())
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
            cand_over = ref_over = ref_overhead
            where = "the trusted reference worker"
        elif cfg.is_cuda:
            cand_over = ref_over = overhead
            where = "the candidate's worker (no reference worker)"
        else:
            # no trusted worker to measure the baseline in: the candidate's own no-op could be
            # made slower (a larger subtraction, a faster figure), so on the CPU nothing is
            # subtracted and each sample is the whole held window, an upper bound on the call.
            # Its no-op windows still judge the resolution: slowing them only costs it its figure
            noop_ms(h, findings, n=NOOP_N, dps=True, hold=hold, windows=self._noop_windows)
            cand_over = ref_over = 0.0
            where = None
        # (the plausibility verdict keeps the candidate's own no-op: measured under the same
        # host load as its calls, it does not turn a busy moment into a hack)
        common = dict(is_cuda=cfg.is_cuda, warmup=cfg.n_warmup(), flush_bytes=run.flush_bytes,
                      noop_windows=None if cfg.is_cuda else self._noop_windows)
        timing = timing_stats(cand_blocks, findings=findings, overhead=cand_over,
                              plausibility_overhead=overhead, **common)
        ref_timing = timing_stats(ref_blocks, findings=None, overhead=ref_over, **common) if ref_blocks else None
        if ref_timing is not None:
            self.resolution = pair_resolution(
                *(SideEvidence(ts.samples_ms, [len(b.roundtrip) for b in bl], ts.resolved, ts.resolution_ms,
                               [x for b in bl for x in b.wait], [x for b in bl for x in b.roundtrip])
                  for ts, bl in ((timing, cand_blocks), (ref_timing, ref_blocks))),
                is_cuda=cfg.is_cuda, noop_first=self._noop_first, noop_last=self._noop_last, order=self._order)
        if adaptive:
            for ts in (timing, ref_timing):
                if ts is None:
                    continue
                hw = relative_halfwidth(ts.samples_ms)
                ts.notes.append(
                    f"adaptive iterations: {n} per side (stopping rule: the median's notch interval "
                    f"1.57 IQR/sqrt(n) within {cfg.noise_target:.3g} of the median, from a pilot of "
                    f"{first} per side; min {n_min}, max {n_max}); reached "
                    + (f"+-{hw:.3g}" if hw is not None else "n/a"))
        if not cfg.is_cuda:
            for ts in (timing, ref_timing):
                if ts is None:
                    continue
                if where is None:
                    ts.notes.append("no no-op baseline subtracted: no trusted reference worker to measure it "
                                    "in, so each sample is the whole held window (an upper bound on the "
                                    "call, the harness's messaging and checks included)")
                else:
                    ts.notes.append(f"no-op baseline {cand_over:.4g} ms (messaging and checks, no flush, no copy-out; "
                                    f"the same for both sides, measured in {where})")
        if run.slots.k == 1:
            for ts in (timing, ref_timing):
                if ts is not None:
                    ts.notes.append("one input slot (two copies of this workload exceed the slot budget): "
                                    "every timed call still gets new values, at the same address")
        for ts, blocks in ((timing, cand_blocks), (ref_timing, ref_blocks)):
            fl = [x for b in blocks for x in b.flush_ms]
            if ts is not None and fl:
                # the evidence that every iteration had its flush, none of it the worker's
                ts.notes.append(
                    f"cache flush ({run.flush_bytes / 2**20:.4g} MiB) written by the parent before each of "
                    f"{len(fl)} calls with every process of the worker stopped (median {statistics.median(fl):.4g} ms, "
                    f"max {max(fl):.4g} ms; on the CPU the worker's main thread last ran on: "
                    f"{sum(b.flush_pinned for b in blocks)} of {len(fl)}); the worker ran only inside the windows")
            pc = {b.parent_copy for b in blocks} - {None}
            if ts is not None and pc:
                ts.notes.append("returned outputs copied into the slots by the parent from the stopped worker, "
                                "outside the windows" if pc == {True} else
                                "returned outputs copied by the worker inside its windows on "
                                f"{sum(b.parent_copy is False for b in blocks)} block(s) (the parent could "
                                "not read the worker's memory)")
        if cfg.is_cuda and timing.method == "cupti":
            # the kernels that ran are evidence of a precision downgrade on their own (a flag
            # change alone is not: harness/precision.py)
            kernel_precision_check(run.problem, findings, [s for b in cand_blocks for s in (b.end.kernel_sets or [])],
                                   [s for b in ref_blocks for s in (b.end.kernel_sets or [])])
        for who, blocks, ts in (("candidate", cand_blocks, timing), ("eager reference", ref_blocks, ref_timing)):
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
        for who, ts in (("candidate", timing), ("eager reference", ref_timing)):
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
        tele: dict[str, Any] = {"samples": tele_samples}
        if self.telemetry is None:
            why = "CPU device: no GPU clocks" if not cfg.is_cuda else "no NVML reader"
        else:
            why = self.telemetry.reason
        tele["clocks"] = clock_summary(tele_samples + self._clock_samples, why)
        thr = throttled(tele_samples + self._clock_samples)
        if thr:
            tele["throttled"] = thr
            findings.append(finding("throttled", f"clock throttle reasons during timing: {thr}"))
        return timing, ref_timing, tele

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
        _load(self.run, self.run.h)
        return ref_overhead

    def _noop_again(self) -> None:
        """The trusted reference worker's no-op windows once more, after the last block
        (``_noop_last``), held the same way as at its first block; best effort."""
        rh = self.refs.handle()
        if rh is None or not self._noop_first:
            return
        frozen = freeze_candidate(self.run.h, self.run.findings)
        rh.resume()
        try:
            noop_ms(rh, None, n=NOOP_N, dps=True, hold=Hold(rh, None, candidate=False), windows=self._noop_last)
        except Exception:  # noqa: BLE001 - evidence only: no drift figure then
            self._noop_last.clear()
        finally:
            if rh.alive:
                rh.pause()
            thaw(self.run.h, frozen)

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
            frozen = freeze_candidate(h, findings)
            rh.resume()
            # the reference computes in buffers of its own, filled by the parent (never ones
            # the candidate's worker mapped); run.slots is the candidate's pool again after
            cand_slots = run.slots
            try:
                if self._ref_pool is None:
                    keep = None
                    if self.flushes is not None and cand_slots.flush is not None:
                        keep = self.flushes.get("reference", rh, run.flush_bytes, cfg.device)
                    self._ref_pool = cand_slots.twin(flush=keep)
                run.slots = self._ref_pool
                _load(run, rh)
                if ref_overhead is None:
                    # the no-op baseline measured with trusted code (the reference's worker):
                    # the candidate's own worker runs the candidate's hooks and could make its
                    # no-op slower, i.e. its subtraction larger. The DPS path (no copy-out) on
                    # the held path both sides' calls take: see TimedBlocks._body
                    ref_overhead = noop_ms(rh, None, n=NOOP_N, dps=True,
                                           hold=None if cfg.is_cuda else Hold(rh, None, candidate=False),
                                           windows=self._noop_windows)
                    self._noop_first = list(self._noop_windows)
                for i in range(cfg.n_warmup() if b == 0 else 1):
                    run.slots.restore(i % k, run.inplace_inputs)
                    protocol.request(rh, protocol.Call(slot=i % k, scalars=scalars[i % k]),
                                     timeout_s=run.call_timeout_s)
                ref_blocks.append(self._block(rh, scalars, m, verify=False, rng=rng, verify_n=0, findings=None))
            except Exception as e:  # noqa: BLE001 - reference timing is best effort
                self.refs.worker = None
                findings.append(finding("reference_timing_failed", f"{type(e).__name__}: {e}"))
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
            finally:
                run.slots = cand_slots
                # reference outputs must not be left where the candidate can read them
                for sl in range(k):
                    for o in slots.outputs(sl):
                        poison_(o)
                _sync(cfg.device)
                if rh.alive:
                    rh.pause()
                thaw(h, frozen)
            if self.refs.worker is rh and ref_sched_tampered(self.refs, rh, findings, "after"):
                ref_blocks.clear()
        run.phases["reference_timing"] = round(run.phases.get("reference_timing", 0.0)
                                               + time.perf_counter() - t_ref, 3)
        return ref_overhead

    def _block(self, h: WorkerHandle, scalars: list, m: int, *, verify: bool, rng, verify_n: int,
               findings: list[Finding] | None) -> Block:
        run, cfg = self.run, self.run.cfg
        slots, k = run.slots, run.slots.k
        candidate = findings is not None
        # sub-phases (seconds, summed over blocks; "ref_timing." for the reference's blocks):
        # where the harness's own time goes, so per-pair cost can be measured and not guessed
        pre = "timing." if candidate else "ref_timing."
        release_cached(cfg.device)  # the parent's reserve, for this block's worker
        tp = time.perf_counter()
        info = protocol.request(h, protocol.TimeBegin(cupti=cfg.cupti, markers=cfg.cupti_markers), timeout_s=60)
        if isinstance(info, protocol.ErrorReply):
            raise CandidateError(f"time_begin: {info.type}: {info.message}")
        tp = run.tick(pre + "profiler", tp)
        # CPU: every process of this worker's sandbox is stopped outside each timed call
        # (Hold); the parent fills a call's inputs only once nothing of it runs
        hold = None if cfg.is_cuda else Hold(h, findings, candidate)
        if hold is not None:
            hold.settle()
        # a non-DPS side's returned outputs are copied into the slot by the parent, from the
        # stopped worker, outside the window (docs/harness.md, "DPS and non-DPS alike"): no
        # side's sample holds a copy the harness makes, and none can skip one to read faster
        non_dps = (not self.dps) if candidate else True
        mem_fd = open_worker_memory(h.pid) if hold is not None and non_dps else None
        base_tids = procfs.thread_ids(h.pid)
        to_verify = set(rng.sample(range(m), min(verify_n, m))) if verify and m else set()
        blk = Block(cupti_reason=info.reason, l2_reset=info.l2_reset,
                    parent_copy=mem_fd is not None if non_dps and hold is not None else None)
        seen_threads: set[int] = set()
        #: threads new after the previous call, still there (stopped) when it ended: they
        #: count when they outlive the next call too (a joined pool's OS threads linger about
        #: a millisecond after join and were stopped before they could exit)
        pending: set[int] = set()
        try:
            for i in range(m):
                s = i % k
                if hold is not None:
                    # the cache flush, by the parent, with every process of the worker still
                    # stopped since the previous window; then the fill, still stopped: the
                    # worker runs only inside the window below
                    fms, pinned = parent_flush(slots, flush_value(i), h.pid)
                    blk.flush_ms.append(fms)
                    blk.flush_pinned += pinned
                    tp = run.tick(pre + "flush", tp)
                # every timed call gets values never seen before (by either worker), at one of K
                # addresses; outputs are poisoned again by fill()
                scalars[s] = slots.fill(s, self.fresh())
                tp = run.tick(pre + "inputs", tp)
                before = kids_before(run) if candidate else set()
                if hold is not None:
                    # the call's window on the parent's clock: resume, request, reply, stop
                    # the candidate's: its main thread's (the plausibility cross-check); the
                    # trusted reference's: every thread of its worker (harness.resolution's load
                    # check; a candidate's own threads must not be able to call the host loaded)
                    w0 = load_wait_mark(h.pid, all_threads=not candidate)
                    t0 = time.perf_counter()
                    hold.cont()
                    rep = protocol.request(h, protocol.TimeIter(slot=s, scalars=scalars[s], i=i, flush=False,
                                                                parent_copy=mem_fd is not None),
                                           timeout_s=run.call_timeout_s)
                    hold.stop()
                    rt = (time.perf_counter() - t0) * 1e3
                    if w0 is not None:
                        wait_ms, cpu_ms = load_wait_since(w0, h.pid, all_threads=not candidate)
                        blk.wait.append(wait_ms)
                        blk.cpu.append(cpu_ms)
                    hold.settle()
                    if mem_fd is not None and not isinstance(rep, protocol.ErrorReply):
                        parent_copy_out(mem_fd, rep.returned, slots.outputs(s))
                else:
                    # the run-queue wait around the call (outside the device span): a loaded
                    # host stretches a launch-bound call's gaps (harness.resolution's load check)
                    w0 = load_wait_mark(h.pid, all_threads=not candidate)
                    t0 = time.perf_counter()
                    rep = protocol.request(h, protocol.TimeIter(slot=s, scalars=scalars[s], i=i),
                                           timeout_s=run.call_timeout_s)
                    rt = (time.perf_counter() - t0) * 1e3
                    blk.wait.append(load_wait_since(w0, h.pid, all_threads=not candidate)[0])
                tp = run.tick(pre + "calls", tp)
                if isinstance(rep, protocol.ErrorReply):
                    raise CandidateError(f"timed call {i}: {rep.type}: {rep.message}")
                if (i == 0 or i == m - 1) and self.telemetry is not None and self.telemetry.ok:
                    # the clocks the timed calls ran at, read by the parent right after a call
                    # (on CUDA the sample is the device span: the read is outside it)
                    self._clock_samples.append({**self.telemetry.sample(), "side": "C" if candidate else "R",
                                                "call": i})
                blk.roundtrip.append(rt)
                blk.host.append(rep.host_ms)
                blk.event.append(rep.event_ms)
                if candidate:
                    interposition_seen(rep, findings, f"timed iteration {i}")
                    window_check(run, f"timed iteration {i}", {"host_ms": rep.host_ms, "event_ms": rep.event_ms}, rt)
                    if hold is None:
                        seen_threads |= new_threads(run, base_tids, seen_threads)
                    else:
                        now = procfs.thread_ids(h.pid)
                        seen_threads |= pending & now
                        pending = now - base_tids - seen_threads
                    process_check(run, before, f"in timed iteration {i}", late=True)
                    bad = slots.flush_written(flush_value(i))
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
                tp = run.tick(pre + "guards", tp)
                if i in to_verify and candidate:
                    self._verify(i, s)
                    blk.verified += 1
                    tp = run.tick(pre + "verify", tp)
        except BaseException:
            if hold is not None:  # never leave a worker stopped behind an error
                hold.cont()
            raise
        finally:
            if mem_fd is not None:
                os.close(mem_fd)
        if hold is not None:
            hold.cont()
            if candidate and pending:
                # the last call's new threads get the same grace as elsewhere, now running
                time.sleep(THREAD_GRACE_S)
                seen_threads |= pending & procfs.thread_ids(h.pid)
        end = protocol.request(h, protocol.TimeEnd(), timeout_s=120)
        if isinstance(end, protocol.ErrorReply):
            raise CandidateError(f"time_end: {end.type}: {end.message}")
        run.tick(pre + "profiler", tp)
        if candidate and end.cupti:
            # a call's device span lies inside the parent's round trip around it (the kernel
            # sum may not: kernels on several streams overlap)
            for i, (x, rt) in enumerate(zip(end.span_ms, blk.roundtrip)):
                window_check(run, f"timed iteration {i}", {"span_ms": x}, rt)
        if candidate and seen_threads:
            findings.append(finding("background_thread",
                                    f"{len(seen_threads)} OS thread(s) appeared during timed calls",
                                    {"thread_ids": sorted(seen_threads)[:20]}))
        blk.end = end
        blk.cupti_reason = blk.cupti_reason or end.reason
        if end.cupti and len(end.span_ms) != m:
            raise CandidateError(f"time_end: {len(end.span_ms)} device spans for {m} timed calls")
        return blk

    def _recheck(self, scalars: list) -> None:
        """One more call, after the whole timed loop, judged like a correctness round: a
        candidate correct for its first N calls and wrong afterwards is caught whatever N is
        (the sampled verification of timed iterations catches it only with the sample's
        probability). Its input set is the last timed set of slot 0 with a few values
        changed (:func:`~.replay.perturbed`), in the same tensor objects: an output cache keyed
        on the inputs' identity, or on their values but not all of them, hands back the
        answer of that timed call, wrong for these inputs and bit for bit that call's, which
        is ``cached_output`` (:meth:`_late_call`); a fresh set where the workload has no
        input whose values may change (:func:`~.replay.perturbable_inputs`). Then, where the
        workload has a sparse stress set (docs/inputs.md) and the reference holds on it, one
        call on such a set: a candidate careful only during the correctness rounds (it counts
        its calls; every timed input is upstream's) is caught there.
        ``late_output_mismatch`` (INCORRECT) when the outputs are wrong."""
        from ..inputs import differing_profiles, make_inputs
        from .replay import all_poison, perturbable_inputs, perturbed
        from .rounds import _exact_only

        run = self.run
        last = run.slots.pristine[0]
        names = perturbable_inputs(run.problem, run.w, skip=run.inplace_inputs) if last is not None else []
        pert = None
        if names:
            # the flips' positions come from an input-set seed of their own (recorded; under
            # --seed derived, so the run replays), drawn as a fresh set's would be
            self._set += 1
            pert = perturbed(last, names, run.seeds.next(self._set))
        if pert is None:
            ok = self._late_call(scalars, self.fresh(), "the re-check after the timed loop", stress=False)
        else:
            values, changed = pert
            ok = True
            if any(all_poison(o) for o in run.slots.outputs(0)):
                # a reference block came last and poisoned slot 0's outputs (_reference_block):
                # the candidate's answer for that timed set is asked for again, and judged
                ok = self._late_call(scalars, last, "the re-check after the timed loop (the last timed "
                                     "input set of slot 0 again)", stress=False)
            if ok:
                ok = self._late_call(scalars, values, "the re-check after the timed loop", stress=False,
                                     earlier=(last, changed))
        if not ok:
            return
        try:
            if "stress_sparse" not in differing_profiles(run.problem, run.w):
                return
            values = make_inputs(run.problem, run.w, run.seeds.next(LATE_STRESS_SET), run.cfg.device,
                                 profile="stress_sparse")
            ref_out, ref_after = self.oracle.run_observed(values, keep=run.inplace_inputs)
        except Exception:  # noqa: BLE001 - the reference does not run there: nothing to judge
            return
        if self.oracle.check_reference(ref_out, run.slots) or \
                self.oracle.stress_reference_issue(ref_out, values, run.tol):
            return
        self._late_call(scalars, values, "the stress re-check after the timed loop", stress=True,
                        ref_out=ref_out, ref_after=ref_after, exact_only=_exact_only)

    def _late_call(self, scalars: list, values: dict, when: str, *, stress: bool, ref_out=None,
                   ref_after=None, exact_only=None, earlier: tuple[dict, dict] | None = None) -> bool:
        """One call of :meth:`_recheck` on ``values``; True when it passed. ``ref_out`` /
        ``ref_after``: the reference's outputs and inputs after its call on ``values``
        (:meth:`~.rounds.Oracle.run_observed`), computed here when not given. ``earlier``:
        (the input set of the last timed call on slot 0, name -> values changed) when
        ``values`` is that set perturbed: a failing call whose outputs are bit for bit those
        the timed call left is a replay once those are checked right for that set."""
        run = self.run
        h, slots, findings = run.h, run.slots, run.findings
        # what the last timed call on slot 0's input objects left there: a cache keyed on
        # them hands it back for these new values (the call is then judged a replay)
        last0 = [o.clone() for o in slots.outputs(0)]
        scalars[0] = slots.fill(0, values)
        before = kids_before(run)
        rep = protocol.request(h, protocol.Call(slot=0, scalars=scalars[0]), timeout_s=run.call_timeout_s)
        if isinstance(rep, protocol.ErrorReply):
            raise CandidateError(f"{when}: {rep.type}: {rep.message}")
        interposition_seen(rep, findings, when)
        process_check(run, before, f"in {when}", late=True)
        if rep.interposition:
            return False
        mutated = slots.inputs_intact(0, run.inplace_inputs)
        if mutated and not has(findings, "input_mutation"):
            findings.append(finding("input_mutation", f"{when} wrote to inputs {mutated}",
                                    {"inputs": mutated, "inplace_inputs": list(run.inplace_inputs)}))
        issue = returned_issue(run, rep)
        outs = [o.clone() for o in slots.outputs(0)]
        ip_cand = slots.input_tensors(0, run.inplace_inputs)  # the same snapshot for them
        if ref_out is None:
            ref_out, ref_after = self.oracle.run_observed(values, keep=run.inplace_inputs)
        if issue is None:
            rep_c, _ = self.oracle.judge(outs, ref_out, values, run.tol, slots, run.cfg.precision_check,
                                         precision_evidence=not stress,
                                         inplace=inplace_judged(run, ref_after, ip_cand))
            if rep_c.passed or (stress and exact_only is not None and exact_only(rep_c, slots)):
                return True
            if earlier is None:
                also = [("the last timed call on the same input objects", last0)]
            else:
                also = self._earlier_right(outs, last0, *earlier)
            f = run.replay.failed_call(when, outs, findings, returned=rep.returned is not None, also=also)
            if f is not None and earlier is not None:
                f.evidence["input_set"] = {"repeats": "the last timed call on slot 0",
                                           "sign_flipped": dict(earlier[1])}
            o = next(x for x in rep_c.outputs if x.failed_check)
            why, ev = f"{o.name}: {o.failed_check}: {o.detail}", {"failed_check": o.failed_check, "rel_l2": o.rel_l2,
                                                       "write_coverage": o.write_coverage, "output": o.name}
            if earlier is not None:
                ev["sign_flipped"] = dict(earlier[1])
        else:
            why, ev = issue[1], {"returned": issue[1]}
        ev["profile"] = "stress_sparse" if stress else "upstream"
        add_once(findings, finding(
            "late_output_mismatch",
            f"{when}: output wrong for its inputs ({why}) although the correctness rounds"
            + (", the stress rounds among them," if stress else "") + " and the verified timed iterations passed",
            ev))
        return False

    def _earlier_right(self, outs: list[torch.Tensor], last0: list[torch.Tensor], last: dict,
                       changed: dict[str, int]) -> list[tuple[str, list[torch.Tensor]]]:
        """The earlier call a failing perturbed re-check is compared with: [(label, outputs
        the last timed call on slot 0 left)] when this call's outputs are bit for bit those
        and they are right for that call's input set ``last`` (judged against the reference
        now: an unjudged timed call's outputs prove nothing), else []. The reference runs only
        on this path, never for a call that passed."""
        run = self.run
        if len(last0) != len(outs) or not all(bits_equal(o, p) for o, p in zip(outs, last0)):
            return []
        try:
            ref_out, _ = self.oracle.run_observed(last, keep=())
            rep, _ = self.oracle.judge(last0, ref_out, last, run.tol, run.slots, run.cfg.precision_check,
                                       precision_evidence=False)
        except Exception:  # noqa: BLE001 - no judgement of the earlier call: no replay claimed
            return []
        if not rep.passed:
            return []
        n = sum(changed.values())
        return [(f"the last timed call on slot 0, whose input set this call's repeats with {n} value(s) "
                 f"changed in {sorted(changed)} (its outputs checked right for its own set)", last0)]

    def _verify(self, i: int, s: int) -> None:
        """Check the outputs of timed iteration ``i`` (slot ``s``), and the inputs the
        reference writes in place (``run.inplace_inputs``), against the reference's on the same
        values, with the same limits as the correctness rounds; any other input written is
        ``input_mutation``."""
        run = self.run
        slots, findings = run.slots, run.findings
        outs = [o.clone() for o in slots.outputs(s)]  # snapshot at once: late writes do not count
        ip_cand = slots.input_tensors(s, run.inplace_inputs)
        ref_out, ref_after = self.oracle.run_observed(slots.pristine[s], keep=run.inplace_inputs)
        rep, pf = self.oracle.judge(outs, ref_out, slots.pristine[s], run.tol, slots, run.cfg.precision_check,
                                    inplace=inplace_judged(run, ref_after, ip_cand))
        if pf is not None and not has(findings, pf.check):
            pf.message = f"timed iteration {i}: " + pf.message
            findings.append(pf)
        if rep.passed:
            run.replay.passed_call(f"timed iteration {i}", outs)
        else:
            run.replay.failed_call(f"timed iteration {i}", outs, findings, returned=not self.dps)
        if not rep.passed and not has(findings, "timed_output_mismatch"):
            o = next(x for x in rep.outputs if x.failed_check)
            findings.append(finding(
                "timed_output_mismatch",
                f"timed iteration {i}: output wrong for its inputs ({o.name}: {o.failed_check}: {o.detail}) "
                "although the correctness rounds passed",
                {"iteration": i, "failed_check": o.failed_check, "rel_l2": o.rel_l2,
                 "write_coverage": o.write_coverage, "output": o.name}))
        mutated = slots.inputs_intact(s, run.inplace_inputs)
        if mutated and not has(findings, "input_mutation"):
            findings.append(finding("input_mutation", f"timed iteration {i} wrote to inputs {mutated}",
                                    {"inputs": mutated, "inplace_inputs": list(run.inplace_inputs)}))
