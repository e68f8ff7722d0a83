"""The warm evaluation service behind ``solbench serve`` (no HTTP here: :mod:`.app` is the
web layer, this module the state and the scheduling).

Per device a :class:`Lane`: one thread that runs one evaluation at a time, in the order of a
:class:`~.queue.FairQueue` (FIFO per client, round-robin across clients), through the same
function ``solbench eval`` calls (:func:`solbench.run.session.evaluate_and_score`). What a lane
keeps between evaluations is what does not depend on the candidate:

- per problem, a :class:`solbench.harness.Evaluator`: the problem loaded and checked, its
  reference module built in the parent (the trusted oracle of the correctness rounds and
  the fp64 truth), and the eager reference's worker started and built (trusted code only;
  replaced after any candidate that crashed, hung or cheated, as in a suite run);
- the SOL bounds of every (problem, workload, hardware) counted so far (``sol_cache``, on
  top of the on-disk counts cache, :mod:`solbench.sol.cache`);
- a :class:`solbench.harness.workers.SparePool`: workers started ahead of need (spawned,
  sandboxed, torch imported, profiler warmed; no candidate code). Each is handed out once:
  a candidate's worker is never reused for another candidate, and a spare for the next
  candidate starts while the current one runs (stopped while a timed window is open).

What is not kept, on purpose: the eager reference's *timings* (the harness times the
reference in blocks interleaved with the candidate's, in the same window, so both see the
same machine state: a figure from an earlier evaluation would not be that); and the inputs
and fp64 truths of a seeded run (each evaluation's inputs come from its own seed; a cache of
truths by seed would hold a whole workload's tensors per seed for a rare hit).

Candidates never take a lane down: the harness turns any crash, hang or cheat into a
status; any other exception of an evaluation fails that job with its message, drops that
problem's state, and the lane goes on.
"""

from __future__ import annotations

import collections
import os
import secrets
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import limits
from ..errors import SolbenchError
from .api import EvalRequest, JobView
from .queue import FairQueue

#: jobs queued across all clients, and bytes their requests hold (:class:`Service`): 4 x the
#: per-client default of jobs, and 64 requests at the HTTP layer's 16 MiB body bound
MAX_QUEUED_TOTAL = 1024
MAX_QUEUED_BYTES = 1 << 30

#: job states after which nothing changes
FINAL = ("done", "failed", "cancelled")


class RequestError(SolbenchError):
    """A request the service refuses: ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(eq=False)
class Job:
    """One submitted evaluation. Mutated by its lane's thread under ``cv``."""

    id: str
    client: str
    req: EvalRequest
    problem: Any  # solbench.spec.Problem
    problem_key: tuple
    solution: Any  # solbench.spec.Solution
    device: str
    state: str = "queued"
    traces: list = field(default_factory=list)
    stages: list = field(default_factory=list)
    error: str | None = None
    submitted_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    #: set when the server stops: a long-poll on the job returns at once
    released: bool = False
    cv: threading.Condition = field(default_factory=threading.Condition)
    #: the solution's name, kept after ``solution`` is dropped (a finished job)
    solution_name: str = field(init=False, default="")
    #: bytes of the request as JSON: what the job holds while queued (its sources)
    request_bytes: int = 0

    def __post_init__(self) -> None:
        self.solution_name = self.solution.name

    def view(self, after: int = 0, position: int | None = None) -> JobView:
        with self.cv:
            return JobView(id=self.id, client=self.client, state=self.state,  # type: ignore[arg-type]
                           problem=self.problem.name, solution=self.solution_name,
                           device=self.device, position=position, n_traces=len(self.traces),
                           traces=list(self.traces[max(after, 0):]), stages=list(self.stages),
                           error=self.error, submitted_at=self.submitted_at,
                           started_at=self.started_at, finished_at=self.finished_at)

    def wait(self, after: int, n_stages: int, timeout: float) -> None:
        """Block until the job has more than ``after`` traces or ``n_stages`` stages, or is
        final, or ``timeout`` seconds pass."""
        with self.cv:
            self.cv.wait_for(lambda: self.state in FINAL or len(self.traces) > after
                             or len(self.stages) > n_stages or self.released,
                             timeout=max(0.0, timeout))

    def _set(self, **kw) -> None:
        with self.cv:
            for k, v in kw.items():
                setattr(self, k, v)
            if self.state in FINAL and self.solution is not None:
                # a finished job is kept for clients to fetch (Service.keep_jobs of them):
                # without the candidate's sources (up to --max-body each), only its name
                self.solution = None
                self.req = self.req.model_copy(update={"solution": None})
            self.cv.notify_all()


def _signature(path: Path) -> tuple:
    """What identifies a problem's files on disk now (a changed file is a new problem):
    (name, size, mtime_ns) of ``definition.json``, ``workload.jsonl`` (a directory) or the
    file itself (a KernelBench ``.py``)."""
    files = [path / "definition.json", path / "workload.jsonl"] if path.is_dir() else [path]
    sig = []
    for f in files:
        try:
            st = f.stat()
            sig.append((f.name, st.st_size, st.st_mtime_ns))
        except OSError:
            sig.append((f.name, None, None))
    return tuple(sig)


class Lane:
    """One device's evaluations: a thread, its fair queue, its spares and per-problem state
    (module doc). ``max_problems``: problems whose state is kept (least recently used one
    dropped first)."""

    def __init__(self, service: "Service", device: str, spares: int, max_problems: int):
        self.service = service
        self.device = device
        self.queue: FairQueue[Job] = FairQueue()
        self.max_problems = max_problems
        self.evaluators: "collections.OrderedDict[tuple, Any]" = collections.OrderedDict()
        self.sol_cache: dict = {}
        self.running: Job | None = None
        self.done = 0
        self.spares = None
        if spares > 0:
            from ..harness import SparePool

            self.spares = SparePool(device, spares)
            self.spares.fill()
        self.thread = threading.Thread(target=self._loop, name=f"solbench-serve-{device}", daemon=True)
        self.thread.start()

    # ------------------------------------------------------------ the loop
    def _loop(self) -> None:
        while True:
            job = self.queue.get()
            if job is None:
                return
            self.running = job
            try:
                self._run(job)
            finally:
                self.running = None
                self.done += 1
                if self.spares is not None and not self.service.closing:
                    self.spares.fill()  # ready for the next candidate before it is submitted

    def _evaluator(self, job: Job):
        from ..harness import Evaluator

        ev = self.evaluators.pop(job.problem_key, None)
        if ev is None or ev.problem is not job.problem:
            if ev is not None:
                ev.close()
            ev = Evaluator(job.problem, self.service.config_for(job), spares=self.spares)
        self.evaluators[job.problem_key] = ev  # most recently used last
        while len(self.evaluators) > self.max_problems:
            _, old = self.evaluators.popitem(last=False)
            old.close()
        return ev

    def _run(self, job: Job) -> None:
        from ..run.session import evaluate_and_score

        job._set(state="running", started_at=time.time())
        try:
            cfg = self.service.config_for(job)
            ev = self._evaluator(job)

            def on_trace(t) -> None:
                self.service.store(t)
                d = t.model_dump(mode="json")
                with job.cv:
                    job.traces.append(d)
                    job.cv.notify_all()

            def on_stage(line: str) -> None:
                with job.cv:
                    job.stages.append(line)
                    job.cv.notify_all()

            evaluate_and_score(job.problem, job.solution, cfg, hardware=job.req.hardware,
                               sol_model=job.req.sol_model, evaluator=ev, on_trace=on_trace,
                               sol_cache=self.sol_cache, on_stage=on_stage)
            job._set(state="done", finished_at=time.time())
        except Exception as e:  # noqa: BLE001 - a fault of one job never ends the lane
            ev = self.evaluators.pop(job.problem_key, None)
            if ev is not None:
                try:
                    ev.close()
                except Exception:  # noqa: BLE001
                    pass
            msg = str(e) if isinstance(e, SolbenchError) else \
                f"{type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"
            job._set(state="failed", error=msg, finished_at=time.time())

    # ------------------------------------------------------------ ending
    def close(self) -> None:
        self.queue.close()
        self.thread.join(timeout=limits.LANE_JOIN_S)
        for ev in self.evaluators.values():
            try:
                ev.close()
            except Exception:  # noqa: BLE001
                pass
        self.evaluators.clear()
        if self.spares is not None:
            self.spares.close()


class Service:
    """The jobs, the lanes (one per device, made on first use) and the checks of a request.

    ``roots``: folders whose problems may be evaluated (the bundled suites always may); a
    problem's reference runs in this process, so only trusted problems belong there.
    ``device``: the device of a request that names none. ``output``: a results file every
    trace is appended to, signed (:func:`solbench.store.append_traces`). ``max_queued``: jobs
    one client may have queued (more is answered 429). ``max_queued_total`` and
    ``max_queued_bytes``: jobs, and bytes of their requests (JSON), queued across all clients
    (429 beyond): the ``client`` label is the request's own word, so a submitter that changes
    it per request passes the per-client bound, never these, and the memory queued requests
    hold stays bounded whatever the labels. ``keep_jobs``: finished jobs kept for clients to
    fetch (oldest dropped first)."""

    def __init__(self, roots: list[Path], device: str, *, spares: int = 3, max_problems: int = 16,
                 output: Path | None = None, max_queued: int = 256,
                 max_queued_total: int = MAX_QUEUED_TOTAL, max_queued_bytes: int = MAX_QUEUED_BYTES,
                 keep_jobs: int = 1000):
        from ..suites import DATA_ROOT

        self.roots = [Path(r).resolve() for r in roots] + [DATA_ROOT.resolve()]
        self.device = device
        self.spares = spares
        self.max_problems = max_problems
        self.output = output
        self.max_queued = max_queued
        self.max_queued_total = max_queued_total
        self.max_queued_bytes = max_queued_bytes
        self.keep_jobs = keep_jobs
        self.jobs: "collections.OrderedDict[str, Job]" = collections.OrderedDict()
        self.lanes: dict[str, Lane] = {}
        #: loaded problems by resolved path: (file signature, Problem), least recently used first
        self.problems: "collections.OrderedDict[Path, tuple[tuple, Any]]" = collections.OrderedDict()
        self.closing = False
        self.started_at = time.time()
        self._lock = threading.RLock()
        self._store_lock = threading.Lock()

    # ------------------------------------------------------------ requests
    def resolve_problem(self, arg: str) -> Path:
        """The problem ``arg`` names, resolved (symlinks followed). Raises RequestError 404
        when there is no such problem, 403 when it lies outside the allowed roots."""
        from ..suites import resolve_problem

        p = resolve_problem(arg)
        if not Path(p).exists():
            raise RequestError(404, f"{arg}: no such problem (a problem directory, a KernelBench "
                                    ".py, or a bundled problem such as l1/relu_fp32)")
        real = Path(p).resolve()
        if not any(real == r or real.is_relative_to(r) for r in self.roots):
            raise RequestError(403, f"{arg}: outside the server's allowed roots "
                                    f"({', '.join(map(str, self.roots))}); start the server "
                                    "with --root DIR to allow a folder")
        return real

    def load_problem(self, path: Path):
        """The loaded problem at ``path``, reused while its files are unchanged."""
        from ..spec import load_problem

        sig = _signature(path)
        with self._lock:
            got = self.problems.get(path)
            if got is not None and got[0] == sig:
                self.problems.move_to_end(path)
                return got[1], (str(path), sig)
        try:
            prob = load_problem(path)
        except SolbenchError as e:
            raise RequestError(400, str(e)) from None
        with self._lock:
            self.problems[path] = (sig, prob)
            self.problems.move_to_end(path)
            while len(self.problems) > 4 * self.max_problems:  # a bound on what clients can fill
                self.problems.popitem(last=False)
        return prob, (str(path), sig)

    def check_device(self, device: str | None) -> str:
        dev = device or self.device
        if dev.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise RequestError(400, f"device: {dev!r}: the server has no CUDA device")
            idx = int(dev.split(":")[1]) if ":" in dev else 0
            if idx >= torch.cuda.device_count():
                raise RequestError(400, f"device: {dev!r}: the server has "
                                        f"{torch.cuda.device_count()} CUDA device(s)")
        return dev

    def check_hardware(self, hardware: str | None) -> None:
        if hardware is None or hardware.lower() == "none":
            return
        from ..sol import load_hardware

        # load_hardware reads any value that names an existing path (a bare file name, "..")
        # or ends in .toml, so each of those must lie under a root
        if "/" in hardware or Path(hardware).suffix == ".toml" or Path(hardware).exists():
            real = Path(hardware).resolve()
            if not any(real.is_relative_to(r) for r in self.roots):
                raise RequestError(403, f"hardware: {hardware}: outside the server's allowed roots")
        try:
            load_hardware(hardware)
        except (SolbenchError, OSError) as e:
            raise RequestError(400, f"hardware: {e}") from None

    def submit(self, req: EvalRequest) -> Job:
        """Check ``req`` and queue it. Raises RequestError (400 bad field, 403 path outside
        the roots, 404 no such problem, 429 too many queued, 503 shutting down)."""
        from pydantic import ValidationError

        from ..harness import device_key
        from ..spec import Solution, reference_solution

        if self.closing:
            raise RequestError(503, "the server is shutting down")
        path = self.resolve_problem(req.problem)
        prob, key = self.load_problem(path)
        if req.solution is None:
            sol = reference_solution(prob)
        else:
            try:
                sol = Solution.model_validate(req.solution)
            except ValidationError as e:
                err = e.errors()[0]
                loc = ".".join(str(x) for x in ("solution", *err.get("loc", ())))
                raise RequestError(400, f"{loc}: {err.get('msg')}") from None
        if req.workloads is not None:
            known = {w.uuid for w in prob.workloads}
            bad = [u for u in req.workloads if u not in known]
            if bad:
                raise RequestError(400, f"workloads: {bad[0]!r} is not a workload of {prob.name}")
            if not req.workloads:
                raise RequestError(400, "workloads: empty list (null evaluates all)")
        dev = self.check_device(req.device)
        self.check_hardware(req.hardware)
        job = Job(id=secrets.token_hex(8), client=req.client, req=req, problem=prob,
                  problem_key=(key, dev), solution=sol, device=dev,
                  request_bytes=len(req.model_dump_json()))
        with self._lock:
            lane = self._lane(device_key(dev))
            queued = [j for j in self.jobs.values() if j.state == "queued"]
            if sum(1 for j in queued if j.client == req.client) >= self.max_queued:
                raise RequestError(429, f"client {req.client!r} has {self.max_queued} jobs queued already")
            if len(queued) >= self.max_queued_total:
                raise RequestError(429, f"the server has {len(queued)} jobs queued (all clients), "
                                        f"at most {self.max_queued_total}; submit again later")
            held = sum(j.request_bytes for j in queued)
            if held + job.request_bytes > self.max_queued_bytes:
                raise RequestError(429, f"queued requests hold {held:,} bytes (all clients); this one's "
                                        f"{job.request_bytes:,} would pass the server's {self.max_queued_bytes:,}; "
                                        "submit again later")
            self.jobs[job.id] = job
            self._forget_old()
            lane.queue.put(job.client, job)
        return job

    def _lane(self, key: str) -> Lane:
        lane = self.lanes.get(key)
        if lane is None:
            lane = self.lanes[key] = Lane(self, key, self.spares,
                                          self.max_problems)
        return lane

    def _forget_old(self) -> None:
        done = [j for j in self.jobs.values() if j.state in FINAL]
        for j in done[:max(0, len(done) - self.keep_jobs)]:
            self.jobs.pop(j.id, None)

    def config_for(self, job: Job):
        """The harness settings of ``job``, as ``solbench eval`` makes them from its flags."""
        from ..harness import EvalConfig

        r = job.req
        given = {k: v for k, v in (("first_call_timeout_s", r.first_call_timeout_s),
                                   ("build_timeout_s", r.build_timeout_s)) if v is not None}
        return EvalConfig(device=job.device, rounds=r.rounds, iters=r.iters, timing=r.timing,
                          seed=r.seed, workloads=r.workloads, keep_going=r.keep_going,
                          call_timeout_s=r.call_timeout_s, **given)

    def job(self, job_id: str) -> Job:
        with self._lock:
            job = self.jobs.get(job_id)
        if job is None:
            raise RequestError(404, f"no job {job_id!r} (finished jobs are kept for the last "
                                    f"{self.keep_jobs})")
        return job

    def position(self, job: Job) -> int | None:
        lane = self.lanes.get(_key(job.device))
        if lane is None or job.state != "queued":
            return None
        return lane.queue.position(job.client, job)

    def cancel(self, job: Job) -> None:
        """Cancel a queued job. Raises RequestError 409 when it is running or finished."""
        lane = self.lanes.get(_key(job.device))
        if lane is None or not lane.queue.remove(job.client, job):
            raise RequestError(409, f"job {job.id} is {job.state}: only a queued job can be cancelled")
        job._set(state="cancelled", finished_at=time.time())

    def store(self, trace) -> None:
        if self.output is None:
            return
        from ..store import append_traces

        with self._store_lock:
            append_traces(self.output, [trace])

    def status(self) -> dict[str, Any]:
        with self._lock:
            jobs = list(self.jobs.values())
        lanes = {}
        for key, lane in list(self.lanes.items()):
            lanes[key] = {
                "queued": len(lane.queue), "running": lane.running.id if lane.running else None,
                "done": lane.done, "problems": [k[0][0] for k in lane.evaluators],
                "spares_ready": lane.spares.ready() if lane.spares is not None else 0,
                "spares_started": lane.spares.started if lane.spares is not None else 0,
            }
        return {"pid": os.getpid(), "uptime_s": round(time.time() - self.started_at, 1),
                "device": self.device, "roots": [str(r) for r in self.roots], "lanes": lanes,
                "jobs": dict(collections.Counter(j.state for j in jobs))}

    def warm(self, device: str | None = None) -> None:
        """Make the lane of ``device`` (default: the server's) now, so its spares start
        before the first request."""
        from ..harness import device_key

        with self._lock:
            self._lane(device_key(self.check_device(device)))

    def release_waits(self) -> None:
        """Refuse new jobs and end every long-poll now (each answers 503): called as the HTTP
        server starts to stop, which waits for the requests in flight."""
        self.closing = True
        with self._lock:
            jobs = list(self.jobs.values())
        for j in jobs:
            j._set(released=True)

    def close(self) -> None:
        """Refuse new jobs, cancel the queued ones, end the running ones (their workers are
        killed: the harness records them as failed runs) and close every lane."""
        self.closing = True
        with self._lock:
            queued = [j for j in self.jobs.values() if j.state == "queued"]
        for j in queued:
            try:
                self.cancel(j)
            except RequestError:
                pass
        ended = any(lane.running is not None for lane in self.lanes.values())
        if ended:
            from ..harness import shutdown_all

            shutdown_all()
        for lane in list(self.lanes.values()):
            lane.close()
        if ended and not any(lane.thread.is_alive() for lane in self.lanes.values()):
            # the process may outlive its service (a library user's, a test session): once
            # every lane has returned, the harness's shutdown latch must not stop its next
            # evaluation ("solbench is shutting down")
            from ..harness import reopen

            reopen()


def _key(device: str) -> str:
    from ..harness import device_key

    return device_key(device)
