"""Executors of ``solbench run``: where the problem x solution pairs of a run plan are evaluated.

- ``local`` (the default): every pair in this process, one after another, in plan order
  (:func:`solbench.suites.runner.execute`).
- ``ray``: one evaluation worker per device of a Ray cluster (an actor with ``num_gpus=1`` on
  CUDA; ``num_cpus``-based actors on the CPU). Each worker calls the same
  :func:`solbench.pipeline.evaluate_and_score` the local executor calls, through its own
  harness evaluator, so each owns its sandboxed evaluation subprocesses (the candidate's and
  the reference's workers) exactly as the local run does.

Both executors go through :func:`solbench.suites.runner.plan_run`, so ``--resume`` skips the
(solution hash, workload uuid) pairs already in the results file in the same way, and both
hand the evaluator each pair's :class:`~solbench.run.context.TraceContext` with the stamp
``evaluation.executor`` (:class:`~solbench.spec.trace.ExecutorStamp`; ``seq`` is numbered
where the trace is written, :func:`solbench.suites.runner.numbered`):

    {"name": "local" | "ray", "worker": str, "node": str, "pid": int,
     "gpu_uuid": "GPU-..." | None, "attempt": int, "retried": bool, "seq": int}

``gpu_uuid`` is the NVML UUID of the one GPU the evaluation ran on (None on the CPU);
``seq`` is the trace's 1-based position among the traces this run wrote.

Ordering of the results file. The driver alone writes it, one pair's traces at a time as the
pair finishes (one append + fsync per pair): the file is in completion order, each pair's
traces are contiguous and in the problem's workload order, and ``executor.seq`` numbers them
in that order. With one local worker completion order is plan order (problems by path,
candidates by file name). The order does not depend on scheduling once sorted by
:func:`canonical_key` (definition, solution, solution hash, workload uuid): reports that
compare runs sort by it.

Failures. A pair whose worker (actor process, or its node) dies mid-pair gets no trace from
that attempt; it goes back to the queue, runs on another worker when one is free (on the
restarted worker only when no other is left) and its traces carry ``executor.attempt`` > 1,
``executor.retried`` and the advisory finding ``executor_retried`` naming the lost worker
(both in the context the retried pair is sent with: evidence before the status decision).
After ``max_attempts`` lost workers the pair is reported as a harness error and nothing is
written, so a resumed run evaluates it again: never lost, never written twice. An exception
of the evaluator itself (not a candidate failure, which the harness turns into a trace) is a
harness error as in the local executor, and is not retried.
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
from typing import Any, Callable

from ..spec.trace import ExecutorStamp, Finding, Trace
from . import runner as _runner
from .runner import PairPlan, RunOutcome, RunPlan, append_traces, load_error_traces

EXECUTORS = ("local", "ray")

OnPairDone = Callable[[PairPlan, list[Trace]], None]


def canonical_key(trace: Trace) -> tuple[str, str, str, str]:
    """Scheduling-independent sort key of a trace: (definition, solution, solution hash,
    workload uuid). Two runs of one plan sorted by it line up trace for trace."""
    return (trace.definition, trace.solution, trace.evaluation.solution_hash or "",
            trace.workload.uuid)


# --- the device a worker sees ----------------------------------------------------------------
def visible_devices(env: dict[str, str] | None = None) -> list[str] | None:
    """Entries of CUDA_VISIBLE_DEVICES (indices or ``GPU-``/``MIG-`` UUIDs); None when unset."""
    v = (env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES")
    if v is None:
        return None
    return [x.strip() for x in v.split(",") if x.strip()]


def nvml_uuid(visible: list[str] | None, torch_uuid: str | None = None) -> str | None:
    """NVML UUID (``GPU-xxxxxxxx-...``) of the one GPU this process uses.

    ``torch_uuid``: the UUID CUDA reports for device 0 (``torch.cuda.get_device_properties(0).uuid``);
    it decides when given, because CUDA's device order need not be NVML's (PCI bus) order, and
    NVML is asked to confirm it. Otherwise the single CUDA_VISIBLE_DEVICES entry (an index in
    NVML order, or a UUID) is looked up. Returns None when NVML is unavailable.
    """
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver: no UUID
        return None
    try:
        def _s(x):
            return x.decode() if isinstance(x, bytes) else str(x)

        if torch_uuid:
            want = torch_uuid if torch_uuid.startswith(("GPU-", "MIG-")) else f"GPU-{torch_uuid}"
            h = pynvml.nvmlDeviceGetHandleByUUID(want)
            return _s(pynvml.nvmlDeviceGetUUID(h))
        if visible and len(visible) == 1:
            e = visible[0]
            h = (pynvml.nvmlDeviceGetHandleByUUID(e) if e.startswith(("GPU-", "MIG-"))
                 else pynvml.nvmlDeviceGetHandleByIndex(int(e)))
            return _s(pynvml.nvmlDeviceGetUUID(h))
        if visible is None and pynvml.nvmlDeviceGetCount() == 1:
            return _s(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0)))
        return None
    except Exception:  # noqa: BLE001 - an unknown UUID or index: record none rather than a wrong one
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _torch_uuid(index: int = 0) -> str | None:
    import torch

    try:
        u = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    except Exception:  # noqa: BLE001
        return None
    return str(u) if u is not None else None


def device_identity(device: str, *, exclusive: bool = False) -> dict[str, Any]:
    """Who evaluates: host, pid and, on CUDA, the NVML UUID of the GPU ``device`` names.

    ``exclusive``: assert the process sees exactly one GPU (a Ray GPU worker: Ray sets
    CUDA_VISIBLE_DEVICES to the one GPU it assigned). Raises RuntimeError, naming what was seen,
    when it sees none or several.
    """
    import torch

    ident: dict[str, Any] = {"node": socket.gethostname(), "pid": os.getpid(), "gpu_uuid": None}
    if torch.device(device).type != "cuda":
        return ident
    vis = visible_devices()
    if exclusive:
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if vis is None or len(vis) != 1 or n != 1:
            raise RuntimeError(
                f"a GPU worker must see exactly one GPU: CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}, "
                f"torch.cuda.device_count()={n}")
    idx = torch.device(device).index or 0
    ident["gpu_uuid"] = nvml_uuid(vis if idx == 0 else None, _torch_uuid(idx))
    ident["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return ident


def _retry_finding(attempt: int, lost: list[dict]) -> Finding:
    """The advisory finding of a pair evaluated again after its worker died mid-pair."""
    note = (f"evaluated on attempt {attempt}: "
            + "; ".join(f"worker {l['worker']} (node {l['node']}, pid {l['pid']}) died "
                        f"mid-pair ({l['error'][:120]})" for l in lost))
    return Finding(check="executor_retried", severity="advisory", message=note,
                   evidence={"attempt": attempt, "lost": lost})


# --- local ----------------------------------------------------------------------------------
class LocalExecutor:
    """Every pair in this process, in plan order (:func:`runner.execute`); each trace is
    stamped ``executor.name`` "local" through its context."""

    name = "local"

    def __init__(self, evaluator=None):
        self._evaluator = evaluator

    def run(self, plan: RunPlan, results_path: Path, device: str, *,
            eval_options: dict | None = None, on_pair_done: OnPairDone | None = None,
            on_trace=None) -> RunOutcome:
        """``on_trace(pair, trace)`` after each trace is written (workload by workload when
        the evaluator streams, which the default one does)."""
        inner = self._evaluator or _runner.make_default_evaluator(eval_options)
        stamp = ExecutorStamp(name="local", worker="local", **device_identity(device), attempt=1, retried=False)
        if not (isinstance(inner, _runner._SharedEvaluator) or getattr(inner, "streams", False)):
            # an evaluator that takes no context: its traces are stamped as they come back
            plain = inner

            def inner(problem, solution, dev, uuids):
                return [t.model_copy(update={"evaluation": t.evaluation.model_copy(update={"executor": stamp})})
                        for t in plain(problem, solution, dev, uuids)]
        try:
            return _runner.execute(plan, results_path, device, evaluator=inner, on_pair_done=on_pair_done,
                                   on_trace=on_trace, context={"executor": stamp})
        finally:
            if self._evaluator is None and hasattr(inner, "close"):
                inner.close()


# --- ray ------------------------------------------------------------------------------------
class EvalWorker:
    """One evaluation worker (a Ray actor): one device, one harness evaluator kept between
    pairs of the same problem (the reference's timing worker is reused, as in a local run)."""

    def __init__(self, device: str, options: dict | None, exclusive_gpu: bool):
        self.device = device
        self.ident = device_identity(device, exclusive=exclusive_gpu)
        self.ev = _runner.make_default_evaluator(options)
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
                 start_timeout_s: float = 600.0):
        self.address = address
        self.workers = workers
        self.cpus_per_worker = cpus_per_worker
        self.max_attempts = max_attempts
        self.on_dispatch = on_dispatch
        self.start_timeout_s = start_timeout_s
        self.slots: list[_Slot] = []
        self._seq = 0  # traces written by the current run

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

    def _new_actor(self, ray, cuda: bool, device: str, options: dict | None, cpus: float):
        cls = ray.remote(EvalWorker)
        return cls.options(num_gpus=1 if cuda else 0, num_cpus=cpus,
                           max_restarts=1, max_task_retries=0).remote(
            "cuda" if cuda else device, options, cuda)

    # -------------------------------------------------------------- run
    def run(self, plan: RunPlan, results_path: Path, device: str, *,
            eval_options: dict | None = None, on_pair_done: OnPairDone | None = None,
            on_trace=None) -> RunOutcome:
        """``on_trace(pair, trace)`` after each trace is written (a pair's traces arrive
        together from its worker)."""
        import torch

        cuda = torch.device(device).type == "cuda"
        written: list[Trace] = []
        errors: list[str] = []
        self._seq = 0

        def write(pair: PairPlan, traces: list[Trace]) -> None:
            traces = _runner.numbered(traces, self._seq)
            append_traces(results_path, traces)
            self._seq += len(traces)
            written.extend(traces)
            if on_trace is not None:
                for t in traces:
                    on_trace(pair, t)
            if on_pair_done:
                on_pair_done(pair, traces)

        tasks: deque[_Task] = deque()
        for i, pair in enumerate(plan.pairs):
            if not pair.todo:
                if on_pair_done:
                    on_pair_done(pair, [])
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
            return self._run_ray(plan, tasks, cuda, device, eval_options, write, errors, written)

    def _run_ray(self, plan, tasks, cuda, device, eval_options, write, errors, written) -> RunOutcome:
        ray, started = self._connect()
        try:
            self._run_tasks(ray, tasks, cuda, device, eval_options, write, errors)
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

    def _run_tasks(self, ray, tasks: deque, cuda: bool, device: str, options: dict | None,
                   write: Callable[[PairPlan, list[Trace]], None], errors: list[str]) -> None:
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        n = min(self._n_workers(ray, cuda), len(tasks))
        cpus = self.cpus_per_worker
        if not cuda:  # --workers N on the CPU always fits the cluster (each takes a share)
            cpus = min(cpus, float(ray.cluster_resources().get("CPU", 1)) / n)
        self.slots = [_Slot(f"w{k}", self._new_actor(ray, cuda, device, options, cpus))
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
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=5.0)
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
        return _runner.pair_context(task.pair, executor=stamp, findings=found)


def make_executor(name: str, *, address: str | None = None, workers: int | None = None,
                  on_dispatch=None):
    """The executor called ``name`` (``local`` or ``ray``). Raises ValueError otherwise."""
    if name == "local":
        if address is not None or workers is not None:
            raise ValueError("--address and --workers need --executor ray")
        return LocalExecutor()
    if name == "ray":
        return RayExecutor(address=address, workers=workers, on_dispatch=on_dispatch)
    raise ValueError(f"executor {name!r}: expected one of {', '.join(EXECUTORS)}")
