"""Worker lifecycle: starting and building the candidate's worker, the trusted eager
reference's worker (started beside the candidate's, kept between solutions, replaced after
any candidate that crashed, hung or cheated), workers started ahead of need
(:class:`SparePool`) and the timed windows they must never run in (:func:`timed_window`).

Every reply is parsed through :mod:`solbench.harness.protocol`; a failure to start or build
is returned as a :class:`~solbench.harness.verdict.Failure`, never raised.
"""

from __future__ import annotations

import collections
import os
import signal
import threading
import time
import weakref
from contextlib import contextmanager

from typing import TYPE_CHECKING

from .. import limits
from ..proc import procfs, signals
from ..proc.registry import OWN
from . import protocol
from .process import ProtocolError, WorkerDied, WorkerHandle, WorkerTimeout

if TYPE_CHECKING:  # imported where used: starting a worker needs neither torch nor the specs
    from ..spec.problem import Problem
    from ..spec.solution import Solution
    from .config import EvalConfig
    from .verdict import Failure

# ------------------------------------------------------------------ timed windows
#: every timed window this process closed, oldest first: (device key, start, end, label) in
#: time.monotonic() seconds (tests and audits check that no two of one device overlap)
TIMED_WINDOWS: collections.deque = collections.deque(maxlen=10_000)
_REG = threading.Lock()
_WINDOW_LOCKS: dict[str, threading.Lock] = {}
_WINDOW_OWNER: dict[str, int] = {}
_OPEN_WINDOWS = 0  # guarded by OWN.lock
_POOLS: "weakref.WeakSet[SparePool]" = weakref.WeakSet()


def device_key(device: str) -> str:
    """``cuda:N`` for a CUDA device (``cuda`` is ``cuda:0``), else the device type: the CPU
    is one device for timing, however many evaluations share it."""
    import torch

    d = torch.device(device)
    return f"cuda:{d.index or 0}" if d.type == "cuda" else d.type


@contextmanager
def timed_window(device: str, label: str = ""):
    """The span in which a workload is timed on ``device`` (the candidate's and the
    reference's interleaved blocks). Two windows of one device never overlap in this process:
    a second one waits for the first (one opened inside another on the same thread raises
    RuntimeError, it would wait forever). For as long as any window is open, every worker of
    every :class:`SparePool` of this process is stopped (SIGSTOP of its whole process tree,
    launcher included), so a worker started ahead (spawn, import torch, CUDA context, CUPTI)
    never runs beside a timed call. Separate processes on one device are the executors' to
    keep apart (one per GPU: ``--shard``, Ray's ``num_gpus=1``)."""
    global _OPEN_WINDOWS
    key = device_key(device)
    me = threading.get_ident()
    with _REG:
        lock = _WINDOW_LOCKS.setdefault(key, threading.Lock())
        if _WINDOW_OWNER.get(key) == me:
            raise RuntimeError(f"timed window {label!r} opened inside another on {key}")
    lock.acquire()
    with _REG:
        _WINDOW_OWNER[key] = me
    t0 = time.monotonic()
    try:
        with OWN.lock:
            _OPEN_WINDOWS += 1
            for pool in list(_POOLS):
                pool._pause()
        yield
    finally:
        with OWN.lock:
            _OPEN_WINDOWS -= 1
            if _OPEN_WINDOWS == 0:
                for pool in list(_POOLS):
                    pool._resume()
        TIMED_WINDOWS.append((key, t0, time.monotonic(), label))
        with _REG:
            _WINDOW_OWNER.pop(key, None)
        lock.release()


def _stop_tree(root: int, settle_s: float = 0.25) -> list[int]:
    """SIGSTOP ``root`` and its whole tree until it is seen stopped (:func:`signals.stop_tree`)."""
    return signals.stop_tree(root, settle_s)


def _cont(pids: list[int]) -> None:
    signals.send(pids, signal.SIGCONT)


class _SpawnDeferred(Exception):
    """A spare's fork refused because a timed window opened (it waits and tries again)."""


class _SpawnCancelled(Exception):
    """A spare's fork refused because the spare was dropped before it had a process."""


class SparePool:
    """Workers of one device started ahead of need, so a pair's start costs a handover and
    a build instead of spawn + import torch + CUDA context + dispatcher baseline + the first
    CUPTI session (10.8 s a pair on the H200, docs/throughput.md).

    A spare runs harness code only: it is started, its profiler warmed (``warm_profiler``),
    and it waits. :meth:`take` hands it out once, to become one candidate's worker or one
    problem's reference worker, and forgets it; no spare is ever handed out twice, so each
    candidate still gets a fresh process (its own sandbox uid and namespaces). While any
    :func:`timed_window` is open, every spare, started or starting, is stopped.
    :meth:`discard` drops them all (after a candidate that crashed, hung or cheated, as
    the reference's worker is); :meth:`close` also waits for those still starting.

    ``size``: spares kept (2: a problem's candidate and reference). ``refill``: False for a
    one-shot pool, whose :meth:`fill` starts ``size`` workers in all and never replaces one
    taken (``solbench eval`` starts its two workers so, at its process start). Thread-safe."""

    def __init__(self, device: str, size: int = 2, start_timeout_s: float = limits.WORKER_START_S,
                 refill: bool = True):
        if size < 1:
            raise ValueError(f"SparePool size must be >= 1, got {size}")
        self.device = device
        self.size = size
        self.refill = refill
        self.start_timeout_s = start_timeout_s
        self._lock = threading.Lock()
        self._boxes: list[dict] = []  # in start order: {"thread", "proc", "h", "discard"}
        self._stopped: list[int] = []  # pids this pool stopped for the open windows
        self._ending: list[dict] = []  # discarded while starting: joined by close()
        self.closed = False
        self.started = 0  # spares started (stats: bench/throughput_cpu.py)
        self.handed_out = 0
        with OWN.lock:
            _POOLS.add(self)

    # ---------------------------------------------------------------- filling
    def fill(self) -> None:
        """Start spares (each on its own thread) until ``size`` are ready or starting."""
        with self._lock:
            if self.closed:
                return
            while len(self._boxes) < self.size and (self.refill or self.started < self.size):
                box: dict = {"proc": None, "h": None, "discard": False}
                th = threading.Thread(target=self._start, args=(box,), name="solbench-spare", daemon=True)
                box["thread"] = th
                self._boxes.append(box)
                self.started += 1
                th.start()

    def _start(self, box: dict) -> None:
        def on_spawn(proc) -> None:  # under OWN.lock, like _pause/_resume
            with self._lock:
                box["proc"] = proc
                stop = _OPEN_WINDOWS > 0 and not box.get("taken")
            if stop:  # a taken one is waited for by its taker: it must run
                self._stopped.extend(_stop_tree(proc.pid))

        def before_spawn() -> None:  # under OWN.lock, which windows open under
            if box["discard"] or self.closed:  # dropped before it had a process: none now
                raise _SpawnCancelled
            if _OPEN_WINDOWS > 0:
                raise _SpawnDeferred

        h = None
        try:
            while True:
                # no fork of the parent inside a timed window: copying its page tables and
                # the copy-on-write faults after it slow the parent's own round trips
                while _OPEN_WINDOWS > 0 and not (box["discard"] or self.closed):
                    time.sleep(0.05)
                try:
                    h = WorkerHandle(self.device, start_timeout_s=self.start_timeout_s,
                                     on_spawn=on_spawn, before_spawn=before_spawn)
                    break
                except _SpawnDeferred:
                    continue
            _warm_profiler(h)
        except Exception:  # noqa: BLE001 - a spare is best effort: the taker starts its own
            if h is not None:
                h.kill()
            h = None
        with self._lock:
            box["h"] = h
            drop = box["discard"] or self.closed
        if drop and h is not None:
            h.close()
            box["h"] = None

    # ---------------------------------------------------------------- handing out
    def take(self) -> WorkerHandle | None:
        """The oldest spare (waiting for it to finish starting), or None when there is none
        or it failed to start. It is the caller's from now on; the pool never touches it
        again. Call outside timed windows (a spare is stopped inside one)."""
        with self._lock:
            if self.closed or not self._boxes:
                return None
            box = self._boxes.pop(0)
            box["taken"] = True
        with OWN.lock:  # stopped by an open window: its taker waits for it
            if box["proc"] is not None:
                mine = set(_tree(box["proc"]))
                _cont([p for p in self._stopped if p in mine])
                self._stopped = [p for p in self._stopped if p not in mine]
        box["thread"].join()
        h = box["h"]
        if h is None or not h.alive:
            return None
        self.handed_out += 1
        h.from_spare = True  # its start overlapped earlier work: not this evaluation's phases
        return h

    def ready(self) -> int:
        """How many spares have finished starting and wait to be taken."""
        with self._lock:
            return sum(1 for b in self._boxes if b["h"] is not None and b["h"].alive)

    def pids(self) -> list[int]:
        """Every process of the spares held now (launchers, sandbox inits, workers)."""
        with self._lock:
            boxes = list(self._boxes)
        out: list[int] = []
        for b in boxes:
            if b["proc"] is not None:
                out.extend(_tree(b["proc"]))
        return out

    # ---------------------------------------------------------------- windows
    def _pause(self) -> None:  # under OWN.lock
        with self._lock:
            procs = [b["proc"] for b in self._boxes if b["proc"] is not None]
        for proc in procs:
            self._stopped.extend(_stop_tree(proc.pid))

    def _resume(self) -> None:
        stopped, self._stopped = self._stopped, []
        _cont(stopped)

    # ---------------------------------------------------------------- ending
    def discard(self) -> None:
        """Drop every spare: closed now if started; one still starting is killed (SIGKILL of
        its process tree: harness code only, nothing of it is kept), so its start thread
        ends at once instead of after the rest of its start (about 10 s on the H200 host);
        one not yet spawned never is."""
        with self._lock:
            boxes, self._boxes = self._boxes, []
            for b in boxes:
                b["discard"] = True
        with OWN.lock:
            mine = {p for b in boxes if b["proc"] is not None for p in _tree(b["proc"])}
            _cont([p for p in self._stopped if p in mine])
            self._stopped = [p for p in self._stopped if p not in mine]
            starting = [b for b in boxes if b["h"] is None and b["proc"] is not None]
            for b in starting:
                _kill_tree(b["proc"])
        for b in boxes:
            h = b["h"]
            if h is not None:
                b["h"] = None
                h.close()
        self._ending.extend(b for b in boxes if b["thread"].is_alive())

    def close(self, wait_s: float = limits.SPARE_POOL_CLOSE_S) -> None:
        """Discard every spare and wait (up to ``wait_s``) for those still starting."""
        with self._lock:
            self.closed = True
        self.discard()
        deadline = time.monotonic() + wait_s
        for b in self._ending:
            b["thread"].join(timeout=max(0.0, deadline - time.monotonic()))
        with OWN.lock:
            self._resume()
            _POOLS.discard(self)


def _tree(proc) -> list[int]:
    return signals.tree(proc.pid if not isinstance(proc, int) else proc)


def _kill_tree(proc) -> None:
    """SIGKILL a starting spare's launcher group and every process under it (the launcher has
    its own session and group; the sandbox's init and the worker are below it)."""
    signals.kill_tree(proc.pid if not isinstance(proc, int) else proc)


def _build_request(problem: Problem, solution: Solution, cfg: EvalConfig) -> protocol.Build:
    return protocol.Build(solution=solution.model_dump_json(), init_args=list(problem.init_args),
                          init_seed=problem.init_seed, build_timeout_s=cfg.build_timeout_s)


def new_worker(device: str, spares: SparePool | None = None) -> WorkerHandle:
    """A started worker with its profiler warmed, no candidate code in it: a spare from
    ``spares`` when one is there, else started now. The first torch.profiler session of a
    process loads CUPTI and Kineto (4 s on the H200): paid here, before any candidate code,
    beside the reference's start, instead of inside the first timed block. Raises WorkerDied
    / WorkerTimeout / ProtocolError."""
    h = spares.take() if spares is not None else None
    if h is not None:
        return h
    h = WorkerHandle(device)
    try:
        _warm_profiler(h)
    except protocol.ReplyInvalid as e:
        h.kill()
        raise ProtocolError(f"warm_profiler: {e}") from None
    return h


def _warm_profiler(h: WorkerHandle) -> None:
    """The worker's first profiler session (CUPTI's start-up), before any candidate code; its
    seconds are the ``profiler`` step of ``h.start_phases``. Raises what the request raises."""
    t = time.perf_counter()
    protocol.request(h, protocol.WarmProfiler(), timeout_s=limits.WARM_PROFILER_S)
    h.start_phases["profiler"] = round(time.perf_counter() - t, 4)
    h.profiler_warm = True


def start_candidate(problem: Problem, solution: Solution, cfg: EvalConfig,
                    spares: SparePool | None = None,
                    started: dict | None = None) -> tuple[WorkerHandle | None, Failure | None]:
    """Start a worker (or take one of ``spares``) and build ``solution`` in it. Returns
    (handle, None) or (None, failure): RUNTIME_ERROR when the worker did not start or replied
    garbage, COMPILE_ERROR when the build failed, timed out or the worker died while building
    (with the log tail). ``started``: filled with ``"sandbox"``, the worker's sandbox report
    (its hello's word on the seccomp filter included), as soon as a worker started, so that
    a build that fails is still recorded under what the candidate's import ran in."""
    from ..spec.trace import Status
    from .verdict import Failure

    try:
        h = new_worker(cfg.device, spares)
    except (WorkerDied, WorkerTimeout, ProtocolError) as e:
        return None, Failure(Status.RUNTIME_ERROR, f"worker failed to start: {e}")
    if started is not None:
        started["sandbox"] = getattr(h, "sandbox", None)
    from .evidence import memguard_baseline

    memguard_baseline(h)  # before the build: nothing of the candidate's has run
    t_build = time.perf_counter()
    try:
        rep = protocol.request(h, _build_request(problem, solution, cfg), timeout_s=cfg.build_timeout_s + 60)
    except WorkerTimeout as e:
        log = h.log_since_last(cfg.log_cap)
        h.kill()
        return None, Failure(Status.COMPILE_ERROR, f"build timed out: {e}\n{log}")
    except protocol.ReplyInvalid as e:
        log = h.log_since_last(cfg.log_cap)
        h.kill()
        return None, Failure(Status.RUNTIME_ERROR, f"{log}\nbuild: {e}")
    except (WorkerDied, ProtocolError) as e:
        log = h.log_since_last(cfg.log_cap)
        h.kill()
        return None, Failure(Status.COMPILE_ERROR, f"worker died while building: {e}\n{log}")
    if isinstance(rep, protocol.CompileErrorReply):
        h.close()
        return None, Failure(Status.COMPILE_ERROR, rep.message)
    if isinstance(rep, protocol.ErrorReply):
        h.close()
        return None, Failure(Status.COMPILE_ERROR, f"{rep.type}: {rep.message}")
    h.build_s = time.perf_counter() - t_build
    h.build_cache = rep.build_cache if isinstance(rep, protocol.BuildReply) else None
    h.base_tids = procfs.thread_ids(h.pid)
    # no baseline of children: a process the candidate started while being imported is as
    # unexplained as one started later; only runtime helpers (by real executable) pass
    h.base_kids = set()
    return h, None


def _warms(device: str) -> bool:
    """Whether :meth:`ReferenceWorkers._warm` runs on ``device``: CUDA only (a CPU process
    loads no kernel modules lazily)."""
    return str(device).startswith("cuda")


#: the reference's first calls in its new worker on CUDA (:meth:`ReferenceWorkers._warm`): the
#: first loads the kernels, the second is a call as the timed warm-up will see it
WARM_CALLS = 2


class ReferenceWorkers:
    """The eager reference's worker of one problem (trusted code only).

    :meth:`prestart` starts it on a thread while the candidate's worker starts and is
    checked (both spawn, import torch and start CUDA in parallel: about 7 s a pair saved on
    the H200, phases_s ref_timing.worker + ref_timing.profiler); it is built before any
    candidate code runs and, on CUDA, makes its first calls there too (:meth:`_warm`);
    :meth:`handle` takes it over."""

    def __init__(self, problem: Problem, cfg: EvalConfig, spares: SparePool | None = None):
        self.problem = problem
        self.cfg = cfg
        self.spares = spares
        self.worker: WorkerHandle | None = None
        self._thread: threading.Thread | None = None
        self._box: dict = {}
        #: the slot buffers of :meth:`_warm`'s calls, each kept while the worker that mapped
        #: them lives (``pool.warm_worker``), closed by :meth:`_prune_pools` or :meth:`close`
        self._warm_pools: list = []
        # the baseline is this process's own state when the Evaluator was made, before any
        # candidate ran: a worker inherits it, so a candidate that demoted this process (or
        # the new worker while it started beside the candidate's) is seen too
        self.sched0 = procfs.sched_state(os.getpid()).get(os.getpid())

    def _new(self, warm_for=None) -> WorkerHandle | None:
        """A new reference worker, built; ``warm_for``: a workload whose reference calls
        :meth:`_warm` makes in it (CUDA only). None when it could not be started or built."""
        prep: dict = {}
        maker = None
        if warm_for is not None and _warms(self.cfg.device):
            # the throwaway set is made while the worker starts, so that what runs beside the
            # candidate's first correctness rounds is only the worker's calls, not the parent's
            # own generation (which would hold the parent's interpreter beside them)
            maker = threading.Thread(target=lambda: prep.update(self._warm_set(warm_for)),
                                     name="solbench-ref-warm-set", daemon=True)
            maker.start()
        try:
            h = new_worker(self.cfg.device, self.spares)
            from ..spec.problem import reference_solution

            rep = protocol.request(h, _build_request(self.problem, reference_solution(self.problem), self.cfg),
                                   timeout_s=self.cfg.build_timeout_s)
            if not isinstance(rep, protocol.BuildReply):
                h.close()
                return None
            h.sched0 = self.sched0 or procfs.sched_state(h.pid).get(h.pid)
            if maker is not None:
                maker.join()
                if prep:
                    if not self._warm(h, prep["pool"], prep["scalars"]):
                        h.close()
                        return None
                    prep["pool"].warm_worker = h  # kept while this worker lives
            return h
        except Exception:  # noqa: BLE001 - reference timing is best effort
            return None
        finally:
            if maker is not None:
                maker.join()
                if prep and getattr(prep["pool"], "warm_worker", None) is None:
                    self._drop_pool(prep["pool"])  # no worker maps it (none built, or it died)

    def _drop_pool(self, pool) -> None:
        """Close a warm-up set and forget it; never raises (it runs on the prestart thread)."""
        try:
            pool.close()
        except Exception:  # noqa: BLE001 - never out of the prestart thread
            pass
        if pool in self._warm_pools:
            self._warm_pools.remove(pool)

    def _prune_pools(self) -> None:
        """Close the warm-up sets whose worker is gone (died, timed out, replaced): a
        long-lived Evaluator that starts its reference again at each candidate keeps none of
        them until :meth:`close`."""
        for pool in list(self._warm_pools):
            h = getattr(pool, "warm_worker", None)
            if h is not None and not h.alive:
                self._drop_pool(pool)

    def _warm_set(self, w) -> dict:
        """``{"pool": a one-slot SlotPool, "scalars"}`` holding a throwaway input set (the warm-up
        seed of ``harness.warmup``) of workload ``w`` or of its stand-in
        (``harness.warmup.stand_in``), for :meth:`_warm`; {} when there is none or it cannot be
        made. The pool is kept while its worker lives (:meth:`_prune_pools`): the worker maps
        its buffers until its first timed block loads its own."""
        from . import warmup

        try:
            from ..inputs.generate import make_inputs
            from .slots import SlotPool

            wi = warmup.stand_in(self.problem, w)
            if wi is None:
                return {}
            values = make_inputs(self.problem, wi, warmup.WARM_SEED, self.cfg.device)
            pool = SlotPool(self.problem, wi, 1, self.cfg.device, values)
            self._warm_pools.append(pool)
            return {"pool": pool, "scalars": pool.fill(0, values)}
        except Exception:  # noqa: BLE001 - a warm-up that cannot run leaves the loading to the blocks
            return {}

    def _warm(self, h: WorkerHandle, pool, scalars: dict) -> bool:
        """The reference's first calls in its new worker ``h`` on ``pool``'s throwaway set
        (:meth:`_warm_set`), so that what a process pays once (CUDA loading each kernel's
        module at its first launch, library handles) is not paid by the warm-up calls of the
        first timed block: 0.23-0.31 s of ``ref_timing.warmup`` on an H100 for L1/013's first
        workload, against 0.015-0.03 s with these calls (bench/results/device_s27_h100). Runs
        on the prestart thread, joined (:meth:`handle`) before any timed window opens; trusted
        code only (the reference, in its own buffers). Returns False when the worker died or
        stopped answering (it is then closed and started again when needed); a call that fails
        leaves the worker as it was (the timed blocks will say why)."""
        try:
            protocol.request(h, protocol.Load(slots=pool.wire), timeout_s=limits.LOAD_S)
            for _ in range(WARM_CALLS):
                rep = protocol.request(h, protocol.Call(slot=0, scalars=scalars, ordering=False),
                                       timeout_s=self.cfg.first_call_timeout_s)
                if isinstance(rep, protocol.ErrorReply):
                    break
        except (WorkerDied, WorkerTimeout, ProtocolError):
            return False
        except Exception:  # noqa: BLE001 - a warm-up that cannot run leaves the loading to the blocks
            return True
        return True

    def prestart(self, warm_for=None) -> None:
        """Start the reference's worker on a thread; ``warm_for``: the first workload, whose
        reference calls :meth:`_warm` makes in it once it is built (CUDA only)."""
        cfg = self.cfg
        if not cfg.reference_timing or not cfg.timing or self._thread is not None \
                or (self.worker is not None and self.worker.alive):
            return
        self._prune_pools()  # (no prestart thread runs now: none adds one meanwhile)
        box: dict = {}
        th = threading.Thread(target=lambda: box.setdefault("h", self._new(warm_for)),
                              name="solbench-ref-prestart", daemon=True)
        th.start()
        self._thread, self._box = th, box

    def take_prestarted(self) -> WorkerHandle | None:
        """Wait for the prestart thread, if any, and hand over the worker it made."""
        if self._thread is None:
            return None
        self._thread.join()
        h = self._box.get("h")
        self._thread, self._box = None, {}
        return h

    def settle(self) -> None:
        """Wait for the prestart thread, if any (its worker's start, build and warm-up calls),
        and keep the worker it made. Called before any timed window, the reference's timed or
        not (a memory plan that leaves it out), and before an evaluation returns, so that
        none of it runs beside a window this or another evaluator opens later."""
        h = self.take_prestarted()
        if h is not None:
            if self.worker is not None and self.worker is not h:
                self.worker.close()
            self.worker = h

    def handle(self) -> WorkerHandle | None:
        self.settle()
        if self.worker is None or not self.worker.alive:
            self.worker = self._new()
        return self.worker

    def close(self) -> None:
        h = self.take_prestarted()  # a prestarted reference worker is closed too
        if h is not None:
            h.close()
        if self.worker is not None:
            self.worker.close()
            self.worker = None
        for pool in list(self._warm_pools):  # after the worker that mapped them is gone
            self._drop_pool(pool)
