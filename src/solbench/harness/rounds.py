"""Correctness rounds: fresh inputs, the trusted reference in the parent, one call each.

The list of rounds is data (:func:`round_plan`): each :class:`RoundSpec` names its input set
and the generator that makes it, so other input distributions (profiles) are added by
extending the plan, not the loop. :class:`Oracle` is the trusted side: the reference module
run in the parent, its fp64 truth and the declared-precision reference's own error.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..errors import MissingBlobError, SpecError
from ..inputs import make_inputs
from ..spec.problem import Problem
from ..spec.trace import Correctness, Finding, Status
from . import guards, protocol
from .checks import add_once, finding, has
from .correctness import CheckReport, check_outputs, rel_l2
from .evidence import WorkloadRun, interposition_finding, kids_before, process_check, returned_issue
from .process import ProtocolError, WorkerDied, WorkerTimeout
from .slots import SlotPool
from .verdict import Failure


@dataclass(frozen=True)
class RoundSpec:
    """One correctness round: input set ``index`` (names its seed under ``--seed``), made by
    ``generate(problem, workload, seed, device) -> {name: value}``."""

    index: int
    label: str = "random"
    generate: Callable[..., dict] = make_inputs


def round_plan(rounds: int) -> list[RoundSpec]:
    """The default plan: ``rounds`` rounds of the problem's own input generator."""
    return [RoundSpec(r) for r in range(rounds)]


def _as_list(out: Any) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _norm_max(a: torch.Tensor, t: torch.Tensor) -> float:
    a, t = a.double(), t.double()
    m = t.abs().max().item() if t.numel() else 0.0
    return ((a - t).abs().max().item() / m) if m > 0 else 0.0


class Oracle:
    """The eager reference run in the parent (trusted): outputs, fp64 truth, own errors."""

    def __init__(self, problem: Problem, device: str):
        self.problem = problem
        self.device = device
        self._reference: Callable | None = None

    def reference(self) -> Callable:
        if self._reference is None:
            self._reference = self.problem.make_reference(self.device)
        return self._reference

    def run(self, values: dict) -> list[torch.Tensor]:
        args = [values[n] for n in self.problem.definition.inputs]
        with torch.no_grad():
            out = _as_list(self.reference()(*args))
        _sync(self.device)
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
            _sync(self.device)
            return out
        except Exception:  # noqa: BLE001 - the reference does not support float64
            return None

    @staticmethod
    def check_reference(ref_out: list, slots: SlotPool) -> str | None:
        if len(ref_out) != len(slots.out_specs):
            return f"reference returned {len(ref_out)} outputs, the definition declares {len(slots.out_specs)}"
        for name, o, (shape, dt) in zip(slots.names_out, ref_out, slots.out_specs):
            if not isinstance(o, torch.Tensor):
                return f"reference output {name!r} is {type(o).__name__}, not a tensor"
            if tuple(o.shape) != tuple(shape or ()) or o.dtype != dt:
                return (f"reference output {name!r} is {tuple(o.shape)} {o.dtype}, the definition "
                        f"declares {tuple(shape or ())} {dt}")
        return None

    @staticmethod
    def fp32_outputs(slots: SlotPool) -> bool:
        """Some output is float32/float64: the fp64 truth is computed (integer outputs beside
        them, such as ids or counts, are compared exactly and get no truth error)."""
        return any(dt in (torch.float32, torch.float64) for _, dt in slots.out_specs)

    @staticmethod
    def _ref_errors(ref_out, truth, fn) -> list[float | None]:
        return [fn(a, t) if isinstance(a, torch.Tensor) and isinstance(t, torch.Tensor)
                and a.is_floating_point() else None for a, t in zip(ref_out, truth)]

    def judge(self, outs: list[torch.Tensor], ref_out: list[torch.Tensor], values: dict, tol,
              slots: SlotPool, precision_check: bool) -> tuple[CheckReport, Finding | None]:
        """check_outputs with limits widened by the declared-precision reference's own error
        against the fp64 truth (an honest kernel whose float sums run in another order, e.g.
        atomics, must pass; seen on the H200 with DLRM-Bench dlrm04's index_add_), and the
        precision-downgrade finding of a passing output, if any."""
        truth = ref_errs = ref_maxs = None
        if precision_check and self.fp32_outputs(slots):
            truth = self.truth(values)
            if truth is not None and len(truth) == len(ref_out):
                ref_errs = self._ref_errors(ref_out, truth, lambda a, t: rel_l2(a.double(), t.double()))
                ref_maxs = self._ref_errors(ref_out, truth, _norm_max)
            else:
                truth = None
        rep = check_outputs(outs, ref_out, tol, names=slots.names_out, poisoned=True,
                            ref_errors=ref_errs, ref_max_errors=ref_maxs)
        pf = None
        if rep.passed and truth is not None and ref_errs is not None:
            pf = self.precision_finding(outs, truth, ref_errs)
        return rep, pf

    @staticmethod
    def precision_finding(outs, truth, ref_errs) -> Finding | None:
        for i, (o, t, er) in enumerate(zip(outs, truth, ref_errs)):
            if er is None:
                continue
            ec = rel_l2(o.double(), t.double())
            limit = max(16 * er, 1e-4)
            if ec > limit:
                return finding("precision_downgrade",
                               f"output {i}: error vs fp64 truth {ec:.3g} is {ec / max(er, 1e-30):.0f}x "
                               f"the declared-precision reference's {er:.3g} (limit {limit:.3g})",
                               {"candidate_rel_l2_vs_fp64": ec, "reference_rel_l2_vs_fp64": er,
                                "limit": limit, "output": i})
        return None


def correctness_figures(report: CheckReport, r: int, rounds: int) -> Correctness:
    s = report.summary()
    return Correctness(
        max_relative_error=s["max_relative_error"], max_absolute_error=s["max_absolute_error"],
        has_nan=s["has_nan"], has_inf=s["has_inf"],
        extra={"rel_l2": s["rel_l2"], "norm_max_error": s["norm_max_error"],
               "worst_slice_rel_l2": s["worst_slice_rel_l2"], "write_coverage": s["write_coverage"],
               "matched_ratio": s["matched_ratio"], "upstream_passed": report.upstream_passed,
               "failed_check": report.failed_check, "round": r, "rounds": rounds,
               "outputs": report.figures},
    )


def make_set(run: WorkloadRun, spec: RoundSpec) -> dict | Failure:
    """Input set of ``spec`` with a fresh seed, or INVALID_REFERENCE naming what failed."""
    try:
        return spec.generate(run.problem, run.w, run.seeds.next(spec.index), run.cfg.device)
    except MissingBlobError as e:
        return Failure(Status.INVALID_REFERENCE, f"inputs unavailable: {e}")
    except SpecError as e:
        return Failure(Status.INVALID_REFERENCE, f"input generation failed (round {spec.index}): {e}")
    except Exception as e:  # noqa: BLE001
        return Failure(Status.INVALID_REFERENCE,
                       f"input generation failed (round {spec.index}): {type(e).__name__}: {e}")


def run_rounds(run: WorkloadRun, oracle: Oracle, plan: list[RoundSpec], first: dict) -> tuple[Failure | None, Correctness | None]:
    """Every round of ``plan`` (round 0's inputs already made: ``first``), stopping at the
    first failure. Findings go to ``run.findings``. Returns (failure or None, figures of the
    last round judged)."""
    cfg, h, slots = run.cfg, run.h, run.slots
    report: CheckReport | None = None
    out_hashes: list[str] = []
    for n, spec in enumerate(plan):
        r = spec.index
        values = first if n == 0 else make_set(run, spec)
        if isinstance(values, Failure):
            return values, None
        try:
            t_ref = time.perf_counter()
            ref_out = oracle.run(values)
            run.reference_call_s = max(run.reference_call_s, time.perf_counter() - t_ref)
        except Exception as e:  # noqa: BLE001
            return Failure(Status.INVALID_REFERENCE, f"reference failed: {type(e).__name__}: {e}"), None
        bad = oracle.check_reference(ref_out, slots)
        if bad:
            return Failure(Status.INVALID_REFERENCE, bad), None
        scalars = slots.fill(0, values)
        timeout = cfg.first_call_timeout_s if n == 0 else run.call_timeout_s
        before = kids_before(run)
        try:
            rep = protocol.request(h, protocol.Call(slot=0, scalars=scalars), timeout_s=timeout)
        except WorkerTimeout as e:
            return Failure(Status.TIMEOUT, f"correctness round {r}: {e}"), None
        except protocol.ReplyInvalid as e:
            run.findings.append(finding("malformed_reply", f"correctness round {r}: {e}", {"op": e.op, "reason": e.reason}))
            return Failure(Status.RUNTIME_ERROR, f"correctness round {r}: {e}"), None
        except (WorkerDied, ProtocolError) as e:
            return Failure(Status.RUNTIME_ERROR, f"correctness round {r}: {e}"), None
        if isinstance(rep, protocol.ErrorReply):
            return Failure(Status.RUNTIME_ERROR, f"correctness round {r}: {rep.type}: {rep.message}\n"
                                                 f"{rep.traceback}"), None
        process_check(run, before, f"in correctness round {r}", late=n > 0)
        if rep.interposition:
            add_once(run.findings, interposition_finding(list(rep.interposition), f"correctness round {r}"))
            return Failure(Status.RUNTIME_ERROR, f"correctness round {r}: {list(rep.interposition)}"), None
        if rep.stream_unordered:
            add_once(run.findings, finding(
                "stream_unordered",
                f"outputs {list(rep.stream_unordered)} were still being written after the call returned, "
                "on a stream the caller's stream does not wait for",
                {"outputs": list(rep.stream_unordered), "round": r}))
        if rep.stream_changed:
            add_once(run.findings, finding("stream_changed",
                                           "the candidate changed the current CUDA stream and left it changed",
                                           {"round": r}))
        mutated = slots.inputs_intact(0)
        if mutated:
            run.findings.append(finding("input_mutation", f"the candidate wrote to its inputs {mutated}",
                                        {"inputs": mutated, "round": r}))
        issue = returned_issue(run, rep)
        if issue is not None:
            st = Status.INCORRECT_SHAPE if issue[0] == Status.REWARD_HACK else issue[0]
            return Failure(st, issue[1]), None
        outs = slots.outputs(0)
        report, pf = oracle.judge(outs, ref_out, values, run.tol, slots, cfg.precision_check)
        if pf is not None and not has(run.findings, "precision_downgrade"):
            pf.message = f"round {r}: " + pf.message
            run.findings.append(pf)
        out_hashes.append("|".join(guards.digests(outs)))
        if n == 0:
            h.tids_round0 = guards.thread_ids(h.pid)
            # later calls: a multiple of the reference's time, with a floor (the first call
            # paid the JIT and autotuning)
            run.call_timeout_s = cfg.later_call_timeout(run.reference_call_s)
        if not report.passed:
            corr = correctness_figures(report, r, len(plan))
            if n > 0 and len(set(out_hashes)) == 1:
                run.findings.append(finding("constant_output",
                                            "the output was bit-identical across rounds with different inputs",
                                            {"rounds": n + 1}))
            detail = "; ".join(f"{o.name}: {o.detail}" for o in report.outputs if o.failed_check)
            return Failure(report.status, f"correctness round {r}: {report.failed_check}: {detail}"), corr
    run.call_timeout_s = cfg.later_call_timeout(run.reference_call_s)
    return None, (correctness_figures(report, plan[-1].index, len(plan)) if report else None)
