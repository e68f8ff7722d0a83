"""The Ray executor: one evaluation worker per device of a Ray cluster (an actor with
``num_gpus=1`` on CUDA; ``num_cpus``-based actors on the CPU). Each worker runs a
:class:`solbench.run.session.Session`, so each owns its sandboxed evaluation subprocesses
(the candidate's and the reference's workers) exactly as the local run does.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ... import limits
from ...harness import finding
from ...spec.trace import ExecutorStamp, Finding, Trace
from .. import session as _session
from ..plan import PairPlan, RunPlan
from ..sinks import run_sinks
from .base import OnPairDone, RunOutcome, load_error_traces, pair_context
from .identity import device_identity

if TYPE_CHECKING:  # pragma: no cover
    from ...harness import EvalConfig


def _retry_finding(attempt: int, lost: list[dict]) -> Finding:
    """The advisory finding of a pair evaluated again after its worker died mid-pair."""
    note = (f"evaluated on attempt {attempt}: "
            + "; ".join(f"worker {l['worker']} (node {l['node']}, pid {l['pid']}) died "
                        f"mid-pair ({l['error'][:120]})" for l in lost))
    return finding("executor_retried", note, {"attempt": attempt, "lost": lost})


class EvalWorker:
    """One evaluation worker (a Ray actor): one device, one harness evaluator kept between
    pairs of the same problem (the reference's timing worker is reused, as in a local run)."""

    def __init__(self, device: str, config: "EvalConfig | None", exclusive_gpu: bool):
        self.device = device
        self.ident = device_identity(device, exclusive=exclusive_gpu)
        self.ev = _session.make_default_evaluator(config)
        self._problem_key = None
        self._problem = None

    def identity(self) -> dict[str, Any]:
        return self.ident

    def evaluate(self, problem_key: str, problem, solution, uuids: list[str], context=None):
        """Traces (strict JSON lines) of ``solution`` on ``uuids``, and who made them.
        ``context``: the pair's :class:`~solbench.run.context.TraceContext` from the driver;
        its executor stamp gets this worker's node, pid and GPU."""
        # one Problem object per problem, so the shared evaluator sees consecutive pairs of a
        # problem as the same problem (each task deserialises its own copy)
        if problem_key != self._problem_key:
            self._problem_key, self._problem = problem_key, problem
        if context is not None and context.executor is not None:
            who = {k: self.ident.get(k) for k in ("node", "pid", "gpu_uuid")}
            context = context.with_(executor=context.executor.model_copy(update=who))
        traces = self.ev(self._problem, solution, self.device, list(uuids), context=context)
        return self.ident, [t.to_json_line() for t in traces]

    def pid(self) -> int:
        return os.getpid()


@dataclass
class _Task:
    index: int
    pair: PairPlan
    attempt: int = 1
    lost: list[dict] = field(default_factory=list)


@dataclass
class _Slot:
    name: str
    actor: Any
    last_problem: str | None = None
    state: str = "starting"  # starting | idle | busy | recovering | dead
    ident: dict | None = None


def _problem_key(p) -> str:
    return f"{p.name}@{p.path}"


class RayExecutor:
    """Evaluate the pairs of a plan on a Ray cluster, one worker per device.

    Args:
        address: Ray cluster address (``ray.init(address=...)``); None: the cluster this
            process already joined, else a new local one.
        workers: number of workers; default every GPU of the cluster on CUDA, on the CPU half
            its CPUs (each evaluation runs its candidate's and its reference's worker processes
            beside the actor).
        cpus_per_worker: Ray CPU resources each worker reserves (on the CPU at most the
            cluster's CPUs / workers, so that ``workers`` always fit).
        max_attempts: lost workers a pair may see before it is given up (a harness error).
        on_dispatch: called with (pair, worker name, attempt) as a pair is sent to a worker
            (progress display; tests use it to kill a worker mid-pair).
        start_timeout_s: how long the workers may take to start before the run fails.
    """

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None,
                 cpus_per_worker: float = 1.0, max_attempts: int = 3,
                 on_dispatch: Callable[[PairPlan, str, int], None] | None = None,
                 start_timeout_s: float = limits.RAY_START_S):
        self.address = address
        self.workers = workers
        self.cpus_per_worker = cpus_per_worker
        self.max_attempts = max_attempts
        self.on_dispatch = on_dispatch
        self.start_timeout_s = start_timeout_s
        self.slots: list[_Slot] = []

    # -------------------------------------------------------------- cluster
    @staticmethod
    def _ray():
        try:
            import ray
        except ImportError:  # pragma: no cover - depends on the install
            raise RuntimeError("--executor ray needs Ray: pip install 'solbench[ray]'") from None
        return ray

    def _connect(self):
        ray = self._ray()
        started = False
        if not ray.is_initialized():
            kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "configure_logging": False}
            if self.address:
                ray.init(address=self.address, **kw)
            else:
                ray.init(**kw)
            started = True
        return ray, started

    def _n_workers(self, ray, cuda: bool) -> int:
        res = ray.cluster_resources()
        if self.workers is not None:
            return int(self.workers)
        if cuda:
            n = int(res.get("GPU", 0))
            if n < 1:
                raise RuntimeError("--executor ray --device cuda: the Ray cluster has no GPU")
            return n
        return max(1, int(res.get("CPU", 1) // 2))

    def _new_actor(self, ray, cuda: bool, device: str, config: "EvalConfig | None", cpus: float):
        cls = ray.remote(EvalWorker)
        return cls.options(num_gpus=1 if cuda else 0, num_cpus=cpus,
                           max_restarts=1, max_task_retries=0).remote(
            "cuda" if cuda else device, config, cuda)

    # -------------------------------------------------------------- run
    def run(self, plan: RunPlan, results_path: Path, device: str, *,
            config: "EvalConfig | None" = None, on_pair_done: OnPairDone | None = None,
            on_trace=None, sinks=()) -> RunOutcome:
        """``on_trace(pair, trace)`` after each trace is written (a pair's traces arrive
        together from its worker); ``sinks``: further :class:`~solbench.run.sinks.TraceSink`."""
        import torch

        cuda = torch.device(device).type == "cuda"
        errors: list[str] = []
        out = run_sinks(results_path, on_trace, on_pair_done, sinks)
        written = out.written

        def write(pair: PairPlan, traces: list[Trace]) -> None:
            out.pair_done(pair, out.traces(pair, traces))

        tasks: deque[_Task] = deque()
        for i, pair in enumerate(plan.pairs):
            if not pair.todo:
                out.pair_done(pair, [])
            elif pair.candidate.solution is None:  # no worker needed: the file did not load
                stamp = ExecutorStamp(name="ray", worker="driver", node=socket.gethostname(),
                                      pid=os.getpid(), gpu_uuid=None, attempt=1, retried=False)
                write(pair, load_error_traces(pair, device, executor=stamp))
            else:
                tasks.append(_Task(i, pair))
        if not tasks:
            return RunOutcome(traces=written, harness_errors=errors)

        # Ray's driver prints its cluster's messages ("(raylet) A worker died ...") on
        # sys.stdout from a thread: while Ray runs they go to stderr, so stdout carries only
        # what the caller prints (`solbench run --json` stays strict JSON)
        with contextlib.redirect_stdout(sys.stderr):
            return self._run_ray(plan, tasks, cuda, device, config, write, errors, written)

    def _run_ray(self, plan, tasks, cuda, device, config, write, errors, written) -> RunOutcome:
        ray, started = self._connect()
        try:
            self._run_tasks(ray, tasks, cuda, device, config, write, errors)
        finally:
            for s in self.slots:
                try:
                    ray.kill(s.actor)
                except Exception:  # noqa: BLE001
                    pass
            self.slots = []
            if started:
                ray.shutdown()
        return RunOutcome(traces=written, harness_errors=errors)

    def _run_tasks(self, ray, tasks: deque, cuda: bool, device: str, config: "EvalConfig | None",
                   write: Callable[[PairPlan, list[Trace]], None], errors: list[str]) -> None:
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        n = min(self._n_workers(ray, cuda), len(tasks))
        cpus = self.cpus_per_worker
        if not cuda:  # --workers N on the CPU always fits the cluster (each takes a share)
            cpus = min(cpus, float(ray.cluster_resources().get("CPU", 1)) / n)
        self.slots = [_Slot(f"w{k}", self._new_actor(ray, cuda, device, config, cpus))
                      for k in range(n)]
        problem_refs: dict[str, Any] = {}
        pending: dict[Any, tuple[str, _Slot, _Task | None]] = {}  # ref -> (kind, slot, task)
        for s in self.slots:
            pending[s.actor.identity.remote()] = ("identity", s, None)
        t_start = time.monotonic()

        def pick(slot: _Slot) -> _Task | None:
            busy_others = any(x.state in ("busy", "starting", "recovering") and x is not slot
                              for x in self.slots)
            choice = None
            for t in tasks:
                if t.lost and any(l["worker"] == slot.name for l in t.lost) and busy_others:
                    continue  # retried elsewhere while another worker may take it
                if choice is None:
                    choice = t
                if slot.last_problem == _problem_key(t.pair.problem):
                    choice = t  # keep the problem's evaluator (and reference worker) warm
                    break
            if choice is not None:
                tasks.remove(choice)
            return choice

        def dispatch() -> None:
            for s in self.slots:
                if s.state != "idle" or not tasks:
                    continue
                t = pick(s)
                if t is None:
                    continue
                key = _problem_key(t.pair.problem)
                if key not in problem_refs:
                    problem_refs[key] = ray.put(t.pair.problem)
                ref = s.actor.evaluate.remote(key, problem_refs[key], t.pair.candidate.solution,
                                              [w.uuid for w in t.pair.todo], self._context(s, t))
                s.state, s.last_problem = "busy", key
                pending[ref] = ("evaluate", s, t)
                if self.on_dispatch:
                    self.on_dispatch(t.pair, s.name, t.attempt)

        def give_up(t: _Task, why: str) -> None:
            errors.append(f"{t.pair.problem.name} / {t.pair.candidate.path.name}: {why}")

        while tasks or any(k == "evaluate" for k, _, _ in pending.values()):
            dispatch()
            if not pending:
                # every worker is dead: what is left is reported, not written (resume retries)
                for t in list(tasks):
                    give_up(t, "no Ray worker left to evaluate it")
                tasks.clear()
                break
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=limits.RAY_POLL_S)
            if not ready:
                if (time.monotonic() - t_start > self.start_timeout_s
                        and not any(s.state in ("idle", "busy", "recovering") for s in self.slots)):
                    raise RuntimeError(
                        f"no Ray worker started within {self.start_timeout_s:.0f} s "
                        f"(cluster resources: {ray.cluster_resources()})")
                continue
            ref = ready[0]
            kind, slot, task = pending.pop(ref)
            if kind in ("identity", "ping"):
                try:
                    slot.ident = ray.get(ref)
                    slot.state = "idle"
                except RayActorError as e:
                    if kind == "identity" and "exactly one GPU" in str(e):
                        raise RuntimeError(f"Ray worker {slot.name}: {e}") from None
                    slot.state = "dead"
                except RayTaskError as e:  # __init__ raised (e.g. not exactly one GPU)
                    raise RuntimeError(f"Ray worker {slot.name} failed to start: {e}") from None
                continue
            try:
                ident, lines = ray.get(ref)
            except RayActorError as e:
                # the worker process (or its node) died mid-pair: nothing of this attempt was
                # written; the pair goes back to the queue, the worker is pinged (Ray restarts
                # it once) before it gets work again
                lost = {"worker": slot.name, "node": (slot.ident or {}).get("node"),
                        "pid": (slot.ident or {}).get("pid"),
                        "gpu_uuid": (slot.ident or {}).get("gpu_uuid"),
                        "error": f"{type(e).__name__}: {str(e)[:300]}"}
                task.lost.append(lost)
                task.attempt += 1
                if task.attempt > self.max_attempts:
                    give_up(task, f"lost its Ray worker {len(task.lost)} times; last: {lost['error']}")
                else:
                    tasks.appendleft(task)
                slot.state, slot.last_problem, slot.ident = "recovering", None, None
                pending[slot.actor.identity.remote()] = ("ping", slot, None)
                continue
            except RayTaskError as e:
                slot.state = "idle"
                cause = getattr(e, "cause", None) or e
                give_up(task, f"{type(cause).__name__}: {cause}")
                continue
            slot.state, slot.ident = "idle", ident
            write(task.pair, [Trace.from_json_line(x) for x in lines])

    @staticmethod
    def _context(slot: "_Slot", task: "_Task"):
        """The pair's context as it is sent to ``slot``: its executor stamp (the worker fills
        in its node, pid and GPU) and, on a later attempt, the finding naming the lost
        workers."""
        retried = task.attempt > 1
        stamp = ExecutorStamp(name="ray", worker=slot.name, attempt=task.attempt, retried=retried,
                              **({"lost": list(task.lost)} if task.lost else {}))
        found = (_retry_finding(task.attempt, list(task.lost)),) if task.lost else ()
        return pair_context(task.pair, executor=stamp, findings=found)
