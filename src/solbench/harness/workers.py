"""Worker lifecycle: starting and building the candidate's worker, and the trusted eager
reference's worker (started beside the candidate's, kept between solutions, replaced after
any candidate that crashed, hung or cheated).

Every reply is parsed through :mod:`solbench.harness.protocol`; a failure to start or build
is returned as a :class:`~solbench.harness.verdict.Failure`, never raised.
"""

from __future__ import annotations

import os
import threading

from ..spec.problem import Problem, reference_solution
from ..spec.solution import Solution
from ..spec.trace import Status
from . import guards, protocol
from .config import EvalConfig
from .process import ProtocolError, WorkerDied, WorkerHandle, WorkerTimeout
from .verdict import Failure


def _build_request(problem: Problem, solution: Solution, cfg: EvalConfig) -> protocol.Build:
    return protocol.Build(solution=solution.model_dump_json(), init_args=list(problem.init_args),
                          init_seed=problem.init_seed, build_timeout_s=cfg.build_timeout_s)


def start_candidate(problem: Problem, solution: Solution, cfg: EvalConfig) -> tuple[WorkerHandle | None, Failure | None]:
    """Start a worker and build ``solution`` in it. Returns (handle, None) or (None, failure):
    RUNTIME_ERROR when the worker did not start or replied garbage, COMPILE_ERROR when the
    build failed, timed out or the worker died while building (with the log tail)."""
    try:
        h = WorkerHandle(cfg.device)
    except (WorkerDied, WorkerTimeout, ProtocolError) as e:
        return None, Failure(Status.RUNTIME_ERROR, f"worker failed to start: {e}")
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
    h.base_tids = guards.thread_ids(h.pid)
    # no baseline of children: a process the candidate started while being imported is as
    # unexplained as one started later; only runtime helpers (by real executable) pass
    h.base_kids = set()
    return h, None


class ReferenceWorkers:
    """The eager reference's worker of one problem (trusted code only).

    :meth:`prestart` starts it on a thread while the candidate's worker starts and is
    checked (both spawn, import torch and start CUDA in parallel: about 7 s a pair saved on
    the H200, phases_s ref_timing.worker + ref_timing.profiler); it is built before any
    candidate code runs; :meth:`handle` takes it over."""

    def __init__(self, problem: Problem, cfg: EvalConfig):
        self.problem = problem
        self.cfg = cfg
        self.worker: WorkerHandle | None = None
        self._thread: threading.Thread | None = None
        self._box: dict = {}
        # the baseline is this process's own state when the Evaluator was made, before any
        # candidate ran: a worker inherits it, so a candidate that demoted this process (or
        # the new worker while it started beside the candidate's) is seen too
        self.sched0 = guards.sched_state(os.getpid()).get(os.getpid())

    def _new(self) -> WorkerHandle | None:
        try:
            h = WorkerHandle(self.cfg.device)
            rep = protocol.request(h, _build_request(self.problem, reference_solution(self.problem), self.cfg),
                                   timeout_s=self.cfg.build_timeout_s)
            if not isinstance(rep, protocol.BuildReply):
                h.close()
                return None
            protocol.request(h, protocol.WarmProfiler(), timeout_s=120)
            h.sched0 = self.sched0 or guards.sched_state(h.pid).get(h.pid)
            return h
        except Exception:  # noqa: BLE001 - reference timing is best effort
            return None

    def prestart(self) -> None:
        cfg = self.cfg
        if not cfg.reference_timing or not cfg.timing or self._thread is not None \
                or (self.worker is not None and self.worker.alive):
            return
        box: dict = {}
        th = threading.Thread(target=lambda: box.setdefault("h", self._new()),
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

    def handle(self) -> WorkerHandle | None:
        h = self.take_prestarted()
        if h is not None:
            if self.worker is not None and self.worker is not h:
                self.worker.close()
            self.worker = h
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
