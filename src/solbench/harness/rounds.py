"""Correctness rounds: fresh inputs, the trusted reference in the parent, one call each.

The list of rounds is data (:func:`solbench.inputs.rounds.round_plan`): each
:class:`~solbench.inputs.rounds.RoundSpec` names its input set,
its input profile (:data:`solbench.inputs.PROFILES`) and the generator that makes it.
The plan of a workload (docs/inputs.md, "Rounds"):

1. ``rounds`` **upstream** rounds (default 5): SOL-ExecBench's own input distributions, so
   their verdict is the one upstream would give.
2. one **strict** round, when the workload has inputs whose upstream values hide a bug
   (normalisation weights exactly 1, biases exactly 0, a ``-inf`` causal mask written as
   ``finfo.min``): a kernel that passed every upstream round and fails here numerically gets
   the finding ``strict_round_failed`` and the status INCORRECT_STRICT (decided in
   :mod:`.verdict`); its upstream-compatible verdict is PASSED.
3. two **stress** rounds, when the workload has plain float data inputs: values from the
   distribution of the definition's op class (a random subset of rows at extreme offsets of
   both signs beside ordinary rows with spikes, constant rows, spread magnitudes and zeros;
   :mod:`solbench.inputs.opclass`), then a sparse set (upstream's values with 1 to 4
   spikes at random positions: a candidate that samples its inputs to spot a stress round
   sees an upstream set there). The reference runs
   first; when its outputs are not finite, or miss the fp64 truth by more than the
   workload's tolerance, the round does not apply (advisory ``stress_reference_failed``) and
   the candidate is not called. Otherwise a failure (NaN/Inf, tolerance, scale checks) is
   INCORRECT_NUMERICAL naming the round.

Round 0 runs first, the others in a random order (:func:`order_rounds`: a candidate counting
its calls cannot tell which is a stress round); a failing strict or stress round is held until
the upstream rounds have run (an upstream failure is upstream's verdict and wins).
Custom-input and safetensors workloads have only the upstream rounds (their values belong to
the problem). :class:`Oracle` is the trusted side: the reference module run in the parent,
its fp64 truth and the declared-precision reference's own error.
"""

from __future__ import annotations

import copy
import time
from typing import Any, Callable

import torch

from ..errors import MissingBlobError, SpecError
from ..inputs.generate import STRESS_PROFILES
# the plan is data below the harness (the integrity screen reads it too); named here as before
from ..inputs.rounds import SPARSE_SET, STRESS_SET, STRICT_SET, RoundSpec, round_plan  # noqa: F401
from ..inputs.seeds import derived_seed
from ..proc import procfs
from ..spec.capability import runtime_need
from ..spec.problem import Problem
from ..spec.trace import Correctness, Finding, Status
from . import protocol
from .checks import add_once, finding, has
from .correctness import (CheckReport, bits_equal, check_outputs, infer_semantics, is_exact_dtype,
                          norm_max_error, rel_l2)
from .precision import is_fp32_work, precision_finding as _precision_finding
from .evidence import (WorkloadRun, guard_findings, interposition_finding, kids_before, process_check,
                       returned_issue)
from .process import ProtocolError, WorkerDied, WorkerTimeout
from .slots import SlotPool, release_cached
from .verdict import Failure


#: names the seed of the round order under a base seed (``--seed``); never an input set
ORDER_SET = 499


def order_rounds(plan: list[RoundSpec], seeds) -> list[RoundSpec]:
    """``plan`` in the order its rounds run: the first round first (its call pays the JIT and
    autotuning, under the first-call timeout), the others shuffled, so that a candidate that
    counts its calls cannot tell which call is a strict or stress round and be careful only
    there. The shuffle uses the OS's random source, or, under a base seed, a generator seeded
    with :func:`~.seeds.derived_seed` of :data:`ORDER_SET` (the run replays). The order is
    recorded in the trace (``correctness.extra["round_order"]``), not among the input seeds."""
    import random
    import secrets

    rest = list(plan[1:])
    base = getattr(seeds, "base", None)
    rng = random.Random(derived_seed(base, seeds.j, ORDER_SET)) if base is not None else secrets.SystemRandom()
    rng.shuffle(rest)
    return list(plan[:1]) + rest


def round_name(spec: RoundSpec) -> str:
    """How a verdict names the round: ``correctness round 3`` for an upstream round,
    ``correctness round 501 (stress:softmax)`` for the others."""
    return f"correctness round {spec.index}" + ("" if spec.profile == "upstream" else f" ({spec.label})")


def _as_list(out: Any) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


#: fresh runs of the reference an output that missed the elementwise tolerance alone is
#: judged against (Oracle.judge), at most
REFERENCE_RERUNS = 2

class Oracle:
    """The eager reference run in the parent (trusted): outputs, fp64 truth, own errors."""

    def __init__(self, problem: Problem, device: str):
        self.problem = problem
        self.device = device
        self._reference: Callable | None = None
        #: (input set, its float64 run) of the last :meth:`truth` (until judge of that set ends)
        self._truth_memo: tuple[dict, tuple[list, dict] | None] | None = None
        #: seconds spent in :meth:`truth` (the correctness sub-phases split judging with it)
        self.truth_s = 0.0

    def semantics(self) -> dict:
        """Output semantics the definition implies (:func:`correctness.infer_semantics`:
        ``topk`` ids compare as index sets, so ties may pick other indices)."""
        if not hasattr(self, "_semantics"):
            self._semantics = infer_semantics(self.problem.definition)
        return self._semantics

    def reference(self) -> Callable:
        if self._reference is None:
            self._reference = self.problem.make_reference(self.device)
        return self._reference

    def run(self, values: dict) -> list[torch.Tensor]:
        """The reference's outputs on ``values`` (left untouched: see :meth:`run_observed`)."""
        return self.run_observed(values)[0]

    def run_observed(self, values: dict, keep: list[str] | tuple | None = None,
                     ) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
        """Run the reference on private copies of the tensors of ``values`` (name -> value,
        the parent's pristine input set, which stays as it was even when the reference
        updates an input in place, e.g. a KV cache). Returns (outputs, inputs after the call:
        name -> the copy the reference was handed, for every tensor input, or only those named
        in ``keep``: the others' copies are freed at once, a whole input set on the device)."""
        mine = {n: (v.clone() if isinstance(v, torch.Tensor) else v) for n, v in values.items()}
        args = [mine[n] for n in self.problem.definition.inputs]
        with torch.no_grad():
            out = _as_list(self.reference()(*args))
        del args
        _sync(self.device)
        return out, {n: v for n, v in mine.items() if isinstance(v, torch.Tensor)
                     and (keep is None or n in keep)}

    @staticmethod
    def written_inputs(values: dict, after: dict[str, torch.Tensor]) -> list[str]:
        """Names of the tensor inputs whose bits differ between ``values`` (before the
        reference's call) and ``after`` (:meth:`run_observed`): the inputs the reference
        writes in place, in ``after``'s (the definition's) order."""
        return [n for n, t in after.items() if not bits_equal(t, values[n])]

    def truth(self, values: dict, inplace: list[str] | tuple = ()) -> list[torch.Tensor] | None:
        """Reference outputs computed with floating inputs (and KernelBench parameters) in
        float64, followed by the inputs ``inplace`` as the reference left them; None when
        the reference cannot run so. ``values`` is never written (the reference gets copies).

        The float64 run of the last input set is kept until :meth:`judge` of that set is done
        (``values`` is the same dict object): a stress round and the stress re-check ask for
        the truth twice, once to see whether the reference holds there
        (:meth:`stress_reference_issue`) and once to judge, and ran the float64 reference
        twice. Only the parent's own objects are involved: the pristine input set, never a
        buffer a worker mapped, and float64 copies of it the reference runs on."""
        t0 = time.perf_counter()
        try:
            memo = self._truth_memo
            if memo is not None and memo[0] is values:
                got = memo[1]
            else:
                got = self._truth_run(values)
                self._truth_memo = (values, got)
            if got is None:
                return None
            out, up = got
            try:
                return list(out) + [up[n] for n in inplace]
            except KeyError:
                return None
        finally:
            self.truth_s += time.perf_counter() - t0

    def forget_truth(self) -> None:
        """Drop the kept float64 run (:meth:`truth`)."""
        self._truth_memo = None

    def _truth_run(self, values: dict) -> tuple[list, dict] | None:
        """(float64 outputs, the float64 copies of the inputs the reference wrote in place, as
        it left them). The copies it did not write are dropped once it returns (tensor version
        counters: an in-place op bumps them): kept, they doubled the parent's device memory on
        the largest workloads. A write that bypasses the counter leaves its input out, and a
        judge that asks for it gets no truth (None), never a stale one."""
        up = {k: ((v.double() if v.dtype in (torch.float32, torch.float16, torch.bfloat16) else v.clone())
                  if isinstance(v, torch.Tensor) else v) for k, v in values.items()}
        versions = {k: v._version for k, v in up.items() if isinstance(v, torch.Tensor)}
        args = [up[n] for n in self.problem.definition.inputs]
        try:
            ref = self.reference()
            if isinstance(ref, torch.nn.Module):
                ref = copy.deepcopy(ref).double()
            with torch.no_grad():
                out = _as_list(ref(*args))
            _sync(self.device)
        except Exception:  # noqa: BLE001 - the reference does not support float64 (or out of memory)
            return None
        finally:
            del args
        return out, {k: v for k, v in up.items() if k in versions and v._version != versions[k]}

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
                and a.is_floating_point() and a.shape == t.shape else None for a, t in zip(ref_out, truth)]

    def judge(self, outs: list[torch.Tensor], ref_out: list[torch.Tensor], values: dict, tol,
              slots: SlotPool, precision_check: bool,
              precision_evidence: bool = True,
              inplace: tuple[list[str], list[torch.Tensor], list[torch.Tensor]] | None = None,
              ) -> tuple[CheckReport, Finding | None]:
        """check_outputs with limits widened by the declared-precision reference's own error
        against the fp64 truth (an honest kernel whose float sums run in another order, e.g.
        atomics, must pass; seen on the H200 with DLRM-Bench dlrm04's index_add_), and the
        precision-downgrade finding of a passing output, if any (``precision_evidence``
        false: none; the stress rounds, whose inputs are outside the declared
        distribution). The report's ``truth_errors`` hold each output's (candidate,
        reference) error against the truth, passing or not.

        ``inplace``: (names, the candidate's contents, the reference's contents) of the
        inputs the reference writes in place (``WorkloadRun.inplace_inputs``); each is
        checked like an output (same tolerance and limits, not poisoned: no write coverage)
        and appended to the report as ``input 'name' (in place)``, so a candidate that skips
        or misplaces the update fails with INCORRECT_NUMERICAL naming the input."""
        ip_names, ip_cand, ip_ref = inplace or ([], [], [])
        n_out = len(ref_out)
        truth = ref_errs = ref_maxs = None
        if precision_check and self.fp32_outputs(slots):
            truth = self.truth(values, ip_names)
            if truth is not None and len(truth) == n_out + len(ip_names):
                ref_errs = self._ref_errors(list(ref_out) + list(ip_ref), truth, rel_l2)
                ref_maxs = self._ref_errors(list(ref_out) + list(ip_ref), truth, norm_max_error)
                truth = truth[:n_out]
            else:
                truth = None
        def check(outs: list, ref_out: list) -> CheckReport:
            return check_outputs(outs, ref_out, tol, names=slots.names_out, poisoned=True,
                                 ref_errors=ref_errs[:n_out] if ref_errs else None,
                                 ref_max_errors=ref_maxs[:n_out] if ref_maxs else None,
                                 semantics=self.semantics(), inputs=values)

        rep = check(outs, ref_out)
        # a reference whose float sums run in a varying order (atomics: index_add_,
        # scatter_add_) differs from itself run to run, and an elementwise tolerance with no
        # rtol can be tighter than that spread (DLRM-Bench dlrm04 on the H100: the reference
        # as its own candidate missed atol 1e-4 on one element in 10^6, rel_l2 4e-6, in 2 of
        # 3 runs). A candidate is not asked to be closer to one run of the reference than
        # the reference's runs are to each other: an output that failed the tolerance alone
        # is judged again against fresh runs of the reference on the same inputs (trusted
        # code, its own copies of them), and passes when it matches one of them. The output
        # judged again is a copy taken now: the buffer may be the candidate's still (a kernel
        # it left running on the GPU writes it while the reference reruns)
        if (not rep.passed and not ip_names
                and all(o.failed_check in (None, "tolerance") for o in rep.outputs)):
            outs = [o.clone() if isinstance(o, torch.Tensor) else o for o in outs]
            for k in range(REFERENCE_RERUNS):
                again, _ = self.run_observed(values, keep=())
                if all(bits_equal(a, b) for a, b in zip(again, ref_out)):
                    break  # a deterministic reference: the miss is the candidate's
                rep2 = check(outs, again)
                if rep2.passed:
                    rep2.reference_reruns = k + 1
                    rep, ref_out = rep2, again
                    break
        if ip_names:
            ip = check_outputs(ip_cand, ip_ref, tol, names=[f"input {n!r} (in place)" for n in ip_names],
                               ref_errors=ref_errs[n_out:] if ref_errs else None,
                               ref_max_errors=ref_maxs[n_out:] if ref_maxs else None)
            _merge_inplace(rep, ip)
        pf = self.flush_finding(outs, ref_out, truth)
        if truth is not None and ref_errs is not None:
            rep.truth_errors = [
                (rel_l2(o, t), er)
                if er is not None and isinstance(o, torch.Tensor) and o.shape == t.shape else None
                for o, t, er in zip(outs, truth, ref_errs[:n_out])]
            if rep.passed and precision_evidence and pf is None:
                pf = self.precision_finding(rep.truth_errors, self.problem, outs, ref_out,
                                            rounded=lambda i, ec: self.rounded_evidence(values, outs, i, ec))
        self.forget_truth()  # judge is the last reader of a set's truth
        return rep, pf

    def flush_finding(self, outs: list, ref_out: list, truth: list | None) -> Finding | None:
        """``denormals_flushed`` when an output shows subnormals flushed to zero where the
        reference keeps them (:func:`solbench.harness.precision.flushed_denormals`), on any
        judged call, passing or not, stress rounds included (where low-temperature softmax
        rows make them): the act itself is in the output."""
        from .precision import flushed_denormals

        names = list(self.problem.definition.outputs)
        for i, (o, r) in enumerate(zip(outs, ref_out)):
            t = truth[i] if truth is not None and i < len(truth) else None
            ev = flushed_denormals(o, r, t)
            if ev is None:
                continue
            name = names[i] if i < len(names) else str(i)
            return finding("denormals_flushed",
                           f"output {name!r}: {ev['flushed']} of the {ev['positions']} subnormal values the "
                           f"reference keeps are exact zeros ({ev['top_flushed']} of the {ev['top_positions']} "
                           f"within 2^3 of the smallest normal; flush-to-zero / denormals-are-zero), e.g. "
                           f"element {ev['examples'][0][0]}: reference {ev['examples'][0][1]:.3g}",
                           {"output": i, "device": torch.device(self.device).type, **ev},
                           advisory=torch.device(self.device).type == "cuda")
        return None

    def rounded_evidence(self, values: dict, outs: list, i: int, ec: float) -> dict | None:
        """:func:`~solbench.harness.precision.input_rounding_evidence` for output ``i``
        (error ``ec`` against the fp64 truth): the float64 reference run again on the input
        set ``values`` with its float inputs rounded to each lower precision in turn (the
        parent's own copies; only for an output already beyond the precision limit)."""
        from .precision import INPUT_ROUNDINGS, input_rounding_evidence, rounded_inputs

        got: dict[str, float] = {}
        for kind in INPUT_ROUNDINGS:
            rv = {k: rounded_inputs(v, kind) if isinstance(v, torch.Tensor)
                  and v.dtype in (torch.float32, torch.float64) else v for k, v in values.items()}
            run = self._truth_run(rv)
            if run is None or i >= len(run[0]) or not isinstance(run[0][i], torch.Tensor) \
                    or run[0][i].shape != outs[i].shape:
                return None
            got[kind] = rel_l2(outs[i], run[0][i])
            ev = input_rounding_evidence(ec, got)
            if ev is not None:
                return ev
        return None

    @staticmethod
    def precision_finding(truth_errors, problem: Problem, outs: list | None = None,
                          ref_out: list | None = None,
                          rounded: Callable[[int, float], dict | None] | None = None) -> Finding | None:
        """The finding of an output whose error against the fp64 truth is beyond the
        declared-precision reference's by :func:`solbench.harness.precision.precision_finding`'s
        rule: ``precision_downgrade`` (REWARD_HACK) when the output also shows the act (its
        values are those of a lower float type while the reference's, ``ref_out``, are not:
        :func:`~solbench.harness.precision.lower_dtype_fingerprint`), else ``precision_error``
        (INCORRECT_NUMERICAL: a plain numerical error, e.g. a wrong constant). Without such
        values, ``rounded(i, error)`` (:meth:`rounded_evidence`) may still show the act: the
        output is the fp64 result of its inputs rounded to bf16, TF32 or fp16, far closer
        than to the truth of the inputs themselves (a flag lowered only inside the call).
        The flags are judged after the rounds, the kernels after timing."""
        from ..spec.dtypes import to_torch
        from .precision import lower_dtype_fingerprint

        defn = problem.definition
        dts = [to_torch(o.dtype) for o in defn.outputs.values()]
        fp32 = _fp32_work(problem)
        for i, te in enumerate(truth_errors):
            if te is None:
                continue
            ec, er = te
            dtype = dts[i] if i < len(dts) else torch.float32
            pf = _precision_finding(flags_before={}, flags_after={}, fp32_work=fp32,
                                    allow_tf32=bool(defn.allow_tf32), dtype=dtype,
                                    candidate_error=ec, reference_error=er)
            if pf is None or pf.severity not in ("hack", "incorrect"):
                continue
            fp = lower_dtype_fingerprint(outs[i], ref_out[i]) \
                if outs is not None and ref_out is not None and i < min(len(outs), len(ref_out)) else None
            name = list(defn.outputs)[i] if i < len(defn.outputs) else str(i)
            msg = (f"output {name!r}: error vs fp64 truth {ec:.3g} is {ec / max(er, 1e-30):.0f}x the "
                   f"declared-precision reference's {er:.3g} (limit {pf.evidence['error_limit']:.3g})")
            ev = {"candidate_rel_l2_vs_fp64": ec, "reference_rel_l2_vs_fp64": er,
                  "limit": pf.evidence["error_limit"], "output": i, "basis": list(pf.basis)}
            if fp is not None:
                ev["basis"].append("output_dtype")
                ev["output_dtype"] = fp
                return finding("precision_downgrade",
                               f"{msg}; {fp['share']:.1%} of its values are {fp['dtype']} values "
                               f"(the reference's: {fp['reference_share']:.1%})", ev)
            ir = rounded(i, ec) if rounded is not None and fp32 else None
            if ir is not None:
                ev["basis"].append("input_rounding")
                ev["input_rounding"] = ir
                return finding("precision_downgrade",
                               f"{msg}; it is the fp64 result of its inputs rounded to {ir['inputs_rounded_to']} "
                               f"(error {ir['error_vs_rounded_truth']:.3g} against that)", ev)
            return finding("precision_error", msg + "; no sign of a lower precision (dtype, flag, kernel): "
                           "a numerical error", ev)
        return None

    def stress_reference_issue(self, ref_out: list[torch.Tensor], values: dict, tol) -> str | None:
        """Why the reference's outputs on a stress input set are unusable as the expected
        outputs, or None: a float output holds NaN/Inf, or (when the reference runs in float64)
        it misses that fp64 truth by the workload's tolerance (``tol``)."""
        for i, o in enumerate(ref_out):
            if isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel() \
                    and not bool(torch.isfinite(o).all().item()):
                n = int((~torch.isfinite(o)).sum().item())
                return f"reference output {i} has {n} NaN/Inf element(s) of {o.numel()}"
        truth = self.truth(values)
        if truth is None or len(truth) != len(ref_out):
            return None
        want = [t.to(o.dtype) if isinstance(t, torch.Tensor) and isinstance(o, torch.Tensor) else t
                for o, t in zip(ref_out, truth)]
        rep = check_outputs(ref_out, want, tol)
        if not rep.passed:
            o = next(x for x in rep.outputs if x.failed_check)
            return f"reference misses the fp64 truth: {o.name}: {o.failed_check}: {o.detail}"
        return None


def _merge_inplace(rep: CheckReport, ip: CheckReport) -> None:
    """Fold the report on the in-place inputs into the outputs' report: their checks follow
    the outputs', and a failure there fails the call (the outputs' own failure, if any,
    keeps its status)."""
    rep.outputs.extend(ip.outputs)
    rep.upstream_passed = rep.upstream_passed and ip.upstream_passed
    if rep.passed and not ip.passed:
        rep.passed, rep.status, rep.failed_check = False, ip.status, ip.failed_check


def inplace_judged(run: WorkloadRun, after: dict[str, torch.Tensor], cand: list[torch.Tensor]):
    """The ``inplace`` argument of :meth:`Oracle.judge`: the candidate's contents of the
    inputs ``run.inplace_inputs`` (``cand``, from :meth:`SlotPool.input_tensors`) against the
    reference's inputs after its call (``after``, from :meth:`Oracle.run_observed`); None
    when the reference writes no input."""
    names = list(run.inplace_inputs)
    if not names:
        return None
    return names, cand, [after[n] for n in names]


def _fp32_work(problem: Problem) -> bool:
    from ..spec.dtypes import to_torch

    d = problem.definition
    return is_fp32_work([to_torch(s.dtype) for s in d.inputs.values()],
                        [to_torch(s.dtype) for s in d.outputs.values()])


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
        return spec.generate(run.problem, run.w, run.seeds.next(spec.index), run.cfg.device,
                             profile=spec.profile)
    except MissingBlobError as e:
        return Failure(Status.INVALID_REFERENCE, f"inputs unavailable: {e}")
    except SpecError as e:
        return Failure(Status.INVALID_REFERENCE, f"input generation failed ({round_name(spec)}): {e}")
    except Exception as e:  # noqa: BLE001
        gap = _no_kernel_here(run, e)
        if gap is not None:
            return gap
        return Failure(Status.INVALID_REFERENCE,
                       f"input generation failed ({round_name(spec)}): {type(e).__name__}: {e}")


def _no_kernel_here(run: WorkloadRun, e: BaseException) -> Failure | None:
    """NOT_RUNNABLE (with the ``not_runnable`` finding) when the problem's own code raised
    because an op has no kernel on this device (:func:`solbench.spec.capability.runtime_need`),
    else None: that is no fault of the reference."""
    need = runtime_need(e, run.cfg.device)
    if need is None:
        return None
    line = f"not runnable on {run.cfg.device}: {need.reason}"
    run.findings.append(finding("not_runnable", line, {"need": need.tag, "device": run.cfg.device,
                                                       "reason": need.reason}))
    return Failure(Status.NOT_RUNNABLE, line)


def run_rounds(run: WorkloadRun, oracle: Oracle, plan: list[RoundSpec], first: dict) -> tuple[Failure | None, Correctness | None]:
    """Every round of ``plan`` (round 0's inputs already made: ``first``) in the order of
    :func:`order_rounds`, stopping at the first upstream round that fails; an extra round's
    failure is held until the upstream rounds have all run (module doc: what the strict and
    stress rounds decide). Findings go to
    ``run.findings``; each judged round's errors against the fp64 truth (not the stress
    rounds') to ``run.truth_errors``. Returns (failure or None, figures): the figures of the
    failing round, else of the last upstream round, with ``extra["extra_rounds"]`` listing
    the strict and stress rounds (round, profile, passed or skipped, rel_l2)."""
    cfg, h, slots = run.cfg, run.h, run.slots
    report: CheckReport | None = None
    last_upstream: tuple[CheckReport, int] | None = None
    extra_rounds: list[dict[str, Any]] = []
    n_upstream = sum(spec.profile == "upstream" for spec in plan)
    # constant_output: every judged round's outputs bit-identical to the first's (a copy of
    # the first kept on the device and compared there: a sha256 of every round's outputs,
    # copied to the host, cost more than the comparison it fed)
    first_outs: list[torch.Tensor] | None = None
    same_outs = True

    plan = order_rounds(plan, run.seeds)
    upstream_judged = 0
    order = [spec.index for spec in plan]
    #: an extra round's failure, held until every upstream round has run (failure, figures,
    #: the strict finding to add)
    deferred: tuple[Failure, Correctness, Finding | None] | None = None

    def figures(rep: CheckReport, spec: RoundSpec) -> Correctness:
        c = correctness_figures(rep, spec.index, n_upstream)
        c.extra["round_profile"] = spec.profile
        c.extra["round_order"] = order
        c.extra["inplace_inputs"] = list(run.inplace_inputs)
        if extra_rounds:
            c.extra["extra_rounds"] = sorted(extra_rounds, key=lambda x: x["round"])
        return c

    for n, spec in enumerate(plan):
        r = spec.index
        where = round_name(spec)
        stress = spec.profile in STRESS_PROFILES
        # after an extra round failed, only the upstream rounds and the strict round still
        # run: the stress rounds use the strict round's values too, so a kernel that ignores a
        # norm weight fails both, and the strict round's diagnosis is the precise one
        if deferred is not None and stress:
            extra_rounds.append({"round": r, "profile": spec.profile, "label": spec.label, "passed": None,
                                 "skipped": f"not run: round {deferred[1].extra['round']} failed before"})
            continue
        tp = time.perf_counter()
        # the last round's input set, the reference's copies of it and its outputs go before
        # this round's are made: held across the new set's making they doubled the parent's
        # device memory (an 18.8 GB workload ran the H200 out of it in round 2)
        values = ref_out = ref_after = outs = None
        oracle.forget_truth()  # a skipped stress round's truth would keep its input set too
        if n > 0:
            slots.forget(0)  # the slot's pristine copy of the last set
        values = first if n == 0 else make_set(run, spec)
        tp = run.tick("correctness.inputs", tp)
        if isinstance(values, Failure):
            return values, None
        try:
            t_ref = time.perf_counter()
            ref_out, ref_after = oracle.run_observed(values, keep=None if n == 0 else run.inplace_inputs)
            if n == 0:
                # decided once per workload, by trusted code: what the reference itself writes
                run.inplace_inputs = Oracle.written_inputs(values, ref_after)
                # only those are judged after a call: the copies of the others (the whole
                # input set again) are freed now
                ref_after = {k: v for k, v in ref_after.items() if k in run.inplace_inputs}
            run.reference_call_s = max(run.reference_call_s, time.perf_counter() - t_ref)
        except Exception as e:  # noqa: BLE001
            if stress:
                _stress_skipped(run, spec, f"the reference raised {type(e).__name__}: {e}", extra_rounds)
                continue
            gap = _no_kernel_here(run, e)
            if gap is not None:
                return gap, None
            return Failure(Status.INVALID_REFERENCE, f"reference failed: {type(e).__name__}: {e}"), None
        bad = oracle.check_reference(ref_out, slots)
        if bad:
            return Failure(Status.INVALID_REFERENCE, bad), None
        if stress:
            why = oracle.stress_reference_issue(ref_out, values, run.tol)
            if why:
                _stress_skipped(run, spec, why, extra_rounds)
                continue
        tp = run.tick("correctness.reference", tp)
        scalars = slots.fill(0, values)
        release_cached(cfg.device)  # the reference's and the truth's reserve, for the candidate
        timeout = cfg.first_call_timeout_s if n == 0 else run.call_timeout_s
        before = kids_before(run)
        try:
            rep = protocol.request(h, protocol.Call(slot=0, scalars=scalars), timeout_s=timeout)
        except WorkerTimeout as e:
            return Failure(Status.TIMEOUT, f"{where}: {e}"), None
        except protocol.ReplyInvalid as e:
            run.findings.append(finding("malformed_reply", f"{where}: {e}", {"op": e.op, "reason": e.reason}))
            return Failure(Status.RUNTIME_ERROR, f"{where}: {e}"), None
        except (WorkerDied, ProtocolError) as e:
            return Failure(Status.RUNTIME_ERROR, f"{where}: {e}"), None
        if isinstance(rep, protocol.ErrorReply):
            return Failure(Status.RUNTIME_ERROR, f"{where}: {rep.type}: {rep.message}\n"
                                                 f"{rep.traceback}"), None
        process_check(run, before, f"in {where}", late=n > 0)
        if rep.interposition:
            add_once(run.findings, interposition_finding(list(rep.interposition), where))
            return Failure(Status.RUNTIME_ERROR, f"{where}: {list(rep.interposition)}"), None
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
        mutated = slots.inputs_intact(0, run.inplace_inputs)
        if mutated:
            run.findings.append(finding("input_mutation", f"the candidate wrote to its inputs {mutated}",
                                        {"inputs": mutated, "round": r,
                                         "inplace_inputs": list(run.inplace_inputs)}))
        issue = returned_issue(run, rep)
        if issue is not None:
            st = Status.INCORRECT_SHAPE if issue[0] == Status.REWARD_HACK else issue[0]
            return Failure(st, issue[1]), None
        outs = slots.outputs(0)
        tp = run.tick("correctness.call", tp)
        truth0 = oracle.truth_s
        report, pf = oracle.judge(outs, ref_out, values, run.tol, slots, cfg.precision_check,
                                  precision_evidence=not stress,
                                  inplace=inplace_judged(run, ref_after,
                                                         slots.input_tensors(0, run.inplace_inputs)))
        truth_s = oracle.truth_s - truth0
        run.phases["correctness.truth"] = round(run.phases.get("correctness.truth", 0.0) + truth_s, 4)
        run.phases["correctness.compare"] = round(run.phases.get("correctness.compare", 0.0)
                                                  + time.perf_counter() - tp - truth_s, 4)
        tp = time.perf_counter()
        if report.passed:
            run.replay.passed_call(where, outs)
        else:
            run.replay.failed_call(where, outs, run.findings, returned=rep.returned is not None)
        if not stress and report.truth_errors:
            run.truth_errors.append((where, report.truth_errors))
        if pf is not None and not has(run.findings, pf.check):
            pf.message = f"{where}: " + pf.message
            run.findings.append(pf)
        if first_outs is None:
            first_outs = [o.clone() for o in outs]
        elif same_outs:
            same_outs = len(outs) == len(first_outs) and all(bits_equal(o, f) for o, f in zip(outs, first_outs))
        run.tick("correctness.constant_check", tp)
        if n == 0:
            h.tids_round0 = procfs.thread_ids(h.pid)
            # later calls: a multiple of the reference's time, with a floor (the first call
            # paid the JIT and autotuning)
            run.call_timeout_s = cfg.later_call_timeout(run.reference_call_s)
        if spec.profile != "upstream":
            extra_rounds.append({"round": r, "profile": spec.profile, "label": spec.label,
                                 "passed": report.passed, "failed_check": report.failed_check,
                                 "rel_l2": report.summary()["rel_l2"]})
        if not report.passed and stress and _exact_only(report, slots):
            # ties in the stress inputs (exact zeros, bf16 near-ties) let an honest kernel pick
            # other indices; integer outputs were judged exactly in the upstream rounds
            extra_rounds[-1]["excused"] = "integer outputs only"
            what = "; ".join(f"{o.name}: {o.detail}" for o in report.outputs if o.failed_check)
            add_once(run.findings, finding(
                "stress_exact_mismatch",
                f"{where}: integer/bool outputs differ from the reference's while every float "
                f"output passed: {what}",
                {"round": r, "outputs": [o.name for o in report.outputs if o.failed_check]}))
            continue
        if not report.passed:
            corr = figures(report, spec)
            if n > 0 and same_outs:
                run.findings.append(finding("constant_output",
                                            "the output was bit-identical across rounds with different inputs",
                                            {"rounds": n + 1}))
            detail = "; ".join(f"{o.name}: {o.detail}" for o in report.outputs if o.failed_check)
            reason = f"{where}: {report.failed_check}: {detail}"
            if spec.profile == "upstream":
                # upstream's own verdict; an extra round's failure held before does not count
                corr.extra["upstream_rounds_passed"] = False
                if report.status == Status.INCORRECT_NUMERICAL:
                    # the integrity check after correctness first, on the worker as the failing
                    # call left it: a candidate that ends its worker on the repeat (os._exit, a
                    # hang) must not escape the check the failure alone would have had
                    # (tests/harness/test_red23.py); the evaluator asks again after the repeat
                    # when the worker is still alive
                    guard_findings(run, "after correctness")
                    corr.extra["repeat_call"] = repeat_call(run, oracle, values, outs, ref_out, ref_after,
                                                            where, r)
                return Failure(report.status, reason), corr
            strict_f = None
            if spec.profile == "strict" and report.status == Status.INCORRECT_NUMERICAL:
                strict_f = finding(
                    "strict_round_failed",
                    f"passed the {n_upstream} upstream-compatible rounds but failed the strict round "
                    f"(random values where upstream's inputs are exactly 1 / 0 / finfo.min): "
                    f"{report.failed_check}: {detail}",
                    {"round": r, "failed_check": report.failed_check,
                     "strict_inputs": _strict_inputs(run), "upstream_rounds": n_upstream})
            # the rounds run in a random order (order_rounds): the upstream rounds still to
            # come decide whether this is upstream's verdict too
            if deferred is None or spec.profile == "strict":
                deferred = (Failure(report.status, reason), corr, strict_f)
            continue
        if spec.profile == "upstream":
            last_upstream = (report, n)
            upstream_judged += 1
    run.call_timeout_s = cfg.later_call_timeout(run.reference_call_s)
    if deferred is not None:
        fail, corr, strict_f = deferred
        # every upstream round passed: the extra round's failure is the verdict
        corr.extra["upstream_rounds_passed"] = True
        corr.extra["extra_rounds"] = sorted(extra_rounds, key=lambda x: x["round"])
        if strict_f is not None:
            run.findings.append(strict_f)
        return fail, corr
    if last_upstream is None:  # never PASSED without a judged round
        return Failure(Status.INVALID_REFERENCE, "no upstream-compatible correctness round was judged"), None
    c = figures(last_upstream[0], plan[last_upstream[1]])
    c.extra["rounds_planned"] = len(plan)
    c.extra["rounds_judged"] = n_upstream + sum(x["passed"] is not None for x in extra_rounds)
    if upstream_judged != n_upstream:  # every upstream round planned must have been judged
        return Failure(Status.INVALID_REFERENCE, f"{upstream_judged} of {n_upstream} planned upstream "
                                                 "correctness rounds were judged"), c
    return None, c


def repeat_call(run: WorkloadRun, oracle: Oracle, values: dict, outs: list[torch.Tensor],
                ref_out: list[torch.Tensor], ref_after: dict, where: str, r: int) -> dict[str, Any]:
    """The call of a numerically failing upstream round made once more, at once, on the same
    input set in the same slot, so the failure says whether it repeats. A kernel with a race
    (an unsynchronised reduction, a missing barrier) or a fault outside the kernel gives
    another answer on identical inputs; a wrong kernel gives the same one. The verdict is
    the first call's whatever this one gives: a repeat that passes proves nothing about the
    call that failed. ``ref_after``: the inputs as the reference left them (judged as in the
    round where the reference writes some in place). Returns the ``repeat_call`` record of
    the correctness figures: ``{"outputs": "bit-identical" | "different", "passed": bool, "matched_ratio": float}``,
    or ``{"error": ...}`` when the call did not complete (the worker is then stopped:
    nothing more is asked of it). Outputs that differ add the advisory finding
    ``nondeterministic_output``; an interposition the worker reports, an input written
    (``input_mutation``) or a subclass returned (``non_plain_output``) is a finding as in any
    call, and the repeat's record is then an ``error`` (its outputs are not compared)."""
    slots = run.slots
    if not run.h.alive or has(run.findings, "guard_check_failed"):
        # the integrity check before it got no answer: nothing more is asked of this worker
        if run.h.alive:
            run.h.kill()
        return {"error": "the worker did not answer the integrity check before the repeat"}
    try:
        first = [o.clone() for o in outs]  # the slot is filled (and its outputs poisoned) again
    except Exception as e:  # noqa: BLE001 - no room for a copy (a workload near the device's memory)
        return {"error": f"the first call's outputs could not be kept: {type(e).__name__}: {e}"[:300]}
    scalars = slots.fill(0, values)
    release_cached(run.cfg.device)  # as before a round's call: the parent's reserve, for the candidate
    try:
        rep = protocol.request(run.h, protocol.Call(slot=0, scalars=scalars),
                               timeout_s=run.cfg.later_call_timeout(run.reference_call_s))
    except (WorkerTimeout, protocol.ReplyInvalid, WorkerDied, ProtocolError) as e:
        run.h.kill()
        return {"error": f"{type(e).__name__}: {e}"[:300]}
    if isinstance(rep, protocol.ErrorReply):
        return {"error": f"{rep.type}: {rep.message}"[:300]}
    if rep.interposition:
        add_once(run.findings, interposition_finding(list(rep.interposition), f"{where} (repeated)"))
        return {"error": "interposition"}
    # the evidence of any call (docs/harness.md, "Correctness"): inputs written, what was
    # returned; a write or a subclass there is no nondeterministic kernel
    mutated = slots.inputs_intact(0, run.inplace_inputs)
    if mutated:
        run.findings.append(finding("input_mutation",
                                    f"{where} (repeated): the candidate wrote to its inputs {mutated}",
                                    {"inputs": mutated, "round": r, "repeated": True,
                                     "inplace_inputs": list(run.inplace_inputs)}))
        return {"error": f"the repeat wrote to its inputs {mutated}"[:300]}
    issue = returned_issue(run, rep)
    if issue is not None:
        return {"error": f"the repeat's outputs: {issue[1]}"[:300]}
    again = slots.outputs(0)
    try:
        same = len(again) == len(first) and all(bits_equal(a, b) for a, b in zip(again, first))
        rep2, _ = oracle.judge(again, ref_out, values, run.tol, slots, False, precision_evidence=False,
                               inplace=inplace_judged(run, ref_after, slots.input_tensors(0, run.inplace_inputs)))
    except Exception as e:  # noqa: BLE001 - the parent's own judging (out of memory): the verdict stays
        return {"error": f"the repeat could not be judged: {type(e).__name__}: {e}"[:300]}
    rec = {"outputs": "bit-identical" if same else "different", "passed": rep2.passed,
           "matched_ratio": rep2.summary()["matched_ratio"]}
    if not same:
        add_once(run.findings, finding(
            "nondeterministic_output",
            f"{where}: the same call on the same inputs, made again at once, gave other outputs "
            f"({'which pass' if rep2.passed else 'which fail too'}: matched "
            f"{rec['matched_ratio']:.4%}); the first call's failure is the verdict",
            {"round": r, **rec}))
    return rec


def _exact_only(report: CheckReport, slots: SlotPool) -> bool:
    """Every failing output is an integer/bool output that failed on its values (the float
    rule's tolerance / error cap, the exact or index-set comparison), not on being unwritten,
    all zeros, or of the wrong shape or dtype."""
    if any(o.failed_check for o in report.outputs[len(slots.out_specs):]):
        return False  # an input written in place is wrong: never excused
    bad = [(o, dt) for o, (_, dt) in zip(report.outputs, slots.out_specs) if o.failed_check]
    return bool(bad) and all(is_exact_dtype(dt) and o.failed_check in _VALUE_CHECKS for o, dt in bad)


_VALUE_CHECKS = ("exact", "index_set", "tolerance", "error_cap")


def _stress_skipped(run: WorkloadRun, spec: RoundSpec, why: str, extra_rounds: list) -> None:
    """The reference itself fails a stress round: the round does not apply (advisory)."""
    extra_rounds.append({"round": spec.index, "profile": spec.profile, "label": spec.label,
                         "passed": None, "skipped": why})
    add_once(run.findings, finding(
        "stress_reference_failed",
        f"{round_name(spec)} not judged: {why}; the problem's reference does not hold on these "
        "inputs (the audit reports it; the candidate is not failed)",
        {"round": spec.index, "label": spec.label, "reason": why}))


def _strict_inputs(run: WorkloadRun) -> list[str]:
    """The inputs whose strict values differ from upstream's (for the finding)."""
    from ..inputs import input_rules
    from ..inputs.generate import STRICT_RULES

    out = []
    for name, rule in input_rules(run.problem, run.w).items():
        rr = getattr(rule, "rule", None)
        if rr in STRICT_RULES or rr == "causal_mask_additive":
            out.append(name)
    return out
