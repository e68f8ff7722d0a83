"""The trusted parent: turns a (problem, solution) pair into one Trace per workload.

What the parent does (threats.md principles 1-5):

1. Inputs are generated here (seeded), copied into shared-memory / CUDA-IPC *slots* and
   sent to the worker; reference outputs are computed here and never leave this process.
2. Correctness: ``rounds`` (>= 5) rounds with fresh seeded inputs; output buffers pre-filled
   with a poison pattern; the upstream tolerance rule plus scale-invariant checks; inputs
   compared bit-for-bit with the parent's pristine copy after every call; on round 0, the
   error against an fp64 truth is compared with the declared-precision reference's own
   error (precision downgrade).
3. Timing: a pool of K slots each holding a distinct input set; a slot is refilled with new
   values before it is used again, so every timed call sees values it has never seen; a
   random sample of timed iterations (chosen here, after the call) is verified against the
   reference; the worker flushes L2 and reports its clocks; the parent keeps its own
   round-trip clock, reads the worker's OS threads and child processes from /proc, and
   interleaves blocks of the eager reference (its own worker) with blocks of the candidate.
4. Any crash, exit, hang or OOM ends as RUNTIME_ERROR / TIMEOUT; the worker is replaced and
   the next workload goes on.
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
import platform
import random
import secrets
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..errors import MissingBlobError, SpecError
from ..inputs import make_inputs
from ..spec.dtypes import to_torch
from ..spec.problem import Problem, reference_solution
from ..spec.solution import Solution
from ..spec.trace import (Correctness, Environment, Evaluation, Finding, Performance, Status,
                          TimingStats, Trace)
from ..spec.workload import Workload
from . import guards
from .correctness import CheckReport, bits_equal, check_outputs, poison_, rel_l2
from .process import ProtocolError, WorkerDied, WorkerHandle, WorkerTimeout
from .shm import ShmArena
from .telemetry import Telemetry, throttled
from .timing import kernel_set_consistency, stats


@dataclass
class EvalConfig:
    """Evaluation settings (None = the device's default).

    Attributes:
        device: "cpu" or "cuda[:i]".
        workloads: uuids (or unique prefixes) or indices to evaluate; None = all.
        max_workloads: keep at most this many (after ``workloads``).
        rounds: correctness rounds with fresh inputs (>= 5 recommended; upstream uses 5).
        warmup: untimed calls before timing.
        iters: timed iterations (default 50 on CUDA, 10 on CPU).
        pool_bytes: memory budget for the slot pool (default 16 GiB CUDA, 1 GiB CPU).
        max_pool: most slots (distinct addresses) kept at once.
        verify: at least this many timed iterations are verified against the reference;
            ``verify_fraction`` of them when that is more. Which ones is drawn from the OS's
            secure random source after nothing of the sample was announced.
        timing / reference_timing: measure the candidate / the eager reference.
        cupti: use torch.profiler (Kineto/CUPTI) device activity on CUDA.
        precision_check: compare errors against an fp64 truth on round 0.
        build_timeout_s, first_call_timeout_s, call_timeout_s: limits (s).
        seed: base seed of the inputs; workload j, input set r uses sha256(seed, j, r). None
            (default): a secret 128-bit seed drawn per evaluation and written to the traces
            (``input_seed``) only when they are made; give one only to reproduce a run, since
            a candidate that knows it can precompute every input.
        log_cap: characters of worker log kept per trace.
    """

    device: str = "cpu"
    workloads: list[str] | None = None
    max_workloads: int | None = None
    rounds: int = 5
    warmup: int | None = None
    iters: int | None = None
    pool_bytes: int | None = None
    max_pool: int = 8
    verify: int = 5
    verify_fraction: float = 0.2
    timing: bool = True
    reference_timing: bool = True
    cupti: bool = True
    precision_check: bool = True
    build_timeout_s: float = 900.0
    first_call_timeout_s: float = 600.0
    call_timeout_s: float = 180.0
    seed: int | None = None
    log_cap: int = 8192
    progress: Callable[[str, int, int], None] | None = None

    @property
    def is_cuda(self) -> bool:
        return torch.device(self.device).type == "cuda"

    def n_iters(self) -> int:
        return self.iters if self.iters is not None else (50 if self.is_cuda else 10)

    def n_warmup(self) -> int:
        return self.warmup if self.warmup is not None else (5 if self.is_cuda else 2)

    def budget(self) -> int:
        return self.pool_bytes if self.pool_bytes is not None else ((16 << 30) if self.is_cuda else (1 << 30))


def environment(device: str) -> Environment:
    libs = {"torch": torch.__version__, "python": platform.python_version()}
    try:
        import triton  # noqa: F401

        libs["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        libs["cuda"] = str(torch.version.cuda)
        hw = torch.cuda.get_device_name(torch.device(device))
    else:
        hw = f"CPU {platform.machine()} ({platform.processor() or 'unknown'})"
    return Environment(hardware=hw, libs=libs)


def select_workloads(problem: Problem, cfg: EvalConfig) -> list[Workload]:
    ws = problem.workloads
    if cfg.workloads:
        out = []
        for key in cfg.workloads:
            if key.isdigit() and int(key) < len(ws):
                out.append(ws[int(key)])
                continue
            hits = [w for w in ws if w.uuid == key] or [w for w in ws if w.uuid.startswith(key)]
            if len(hits) != 1:
                raise SpecError(problem.path, "workloads",
                                f"{key!r} matches {len(hits)} workloads (need exactly one)")
            out.append(hits[0])
        ws = out
    if cfg.max_workloads is not None:
        ws = ws[: cfg.max_workloads]
    return ws


def _seed(base: int, j: int, r: int) -> int:
    """Seed of workload j's input set r: sha256 of (base, j, r), 63 bits. With a secret base
    no seed can be predicted from another (threats.md principle 2)."""
    h = hashlib.sha256(f"{base}:{j}:{r}".encode()).digest()
    return int.from_bytes(h[:8], "little") >> 1


#: device ms after the end marker, outside the harness's copy-out, that count as late work
LATE_WORK_MS = 0.002

#: seconds a thread seen right after a timed call gets to exit before it counts
THREAD_GRACE_S = 0.005

#: IQR / median above which a timing is reported as unstable (advisory ``timing_unstable``)
UNSTABLE_IQR_RATIO = 0.5


def _interposition_finding(what: list[str], when: str) -> Finding:
    return Finding(check="interposition", severity="hack",
                   message=(f"{when}: the candidate left hooks that run its code inside the "
                            f"harness's own steps: {what}"),
                   evidence={"hooks": what})


def _as_list(out: Any) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


class _Slots:
    """K slots of shared input/output tensors plus the parent's pristine copy of each."""

    def __init__(self, problem: Problem, w: Workload, k: int, device: str, first: dict):
        d = problem.definition
        env = d.resolve_axes(w.axes)
        self.names_in = list(d.inputs)
        self.names_out = list(d.outputs)
        self.out_specs = [(d.shape_of(s, env), to_torch(s.dtype)) for s in d.outputs.values()]
        self.k = k
        self.device = device
        self.slots: list[dict] = []
        self.wire: list[dict] = []  # what the worker receives: CUDA tensors or /dev/shm descriptors
        self.pristine: list[dict | None] = [None] * k
        self.arena = ShmArena() if torch.device(device).type == "cpu" else None

        def alloc(shape, stride, dt):
            if self.arena is not None:
                return self.arena.tensor(shape, stride, dt)
            t = (torch.empty_strided(shape, stride, dtype=dt, device=device) if stride is not None
                 else torch.empty(shape, dtype=dt, device=device))
            return t, t

        try:
            self._alloc_all(first, alloc)
        except BaseException:  # a failed allocation leaves no /dev/shm file behind
            self.close()
            raise

    def _alloc_all(self, first: dict, alloc) -> None:
        for _ in range(self.k):
            ins, wins = [], []
            for name in self.names_in:
                v = first[name]
                if isinstance(v, torch.Tensor):
                    t, wt = alloc(tuple(v.shape), tuple(v.stride()) if _dense(v) else None, v.dtype)
                    ins.append(t)
                    wins.append(wt)
                else:
                    ins.append(None)
                    wins.append(None)
            outs, wouts = [], []
            for shape, dt in self.out_specs:
                t, wt = alloc(tuple(shape or ()), None, dt)
                outs.append(t)
                wouts.append(wt)
            self.slots.append({"inputs": ins, "outputs": outs})
            self.wire.append({"inputs": wins, "outputs": wouts})

    def close(self) -> None:
        if self.arena is not None:
            self.arena.close()

    def fill(self, i: int, values: dict) -> dict[str, Any]:
        """Copy an input set into slot i, poison its outputs; return the per-call scalars."""
        slot = self.slots[i]
        scalars = {}
        for j, name in enumerate(self.names_in):
            v = values[name]
            if isinstance(v, torch.Tensor):
                slot["inputs"][j].copy_(v)
            else:
                scalars[str(j)] = v
        for o in slot["outputs"]:
            poison_(o)
        _sync(self.device)
        self.pristine[i] = values
        return scalars

    def inputs_intact(self, i: int) -> list[str]:
        """Names of inputs of slot i whose bits differ from the parent's pristine copy."""
        bad = []
        for j, name in enumerate(self.names_in):
            t = self.slots[i]["inputs"][j]
            if t is None:
                continue
            ref = self.pristine[i][name]
            if not bits_equal(t, ref):
                bad.append(name)
        return bad

    def outputs(self, i: int) -> list[torch.Tensor]:
        return self.slots[i]["outputs"]


def _dense(t: torch.Tensor) -> bool:
    try:
        return t.is_contiguous() or t.is_non_overlapping_and_dense()
    except Exception:  # noqa: BLE001
        return False


class Evaluator:
    """Evaluates solutions of one problem; keeps the reference worker between solutions."""

    def __init__(self, problem: Problem, cfg: EvalConfig):
        self.problem = problem
        self.cfg = cfg
        self.env = environment(cfg.device)
        self._reference: Callable | None = None
        self._ref_worker: WorkerHandle | None = None
        self._ref_thread: threading.Thread | None = None
        self._sched0 = guards.sched_state(os.getpid()).get(os.getpid())
        self._ref_box: dict = {}
        self._phases: dict[str, float] = {}
        self._pending_start_s = 0.0
        self._input_seed: int = 0
        self.telemetry = Telemetry(torch.device(cfg.device).index or 0) if cfg.is_cuda else None

    # ------------------------------------------------------------ reference (trusted)
    def reference(self) -> Callable:
        if self._reference is None:
            self._reference = self.problem.make_reference(self.cfg.device)
        return self._reference

    def run_reference(self, values: dict) -> list[torch.Tensor]:
        args = [values[n] for n in self.problem.definition.inputs]
        with torch.no_grad():
            out = _as_list(self.reference()(*args))
        _sync(self.cfg.device)
        return out

    def truth(self, values: dict) -> list[torch.Tensor] | None:
        """Reference outputs computed with floating inputs (and KernelBench parameters) in
        float64; None when the reference cannot run so."""
        up = {k: (v.double() if isinstance(v, torch.Tensor) and v.dtype in
                  (torch.float32, torch.float16, torch.bfloat16) else v) for k, v in values.items()}
        args = [up[n] for n in self.problem.definition.inputs]
        try:
            ref = self.reference()
            if isinstance(ref, torch.nn.Module):
                ref = copy.deepcopy(ref).double()
            with torch.no_grad():
                out = _as_list(ref(*args))
            _sync(self.cfg.device)
            return out
        except Exception:  # noqa: BLE001 - the reference does not support float64
            return None

    # ------------------------------------------------------------ public
    def evaluate(self, solution: Solution,
                 on_trace: Callable[[Trace], None] | None = None) -> list[Trace]:
        """One Trace per selected workload, in order. ``on_trace`` is called with each Trace
        as soon as its workload finishes (to store it and show progress before the rest)."""
        cfg = self.cfg
        self._input_seed = cfg.seed if cfg.seed is not None else secrets.randbits(128)
        workloads = select_workloads(self.problem, cfg)
        traces: list[Trace] = []

        def emit(tr: Trace) -> None:  # every finished workload passes here
            traces.append(tr)
            if on_trace is not None:
                on_trace(tr)
        handle: WorkerHandle | None = None
        build_info: dict | None = None
        compile_error: str | None = None
        try:
            for j, w in enumerate(workloads):
                if cfg.progress:
                    cfg.progress(w.uuid, j, len(workloads))
                self._phases = {}
                if compile_error is not None:
                    emit(self._trace(solution, w, Status.COMPILE_ERROR, compile_error))
                    continue
                if handle is None or not handle.alive:
                    t_start = time.perf_counter()
                    self._prestart_ref()
                    handle, build_info, compile_error, fail = self._start(solution)
                    self._pending_start_s = time.perf_counter() - t_start
                    if compile_error is not None:
                        emit(self._trace(solution, w, Status.COMPILE_ERROR, compile_error))
                        continue
                    if fail is not None:
                        emit(self._trace(solution, w, fail[0], fail[1]))
                        handle = None
                        continue
                self._open_slots = None
                self._phases = {"worker_start": round(self._pending_start_s, 3)}
                self._pending_start_s = 0.0
                try:
                    tr = self._workload(handle, solution, w, j)
                finally:
                    if self._open_slots is not None:
                        self._open_slots.close()
                emit(tr)
                if tr.evaluation.status in (Status.RUNTIME_ERROR, Status.TIMEOUT, Status.REWARD_HACK):
                    handle.kill()
                    handle = None
        finally:
            if handle is not None:
                handle.close()
            if any(t.evaluation.status in (Status.RUNTIME_ERROR, Status.TIMEOUT, Status.REWARD_HACK)
                   for t in traces):
                # a candidate that crashed, hung or cheated may have touched processes of this
                # user: the next candidate gets a fresh reference worker
                self.close()
        return traces

    def close(self) -> None:
        h = self._take_prestarted()  # a prestarted reference worker is closed too
        if h is not None:
            h.close()
        if self._ref_worker is not None:
            self._ref_worker.close()
            self._ref_worker = None

    # ------------------------------------------------------------ worker lifecycle
    def _start(self, solution: Solution):
        cfg = self.cfg
        try:
            h = WorkerHandle(cfg.device)
        except (WorkerDied, WorkerTimeout) as e:
            return None, None, None, (Status.RUNTIME_ERROR, f"worker failed to start: {e}")
        try:
            status, info = h.request("build", {
                "solution": solution.model_dump_json(), "init_args": list(self.problem.init_args),
                "init_seed": self.problem.init_seed, "build_timeout_s": cfg.build_timeout_s,
            }, timeout_s=cfg.build_timeout_s + 60)
        except WorkerTimeout as e:
            log = h.log_since_last(cfg.log_cap)
            h.kill()
            return None, None, f"build timed out: {e}\n{log}", None
        except (WorkerDied, ProtocolError) as e:
            log = h.log_since_last(cfg.log_cap)
            h.kill()
            return None, None, f"worker died while building: {e}\n{log}", None
        if status == "compile_error":
            h.close()
            return None, None, info["message"], None
        if status != "ok":
            h.close()
            return None, None, f"{info.get('type')}: {info.get('message')}", None
        h.base_tids = guards.thread_ids(h.pid)
        # no baseline of children: a process the candidate started while being imported is as
        # unexplained as one started later; only runtime helpers (by real executable) pass
        h.base_kids = set()
        return h, info, None, None

    def _new_ref_worker(self) -> WorkerHandle | None:
        try:
            h = WorkerHandle(self.cfg.device)
            st, info = h.request("build", {
                "solution": reference_solution(self.problem).model_dump_json(),
                "init_args": list(self.problem.init_args), "init_seed": self.problem.init_seed,
                "build_timeout_s": self.cfg.build_timeout_s,
            }, timeout_s=self.cfg.build_timeout_s)
            if st != "ok":
                h.close()
                return None
            h.request("warm_profiler", timeout_s=120)
            # the baseline is this process's own state when the Evaluator was made, before
            # any candidate ran: a worker inherits it, so a candidate that demoted this process
            # (or the new worker while it started beside the candidate's) is seen too
            h.sched0 = self._sched0 or guards.sched_state(h.pid).get(h.pid)
            return h
        except Exception:  # noqa: BLE001
            return None

    def _prestart_ref(self) -> None:
        """Start the reference worker on a thread while the candidate's worker starts and is
        checked (both spawn, import torch and start CUDA in parallel: about 7 s a pair saved
        on the H200, phases_s ref_timing.worker + ref_timing.profiler). The worker is built
        before any candidate code runs; :meth:`_ref_handle` takes it over."""
        if not self.cfg.reference_timing or not self.cfg.timing or self._ref_thread is not None \
                or (self._ref_worker is not None and self._ref_worker.alive):
            return
        box: dict = {}
        th = threading.Thread(target=lambda: box.setdefault("h", self._new_ref_worker()),
                              name="solbench-ref-prestart", daemon=True)
        th.start()
        self._ref_thread, self._ref_box = th, box

    def _take_prestarted(self) -> WorkerHandle | None:
        """Wait for the prestart thread, if any, and hand over the worker it made."""
        if self._ref_thread is None:
            return None
        self._ref_thread.join()
        h = self._ref_box.get("h")
        self._ref_thread, self._ref_box = None, {}
        return h

    def _ref_handle(self) -> WorkerHandle | None:
        h = self._take_prestarted()
        if h is not None:
            if self._ref_worker is not None and self._ref_worker is not h:
                self._ref_worker.close()
            self._ref_worker = h
        if self._ref_worker is None or not self._ref_worker.alive:
            self._ref_worker = self._new_ref_worker()
        return self._ref_worker

    # ------------------------------------------------------------ one workload
    def _trace(self, solution: Solution, w: Workload, status: Status, log: str = "",
               correctness: Correctness | None = None, performance: Performance | None = None,
               timing: TimingStats | None = None, ref_timing: TimingStats | None = None,
               findings: list[Finding] | None = None, telemetry: dict | None = None) -> Trace:
        return Trace(
            definition=self.problem.name, solution=solution.name, workload=w,
            evaluation=Evaluation(
                status=status, log=log[-self.cfg.log_cap:], correctness=correctness,
                performance=performance, environment=self.env, timing=timing,
                reference_timing=ref_timing, findings=findings or [], telemetry=telemetry,
                solution_hash=solution.content_hash(), device=self.cfg.device,
                phases_s=dict(self._phases) if self._phases else None,
                input_seed=format(self._input_seed, "x"),
            ),
        )

    def _workload(self, h: WorkerHandle, solution: Solution, w: Workload, j: int) -> Trace:
        cfg = self.cfg
        findings: list[Finding] = []
        logs: list[str] = []

        def fail(status: Status, msg: str, corr: Correctness | None = None) -> Trace:
            # the worker's output first, the verdict's reason last: the cap keeps the tail
            log = "\n".join(logs + [h.log_since_last(cfg.log_cap), msg])
            return self._trace(solution, w, status, log, correctness=corr, findings=findings)

        # inputs + reference for round 0 (trusted)
        t_phase = time.perf_counter()
        try:
            first = make_inputs(self.problem, w, _seed(self._input_seed, j, 0), cfg.device)
        except MissingBlobError as e:
            return self._trace(solution, w, Status.INVALID_REFERENCE, f"inputs unavailable: {e}")
        except SpecError as e:
            return self._trace(solution, w, Status.INVALID_REFERENCE, f"input generation failed: {e}")
        except Exception as e:  # noqa: BLE001
            return self._trace(solution, w, Status.INVALID_REFERENCE,
                               f"input generation failed: {type(e).__name__}: {e}")
        wbytes = max(self.problem.workload_bytes(w), 1)
        k = int(max(2, min(cfg.max_pool, cfg.budget() // wbytes)))
        if not cfg.timing:
            k = 1
        try:
            slots = _Slots(self.problem, w, k, cfg.device, first)
        except (MemoryError, OSError, RuntimeError) as e:  # mmap/ftruncate/CUDA out of memory
            return self._trace(solution, w, Status.INVALID_REFERENCE,
                               f"could not allocate the workload's buffers ({k} slots of "
                               f"{wbytes:,} bytes): {type(e).__name__}: {e}")
        self._open_slots = slots
        tol = w.tolerance_or_default()
        self._current_tol = tol
        self._last_flush = self._flush_bytes(h)
        try:
            h.request("load", {"slots": slots.wire, "flush_bytes": self._last_flush}, timeout_s=120)
        except (WorkerDied, WorkerTimeout, ProtocolError) as e:
            return fail(Status.RUNTIME_ERROR, f"worker failed to receive inputs: {e}")

        self._phases["inputs"] = round(time.perf_counter() - t_phase, 3)
        t_phase = time.perf_counter()

        # ---------------- correctness rounds
        report: CheckReport | None = None
        out_hashes: list[str] = []
        for r in range(cfg.rounds):
            try:
                values = first if r == 0 else make_inputs(self.problem, w, _seed(self._input_seed, j, r), cfg.device)
            except Exception as e:  # noqa: BLE001
                return self._trace(solution, w, Status.INVALID_REFERENCE,
                                   f"input generation failed (round {r}): {type(e).__name__}: {e}")
            try:
                ref_out = self.run_reference(values)
            except Exception as e:  # noqa: BLE001
                return self._trace(solution, w, Status.INVALID_REFERENCE,
                                   f"reference failed: {type(e).__name__}: {e}")
            bad = self._check_reference(ref_out, slots)
            if bad:
                return self._trace(solution, w, Status.INVALID_REFERENCE, bad)
            scalars = slots.fill(0, values)
            timeout = cfg.first_call_timeout_s if r == 0 else cfg.call_timeout_s
            try:
                status, meta = h.request("call", {"slot": 0, "scalars": scalars}, timeout_s=timeout)
            except WorkerTimeout as e:
                return fail(Status.TIMEOUT, f"correctness round {r}: {e}")
            except (WorkerDied, ProtocolError) as e:
                return fail(Status.RUNTIME_ERROR, f"correctness round {r}: {e}")
            if status != "ok":
                return fail(Status.RUNTIME_ERROR,
                            f"correctness round {r}: {meta.get('type')}: {meta.get('message')}\n"
                            f"{meta.get('traceback', '')}")
            if meta.get("interposition"):
                findings.append(_interposition_finding(meta["interposition"], f"correctness round {r}"))
                return fail(Status.REWARD_HACK, f"correctness round {r}: {meta['interposition']}")
            if meta.get("stream_unordered"):
                findings.append(Finding(
                    check="stream_unordered", severity="hack",
                    message=(f"outputs {meta['stream_unordered']} were still being written after the call "
                             "returned, on a stream the caller's stream does not wait for"),
                    evidence={"outputs": meta["stream_unordered"], "round": r}))
            if meta.get("stream_changed") and not any(f.check == "stream_changed" for f in findings):
                findings.append(Finding(
                    check="stream_changed", severity="hack",
                    message="the candidate changed the current CUDA stream and left it changed",
                    evidence={"round": r}))
            mutated = slots.inputs_intact(0)
            if mutated:
                findings.append(Finding(check="input_mutation", severity="hack",
                                        message=f"the candidate wrote to its inputs {mutated}",
                                        evidence={"inputs": mutated, "round": r}))
            shape_issue = self._returned_issue(meta, slots, findings)
            if shape_issue is not None:
                return fail(shape_issue[0], shape_issue[1])
            outs = slots.outputs(0)
            ref_errs = ref_maxs = None
            truth = None
            if cfg.precision_check and self._fp32_outputs(slots):
                truth = self.truth(values)
                if truth is not None and len(truth) == len(ref_out):
                    ref_errs = self._ref_errors(ref_out, truth,
                                                lambda a, t: rel_l2(a.double(), t.double()))
                    ref_maxs = self._ref_errors(ref_out, truth, _norm_max)
            report = check_outputs(outs, ref_out, tol, names=slots.names_out, poisoned=True,
                                   ref_errors=ref_errs, ref_max_errors=ref_maxs)
            if truth is not None and report.passed and ref_errs is not None:
                f = self._precision_finding(outs, truth, ref_errs)
                if f is not None and not any(x.check == "precision_downgrade" for x in findings):
                    f.message = f"round {r}: " + f.message
                    findings.append(f)
            out_hashes.append("|".join(guards.digests(outs)))
            if r == 0:
                h.tids_round0 = guards.thread_ids(h.pid)
            if not report.passed:
                corr = self._correctness(report, r)
                if r > 0 and len(set(out_hashes)) == 1:
                    findings.append(Finding(
                        check="constant_output", severity="fail",
                        message="the output was bit-identical across rounds with different inputs",
                        evidence={"rounds": r + 1}))
                if any(f.severity == "hack" for f in findings):
                    return fail(Status.REWARD_HACK, f"round {r}: {report.failed_check}", corr)
                detail = "; ".join(f"{o.name}: {o.detail}" for o in report.outputs if o.failed_check)
                return fail(report.status, f"correctness round {r}: {report.failed_check}: {detail}", corr)
        corr = self._correctness(report, cfg.rounds - 1) if report else None

        # guards after correctness
        self._guard_findings(h, findings, "after correctness")
        self._phases["correctness"] = round(time.perf_counter() - t_phase, 3)
        t_phase = time.perf_counter()

        timing = ref_timing = None
        tele: dict[str, Any] = {}
        if cfg.timing and not any(f.severity == "hack" for f in findings):
            try:
                self._phases["reference_timing"] = 0.0
                timing, ref_timing, tele = self._time(h, slots, w, j, findings)
                self._phases["timing"] = round(time.perf_counter() - t_phase, 3)
            except WorkerTimeout as e:
                return fail(Status.TIMEOUT, f"timing: {e}")
            except (WorkerDied, ProtocolError) as e:
                return fail(Status.RUNTIME_ERROR, f"timing: {e}")
            except _CandidateError as e:
                if any(f.severity == "hack" for f in findings):
                    return fail(Status.REWARD_HACK, f"timing: {e}")
                return fail(Status.RUNTIME_ERROR, f"timing: {e}")
            self._guard_findings(h, findings, "after timing")
        log = "\n".join(logs + [h.log_since_last(cfg.log_cap)])
        if any(f.severity == "hack" for f in findings):
            return self._trace(solution, w, Status.REWARD_HACK, log, correctness=corr,
                               timing=timing, ref_timing=ref_timing, findings=findings, telemetry=tele)
        perf = None
        if timing is not None and timing.median_ms is not None and math.isfinite(timing.median_ms):
            ref_ms = ref_timing.median_ms if ref_timing else None
            perf = Performance(latency_ms=timing.median_ms, reference_latency_ms=ref_ms,
                               speedup_factor=(ref_ms / timing.median_ms) if ref_ms and timing.median_ms > 0 else None)
        return self._trace(solution, w, Status.PASSED, log, correctness=corr, performance=perf,
                           timing=timing, ref_timing=ref_timing, findings=findings, telemetry=tele)

    # ------------------------------------------------------------ helpers
    def _flush_bytes(self, h: WorkerHandle) -> int:
        if self.cfg.is_cuda:
            l2 = getattr(torch.cuda.get_device_properties(torch.device(self.cfg.device)), "L2_cache_size", 0) or (64 << 20)
            return int(2 * l2)
        return int(h.flush_default)

    def _check_reference(self, ref_out: list, slots: _Slots) -> str | None:
        if len(ref_out) != len(slots.out_specs):
            return f"reference returned {len(ref_out)} outputs, the definition declares {len(slots.out_specs)}"
        for name, o, (shape, dt) in zip(slots.names_out, ref_out, slots.out_specs):
            if not isinstance(o, torch.Tensor):
                return f"reference output {name!r} is {type(o).__name__}, not a tensor"
            if tuple(o.shape) != tuple(shape or ()) or o.dtype != dt:
                return (f"reference output {name!r} is {tuple(o.shape)} {o.dtype}, the definition "
                        f"declares {tuple(shape or ())} {dt}")
        return None

    def _fp32_outputs(self, slots: _Slots) -> bool:
        """Some output is float32/float64: the fp64 truth is computed (integer outputs beside
        them, such as ids or counts, are compared exactly and get no truth error)."""
        return any(dt in (torch.float32, torch.float64) for _, dt in slots.out_specs)

    @staticmethod
    def _ref_errors(ref_out, truth, fn) -> list[float | None]:
        """Per output, ``fn(reference output, truth)`` for floating outputs, None otherwise."""
        return [fn(a, t) if isinstance(a, torch.Tensor) and isinstance(t, torch.Tensor)
                and a.is_floating_point() else None for a, t in zip(ref_out, truth)]

    def _precision_finding(self, outs, truth, ref_errs) -> Finding | None:
        for i, (o, t, er) in enumerate(zip(outs, truth, ref_errs)):
            if er is None:
                continue
            ec = rel_l2(o.double(), t.double())
            limit = max(16 * er, 1e-4)
            if ec > limit:
                return Finding(
                    check="precision_downgrade", severity="hack",
                    message=(f"output {i}: error vs fp64 truth {ec:.3g} is {ec / max(er, 1e-30):.0f}x "
                             f"the declared-precision reference's {er:.3g} (limit {limit:.3g})"),
                    evidence={"candidate_rel_l2_vs_fp64": ec, "reference_rel_l2_vs_fp64": er,
                              "limit": limit, "output": i},
                )
        return None

    def _returned_issue(self, meta: dict, slots: _Slots, findings: list[Finding]):
        ret = meta.get("returned")
        if ret is None:
            return None
        if meta.get("count_mismatch"):
            return (Status.INCORRECT_SHAPE, f"returned {len(ret)} outputs, expected {len(slots.out_specs)}")
        for name, m, (shape, dt) in zip(slots.names_out, ret, slots.out_specs):
            if not m["plain"]:
                if m["shape"] is not None:  # a tensor subclass / lazy proxy
                    findings.append(Finding(
                        check="non_plain_output", severity="hack",
                        message=f"output {name!r} is a {m['type']}, not a plain torch.Tensor",
                        evidence=m))
                    return (Status.REWARD_HACK, f"output {name!r} is {m['type']}")
                return (Status.INCORRECT_SHAPE, f"output {name!r} is {m['type']}, not a tensor")
            if tuple(m["shape"]) != tuple(shape or ()):
                return (Status.INCORRECT_SHAPE, f"output {name!r} has shape {tuple(m['shape'])}, expected {tuple(shape or ())}")
            if m["dtype"] != str(dt).replace("torch.", ""):
                return (Status.INCORRECT_DTYPE, f"output {name!r} has dtype {m['dtype']}, expected {dt}")
            want = torch.device(self.cfg.device).type
            if m.get("device") is not None and m["device"] != want:
                # the tensor type (torch.cuda.FloatTensor vs torch.FloatTensor) is wrong
                return (Status.INCORRECT_DTYPE, f"output {name!r} is on {m['device']}, expected {want}")
        return None

    def _correctness(self, report: CheckReport, r: int) -> Correctness:
        s = report.summary()
        return Correctness(
            max_relative_error=s["max_relative_error"], max_absolute_error=s["max_absolute_error"],
            has_nan=s["has_nan"], has_inf=s["has_inf"],
            extra={"rel_l2": s["rel_l2"], "norm_max_error": s["norm_max_error"],
                   "worst_slice_rel_l2": s["worst_slice_rel_l2"], "write_coverage": s["write_coverage"],
                   "matched_ratio": s["matched_ratio"], "upstream_passed": report.upstream_passed,
                   "failed_check": report.failed_check, "round": r, "rounds": self.cfg.rounds,
                   "outputs": report.figures},
        )

    @staticmethod
    def _interposition_seen(meta: Any, findings: list[Finding] | None, when: str) -> None:
        """Record the worker's ``interposition`` report of one request (the first one only)."""
        if isinstance(meta, dict) and meta.get("interposition") and findings is not None \
                and not any(f.check == "interposition" for f in findings):
            findings.append(_interposition_finding(meta["interposition"], when))

    def _guard_findings(self, h: WorkerHandle, findings: list[Finding], when: str) -> None:
        try:
            st, g = h.request("guards", timeout_s=60)
        except (WorkerDied, WorkerTimeout, ProtocolError) as e:
            findings.append(Finding(check="guard_check_failed", severity="hack",
                                    message=f"the worker did not answer the integrity check {when}: {e}"))
            return
        if st != "ok":
            return
        if g["changed"] and not any(f.check == "harness_patch" for f in findings):
            findings.append(Finding(check="harness_patch", severity="hack",
                                    message=f"timer/sync/harness functions replaced {when}: {g['changed']}",
                                    evidence={"changed": g["changed"]}))
        self._interposition_seen(g, findings, when)
        f0, f1 = g["flags0"], g["flags"]
        loosened = [k for k in f1 if f1[k] != f0[k]]
        if loosened and not self.problem.definition.allow_tf32 and not any(f.check == "backend_flags" for f in findings):
            findings.append(Finding(check="backend_flags", severity="hack",
                                    message=f"backend precision flags changed {when}: "
                                            + ", ".join(f"{k}: {f0[k]} -> {f1[k]}" for k in loosened),
                                    evidence={"before": f0, "after": f1}))
        from .process import stray_children

        extra = guards.unexplained_children(h.pid, getattr(h, "base_kids", set()),
                                            late="timing" in when) + stray_children()
        if extra and not any(f.check == "child_process" for f in findings):
            findings.append(Finding(check="child_process", severity="hack",
                                    message=f"the worker started processes {when}: {extra}",
                                    evidence={"processes": extra}))

    # ------------------------------------------------------------ timing
    def _time(self, h: WorkerHandle, slots: _Slots, w: Workload, j: int, findings: list[Finding]):
        # only the process being timed runs: the reference's worker (started beside the
        # candidate's) is up and stopped while the candidate is timed, as the candidate's is
        # while the reference is (its start-up, or its OpenMP threads still spinning after its
        # own block, slowed the candidate's calls: red team round 6, the eager reference timed
        # against itself scored 0.06-0.3x on 2 CPU cores); on the CPU the parent's own torch
        # work between calls (fresh inputs, verification) runs single-threaded for the same reason
        ref_idle = self._ref_handle() if self.cfg.reference_timing and self.cfg.timing else None
        if ref_idle is not None:
            ref_idle.pause()
        n = None
        if not self.cfg.is_cuda:
            n = torch.get_num_threads()
            torch.set_num_threads(1)
        try:
            return self._time_body(h, slots, w, j, findings)
        finally:
            if n is not None:
                torch.set_num_threads(n)
            if self._ref_worker is not None and self._ref_worker.alive:
                self._ref_worker.resume()

    def _time_body(self, h: WorkerHandle, slots: _Slots, w: Workload, j: int, findings: list[Finding]):
        cfg = self.cfg
        k = slots.k
        seed_ctr = [1000]

        def fresh(i):
            seed_ctr[0] += 1
            return make_inputs(self.problem, w, _seed(self._input_seed, j, seed_ctr[0]), cfg.device)

        scalars = [slots.fill(0, slots.pristine[0])]
        for i in range(1, k):
            scalars.append(slots.fill(i, fresh(i)))
        # no-op round trip (flush + messaging), the baseline of the plausibility check
        overhead = self._noop_ms(h, findings)
        # warm-up
        for i in range(cfg.n_warmup()):
            st, meta = h.request("call", {"slot": i % k, "scalars": scalars[i % k]}, timeout_s=cfg.call_timeout_s)
            if st != "ok":
                raise _CandidateError(f"warm-up call: {meta.get('type')}: {meta.get('message')}")
            self._interposition_seen(meta, findings, f"warm-up call {i}")
        tele_samples = []
        if self.telemetry is not None and self.telemetry.ok:
            tele_samples.append(self.telemetry.sample())
        n = cfg.n_iters()
        halves = [n // 2, n - n // 2] if cfg.reference_timing else [n]
        cand_blocks, ref_blocks = [], []
        ref_overhead: float | None = None
        verify_left = max(cfg.verify, math.ceil(cfg.verify_fraction * n))
        rng = secrets.SystemRandom()
        for b, m in enumerate(halves):
            blk = self._block(h, slots, scalars, m, fresh, verify=True, rng=rng,
                              verify_n=(verify_left + 1) // 2 if b == 0 and len(halves) > 1 else verify_left,
                              findings=findings)
            verify_left -= blk["verified"]
            cand_blocks.append(blk)
            if cfg.reference_timing:
                t_ref = time.perf_counter()
                rh = self._ref_handle()
                self._tick("ref_timing.worker", t_ref)
                if rh is not None and self._ref_sched_tampered(rh, findings, "before"):
                    rh = None
                if rh is not None:
                    h.pause()  # the candidate cannot run (or slow the reference) while it is timed
                    frozen = self._freeze_all(h)
                    running = self._unfrozen(h, frozen)
                    if running:
                        # a process of the candidate's outside its stopped process group (its
                        # own session, or re-parented here) would run beside the reference
                        findings.append(Finding(
                            check="child_process", severity="hack",
                            message=("processes of the candidate kept running while its worker was "
                                     f"stopped for the reference's timing: {running[:3]}"),
                            evidence={"processes": running[:20]}))
                        for r in running:
                            try:
                                os.kill(r["pid"], 9)
                            except OSError:
                                pass
                        self._thaw(h, frozen)
                        raise _CandidateError("a process of the candidate ran beside the reference")
                    rh.resume()
                    try:
                        rh.request("load", {"slots": slots.wire, "flush_bytes": self._flush_bytes(rh)}, timeout_s=120)
                        if ref_overhead is None:
                            # the no-op baseline measured with trusted code (the reference's
                            # worker): the candidate's own worker runs the candidate's hooks and
                            # could make its no-op slower, i.e. its subtraction larger
                            ref_overhead = self._noop_ms(rh, None)
                        for i in range(cfg.n_warmup() if b == 0 else 1):
                            rh.request("call", {"slot": i % k, "scalars": scalars[i % k]}, timeout_s=cfg.call_timeout_s)
                        ref_blocks.append(self._block(rh, slots, scalars, m, fresh, verify=False, rng=rng,
                                                      verify_n=0, findings=None))
                    except Exception as e:  # noqa: BLE001 - reference timing is best effort
                        self._ref_worker = None
                        findings.append(Finding(check="reference_timing_failed", severity="advisory",
                                                message=f"{type(e).__name__}: {e}"))
                    finally:
                        # reference outputs must not be left where the candidate can read them
                        for sl in range(k):
                            for o in slots.outputs(sl):
                                poison_(o)
                        _sync(cfg.device)
                        if rh.alive:
                            rh.pause()
                        self._thaw(h, frozen)
                    if self._ref_worker is rh and self._ref_sched_tampered(rh, findings, "after"):
                        ref_blocks.clear()
                self._phases["reference_timing"] = round(
                    self._phases.get("reference_timing", 0.0) + time.perf_counter() - t_ref, 3)
                # restore the candidate's view of the slots
                h.request("load", {"slots": slots.wire, "flush_bytes": self._flush_bytes(h)}, timeout_s=120)
        if self.telemetry is not None and self.telemetry.ok:
            tele_samples.append(self.telemetry.sample())
        # one baseline for both sides, the smaller of the two workers' no-op medians: the
        # candidate can only make its own no-op slower (a larger subtraction), never the
        # trusted reference worker's; the same value on both sides keeps the comparison even
        both = min(overhead, ref_overhead) if ref_overhead is not None else overhead
        # (the plausibility verdict keeps the candidate's own no-op: measured under the same
        # host load as its calls, it does not turn a busy moment into a hack)
        timing = self._stats(cand_blocks, findings, both, candidate=True, plausibility_overhead=overhead)
        ref_timing = self._stats(ref_blocks, None, both, candidate=False) if ref_blocks else None
        for who, ts in (("candidate", timing), ("eager reference", ref_timing)):
            # a spread as large as the median: the host (or GPU) was busy with something else;
            # the speedup of such a run says little (seen on a shared 2-core CPU host, where
            # scheduler ticks of 4-16 ms land inside sub-ms calls)
            if ts is not None and ts.n_samples >= 5 and ts.median_ms and ts.iqr_ms is not None \
                    and ts.iqr_ms > UNSTABLE_IQR_RATIO * ts.median_ms:
                findings.append(Finding(
                    check="timing_unstable", severity="advisory",
                    message=(f"{who}: IQR {ts.iqr_ms:.4g} ms vs median {ts.median_ms:.4g} ms over "
                             f"{ts.n_samples} samples; the machine was not quiet, rerun before "
                             "trusting this time"),
                    evidence={"who": who, "iqr_ms": ts.iqr_ms, "median_ms": ts.median_ms}))
        tele = {"samples": tele_samples}
        thr = throttled(tele_samples)
        if thr:
            tele["throttled"] = thr
            findings.append(Finding(check="throttled", severity="advisory",
                                    message=f"clock throttle reasons during timing: {thr}"))
        return timing, ref_timing, tele

    def _noop_ms(self, h: WorkerHandle, findings: list[Finding] | None, n: int = 5) -> float:
        """Median round trip (ms) of ``n`` no-op requests to ``h`` (flush, checks, the copy-out
        of outputs this size, messaging: the timed path without the call)."""
        rts = []
        for _ in range(n):
            t0 = _now()
            st, meta = h.request("noop", {"slot": 0}, timeout_s=60)
            rts.append((_now() - t0) * 1e3)
            self._interposition_seen(meta, findings, "no-op round trip")
        return sorted(rts)[len(rts) // 2]

    def _tick(self, key: str, t0: float) -> float:
        """Add the seconds since ``t0`` to sub-phase ``key`` of ``phases_s``; return now."""
        now = time.perf_counter()
        self._phases[key] = round(self._phases.get(key, 0.0) + now - t0, 4)
        return now

    def _block(self, h: WorkerHandle, slots: _Slots, scalars: list, m: int, fresh, *, verify: bool,
               rng: random.Random | secrets.SystemRandom, verify_n: int, findings: list[Finding] | None) -> dict:
        cfg = self.cfg
        k = slots.k
        # sub-phases (seconds, summed over blocks; "ref." for the reference's blocks): where
        # the harness's own time goes, so per-pair cost can be measured and not guessed
        pre = "timing." if findings is not None else "ref_timing."
        tp = time.perf_counter()
        st, info = h.request("time_begin", {"cupti": cfg.cupti}, timeout_s=60)
        tp = self._tick(pre + "profiler", tp)
        base_tids = guards.thread_ids(h.pid)
        to_verify = set(rng.sample(range(m), min(verify_n, m))) if verify and m else set()
        host, event, rt = [], [], []
        verified = 0
        new_threads: set[int] = set()
        for i in range(m):
            s = i % k
            # every timed call gets values never seen before (by either worker), at one of K
            # addresses; outputs are poisoned again by fill()
            scalars[s] = slots.fill(s, fresh(i))
            tp = self._tick(pre + "inputs", tp)
            t0 = _now()
            st, meta = h.request("time_iter", {"slot": s, "scalars": scalars[s], "i": i},
                                 timeout_s=cfg.call_timeout_s)
            rt.append((_now() - t0) * 1e3)
            tp = self._tick(pre + "calls", tp)
            if st != "ok":
                raise _CandidateError(f"timed call {i}: {meta.get('type')}: {meta.get('message')}")
            self._interposition_seen(meta, findings, f"timed iteration {i}")
            if findings is not None:
                fresh_tids = guards.thread_ids(h.pid) - base_tids - new_threads
                if fresh_tids:
                    # a joined thread's OS thread lingers in /proc for about a millisecond
                    # after join() returns (seen with a per-call ThreadPool): look again
                    # after a grace period and count only those still alive
                    time.sleep(THREAD_GRACE_S)
                    fresh_tids &= guards.thread_ids(h.pid)
                new_threads |= fresh_tids
            if findings is not None:
                bad = [m for m in (meta.get("returned") or []) if not m.get("plain")]
                if bad and not any(f.check == "non_plain_output" for f in findings):
                    findings.append(Finding(check="non_plain_output", severity="hack",
                                            message=f"timed iteration {i} returned {bad[0]['type']}",
                                            evidence=bad[0]))
            host.append(meta["host_ms"])
            event.append(meta.get("event_ms"))
            tp = self._tick(pre + "guards", tp)
            if i in to_verify and findings is not None:
                outs = [o.clone() for o in slots.outputs(s)]  # snapshot at once: late writes do not count
                verified += 1
                ref_out = self.run_reference(slots.pristine[s])
                # the same limits as the correctness rounds: with an fp64 truth, the declared-
                # precision reference's own error widens them (an honest kernel whose float
                # sums run in another order, e.g. atomics, must pass here as it passed there;
                # seen on the H200 with DLRM-Bench dlrm04's index_add_)
                truth = ref_errs = ref_maxs = None
                if cfg.precision_check and self._fp32_outputs(slots):
                    truth = self.truth(slots.pristine[s])
                    if truth is not None and len(truth) == len(ref_out):
                        ref_errs = self._ref_errors(ref_out, truth,
                                                    lambda a, t: rel_l2(a.double(), t.double()))
                        ref_maxs = self._ref_errors(ref_out, truth, _norm_max)
                    else:
                        truth = None
                rep = check_outputs(outs, ref_out, self._current_tol, names=slots.names_out,
                                    poisoned=True, ref_errors=ref_errs, ref_max_errors=ref_maxs)
                if rep.passed and truth is not None:
                    pf = self._precision_finding(outs, truth, ref_errs)
                    if pf is not None and not any(f.check == "precision_downgrade" for f in findings):
                        pf.message = f"timed iteration {i}: " + pf.message
                        findings.append(pf)
                if not rep.passed and not any(f.check == "timed_output_mismatch" for f in findings):
                    o = next(x for x in rep.outputs if x.failed_check)
                    findings.append(Finding(
                        check="timed_output_mismatch", severity="hack",
                        message=(f"timed iteration {i}: output wrong for its inputs ({o.failed_check}: "
                                 f"{o.detail}) although the correctness rounds passed"),
                        evidence={"iteration": i, "failed_check": o.failed_check,
                                  "rel_l2": o.rel_l2, "write_coverage": o.write_coverage}))
                mutated = slots.inputs_intact(s)
                if mutated and not any(f.check == "input_mutation" for f in findings):
                    findings.append(Finding(check="input_mutation", severity="hack",
                                            message=f"timed iteration {i} wrote to inputs {mutated}",
                                            evidence={"inputs": mutated}))
                tp = self._tick(pre + "verify", tp)
        st, end = h.request("time_end", timeout_s=120)
        self._tick(pre + "profiler", tp)
        if findings is not None and new_threads:
            findings.append(Finding(
                check="background_thread", severity="hack",
                message=f"{len(new_threads)} OS thread(s) appeared during timed calls",
                evidence={"thread_ids": sorted(new_threads)[:20]}))
        return {"host": host, "event": event, "roundtrip": rt, "end": end, "cupti": info.get("cupti"),
                "verified": verified, "cupti_reason": info.get("reason") or end.get("reason")}

    @staticmethod
    def _freeze_all(h: WorkerHandle) -> list[int]:
        """SIGSTOP, by pid, every descendant of the candidate's worker and every unregistered
        child of this process, after the worker's process group was stopped: a process in
        its own session or re-parented here is outside that group. No allow-list: an honest
        runtime helper (inductor's compile pool) is stopped too, it has nothing to do while
        the reference runs. Returns the pids stopped (for :meth:`_thaw`)."""
        from .process import unregistered_children

        pids = sorted(guards.descendants(h.pid)) + unregistered_children()
        for pid in pids:
            try:
                os.kill(pid, 19)  # SIGSTOP
            except OSError:
                pass
        return pids

    @staticmethod
    def _thaw(h: WorkerHandle, pids: list[int]) -> None:
        for pid in pids:
            try:
                os.kill(pid, 18)  # SIGCONT
            except OSError:
                pass
        h.resume()

    @staticmethod
    def _unfrozen(h: WorkerHandle, frozen: list[int], wait_s: float = 0.2) -> list[dict]:
        """Processes of the candidate's that escaped the pause: any descendant of its worker
        in another session than the worker's (it left the process group on purpose; honest
        runtime helpers, inductor's compile pool included, stay in it), any unregistered child
        of this process (re-parented here: a double fork), and any of them with a thread that
        still runs once SIGSTOP had ``wait_s`` to land (every thread is read: a process whose
        main thread exited runs on in its others)."""
        from .process import unregistered_children

        sid = guards.session_id(h.pid)
        deadline = time.monotonic() + wait_s
        while True:
            out = []
            for pid in sorted(set(guards.descendants(h.pid)) | set(frozen)):
                run = guards.running_tasks(pid)
                if not run and guards.proc_state(pid) in (None, "Z", "X") and len(guards.thread_ids(pid)) <= 1:
                    continue  # gone, or a zombie with no thread left (nothing can run)
                other = sid is not None and guards.session_id(pid) not in (None, sid)
                if other or run:
                    out.append({"pid": pid, "other_session": other, "running": run,
                                "cmdline": guards.cmdline(pid)[:200]})
            out += [{"pid": pid, "reparented": True, "cmdline": guards.cmdline(pid)[:200]}
                    for pid in unregistered_children()
                    if guards.running_tasks(pid) or guards.proc_state(pid) not in (None, "Z", "X")]
            if not out or time.monotonic() > deadline or any(x.get("other_session") or x.get("reparented")
                                                              for x in out):
                return out
            time.sleep(0.01)

    def _ref_sched_tampered(self, rh: WorkerHandle, findings: list[Finding], when: str) -> bool:
        """The reference worker's threads no longer run as it started (policy, nice, CPU
        affinity): the candidate, the only untrusted process here, demoted it to inflate its
        speedup. The reference's timing is discarded, the worker replaced, REWARD_HACK."""
        base = getattr(rh, "sched0", None)
        bad = guards.sched_tampered(rh.pid, base) if base is not None else []
        if not bad:
            return False
        if not any(f.check == "reference_tampered" for f in findings):
            findings.append(Finding(
                check="reference_tampered", severity="hack",
                message=(f"the eager reference's worker was demoted {when} its timed block: "
                         f"{bad[:3]}"),
                evidence={"threads": bad[:20]}))
        self.close()
        return True

    def _stats(self, blocks: list[dict], findings: list[Finding] | None, overhead: float,
               candidate: bool, plausibility_overhead: float | None = None) -> TimingStats:
        cfg = self.cfg
        notes: list[str] = []
        cupti_ok = cfg.is_cuda and all(b["end"].get("cupti") for b in blocks)
        host = [x for b in blocks for x in b["host"]]
        rt = [x for b in blocks for x in b["roundtrip"]]
        ksum_med = None
        if cupti_ok:
            samples = [x for b in blocks for x in b["end"]["span_ms"]]
            ksum = [x for b in blocks for x in b["end"]["kernel_sum_ms"]]
            ksum_med = stats(ksum)["median_ms"]
            method = "cupti"
            sets = [tuple(s) for b in blocks for s in b["end"]["kernel_sets"]]
            cons = kernel_set_consistency(sets)
            if sets and not any(sets) and all(x is not None for b in blocks for x in b["event"]):
                # no device work in any timed call (a CPU computation, or nothing): the device
                # timeline has nothing to time, the call's own CUDA-event window does
                samples = [x for b in blocks for x in b["event"]]
                notes.append("no device activity in any timed call: samples are the calls' "
                             "CUDA-event windows")
            # device work after an end marker that is not the harness's copy-out can only be
            # the candidate's (a hook, a finalizer, a deferred launch): it is part of the call's
            # cost, so each iteration's sample carries it (zero for every honest kernel seen
            # on the H200, bench/results/integrity_cuda.txt); when it is there on most
            # iterations it is also a verdict below
            late_it = [x for b in blocks for x in (b["end"].get("late_all_ms") or b["end"].get("late_ms")
                                                   or [0.0] * len(b["end"]["span_ms"]))]
            if len(late_it) == len(samples) and any(late_it):
                samples = [x + (y or 0.0) for x, y in zip(samples, late_it)]
                notes.append(f"device work after the end marker added to {sum(1 for y in late_it if y)} "
                             f"sample(s) (median {statistics.median(late_it):.4g} ms)")
            if findings is not None:
                if cons["empty_iters"] and cons["mode_kernels"]:
                    findings.append(Finding(
                        check="batch_and_skip", severity="hack",
                        message=(f"{len(cons['empty_iters'])} timed iteration(s) launched no device work "
                                 "while the others did"),
                        evidence=cons))
                elif cons["inconsistent"]:
                    findings.append(Finding(
                        check="kernel_set_inconsistent", severity="advisory",
                        message=f"{cons['inconsistent']} iteration(s) launched a different kernel set",
                        evidence=cons))
                late = [x for b in blocks for x in (b["end"].get("late_ms") or [])]
                n_late = sum(x > LATE_WORK_MS for x in late)
                if late and n_late * 2 > len(late):
                    # a verdict since the H200 runs of 2026-11-30 (22 honest corpus candidates
                    # and the l1/dlrm eager, torch.compile and Triton baselines never showed it)
                    findings.append(Finding(
                        check="work_after_clock", severity="hack",
                        message=(f"device work after the end marker that is not the harness's "
                                 f"copy-out on {n_late}/{len(late)} "
                                 f"iterations (median {statistics.median(late):.4g} ms)"),
                        evidence={"late_ms": late[:50]}))
                late_all = [x for b in blocks for x in (b["end"].get("late_all_ms") or [])]
                if late_all and len(late_all) == len(late) \
                        and sum(a > b + LATE_WORK_MS for a, b in zip(late_all, late)) * 2 > len(late):
                    findings.append(Finding(
                        check="foreign_work_in_copy_out", severity="advisory",
                        message=("device work inside the harness's copy-out that is not a copy or fill "
                                 "of PyTorch's (a hook of the candidate's?); its time is in the samples"),
                        evidence={"late_all_ms": late_all[:50]}))
        elif cfg.is_cuda:
            samples = [x for b in blocks for x in b["event"]]
            method = "cuda_event"
            reasons = {b.get("cupti_reason") for b in blocks if b.get("cupti_reason")}
            notes.append("CUPTI activity unavailable, CUDA events used (they include launch overhead)"
                         + (f": {sorted(reasons)}" if reasons else ""))
        else:
            # on the CPU the parent's own clock bounds the call from below: the round trip less
            # the no-op round trip (flush, the harness's copy-out of outputs this size,
            # messaging). Work the candidate hides in the worker's steps after its clock stops
            # (hooks in the copy-out, in stdout, in the reply, in a gc callback) is counted
            # there, whatever the worker reports.
            samples = [max(hm, r - overhead) for hm, r in zip(host, rt)]
            method = "perf_counter"
            if findings is not None and sum(r - overhead > 1.5 * hm + 1.0 for hm, r in zip(host, rt)) * 2 > len(host):
                notes.append("parent round trip used: the worker's clock missed part of the work "
                             "on most iterations")
        if findings is not None:
            # on CUDA the worker's event window around the call (host work inside the call
            # shows there) must agree before a slow round trip is a hack: a loaded host or a
            # GPU shared with other processes slows the round trip's messaging and syncs, not
            # a microsecond window (seen on the H200 with 6 corpus jobs on one GPU)
            ev_win = [x for b in blocks for x in b["event"]] if cupti_ok else None
            f = guards.plausibility_finding(samples, rt, plausibility_overhead if plausibility_overhead
                                            is not None else overhead,
                                            severity="hack" if cfg.is_cuda else "advisory",
                                            gross_hack=True, call_window_ms=ev_win)
            if f is not None:
                findings.append(f)
        st = stats(samples)
        return TimingStats(
            method=method, n_samples=len(samples), warmup=cfg.n_warmup(), cold_l2=True,
            l2_flush_bytes=int(self._last_flush or 0),
            samples_ms=samples, kernel_sum_median_ms=ksum_med, host_median_ms=stats(host)["median_ms"],
            notes=notes, **st,
        )

    _current_tol = None
    _last_flush = 0
    _open_slots = None


class _CandidateError(Exception):
    pass


def _now() -> float:
    import time

    return time.perf_counter()


def _norm_max(a: torch.Tensor, t: torch.Tensor) -> float:
    a, t = a.double(), t.double()
    m = t.abs().max().item() if t.numel() else 0.0
    return ((a - t).abs().max().item() / m) if m > 0 else 0.0


def evaluate(problem: Problem, solution: Solution, config: EvalConfig | None = None) -> list[Trace]:
    """Evaluate ``solution`` on ``problem``'s workloads in an isolated worker.

    Args:
        problem: a loaded problem (see :func:`solbench.spec.load_problem`).
        solution: the candidate (see :func:`solbench.spec.load_solution`).
        config: settings; defaults to CPU with 5 correctness rounds and timing.

    Returns:
        One Trace per selected workload, in order. Never raises for candidate behaviour
        (crash, hang, wrong output, tampering): those are statuses. Raises SpecError for a
        bad workload selection.
    """
    ev = Evaluator(problem, config or EvalConfig())
    try:
        return ev.evaluate(solution)
    finally:
        ev.close()
