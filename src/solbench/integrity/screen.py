"""The trivial-candidate screen of problems (threats.md, "Trivial-candidate screen").

For each screened workload the reference runs once on seeded inputs, then every output is
compared, with the workload's tolerance, against trivial stand-ins that do no work:

- ``zeros``: all zeros;
- ``tiny_constant``: 1e-6 everywhere (float outputs);
- ``mean``: the reference output's own mean, as a constant (float outputs);
- ``passthrough:<input>``: an input of the same shape and dtype, returned unchanged.

A stand-in bit-identical to the reference output is the answer itself (the gradient of a
residual add is the incoming gradient; the mean of a one-element output is that element): it
is recorded in ``details["structural"]`` as a free output, not counted as degenerate, and
the ``mean`` stand-in is not used for one-element outputs.

Each comparison is made in two modes by :func:`solbench.harness.correctness.check_outputs`:
``upstream`` (the SOL-ExecBench tolerance rule alone: ``report.upstream_passed``) and
``solbench`` (the full check with the scale-invariant tests: ``report.passed``). A problem is
**degenerate** when any trivial stand-in passes the upstream tolerance on any screened
workload: that is a hole in the problem (its inputs or tolerance), whatever solbench's own
checks catch. Stand-ins are checked per output, because a candidate may fake one output (a
log-sum-exp, a mask) and compute the rest.

Separately, for problems with float32 / float64 outputs, the reference is re-run with its
float32/float64 inputs cast to bfloat16 and to float16 (outputs cast back to the declared
dtype) and compared with the full-precision reference under the upstream tolerance. When a
reduced-precision run passes on every screened workload, the tolerance **admits a precision
downgrade** (reported apart from degeneracy): those problems need the harness's precision
check most.

Separately, for each workload whose input rules give stress rounds (docs/inputs.md,
"Rounds"), the reference runs on each stress input set and is judged as the harness judges
it before a stress round (``harness.Oracle.stress_reference_issue``: NaN/Inf in a
float output, an exception, or a miss of its own fp64 truth by the workload's tolerance).
Such a round does not apply when candidates are evaluated (advisory
``stress_reference_failed``): the audit lists it per workload in
``stress_reference_failed``, since every candidate of the problem goes unjudged there. The
stress inputs are those ``solbench evaluate --seed SEED`` draws for the workload when every
workload is evaluated (``inputs.seeds.derived_seed`` of the workload's index and the
round's input-set index).

Inputs come from :func:`solbench.inputs.make_inputs` (seeded), the reference from
``problem.make_reference(device)``. Workloads whose inputs or reference cannot run on the
chosen device (CUDA-only code, missing safetensors blobs, Triton) are skipped, each with the
reason recorded.
"""

from __future__ import annotations

import math
import time
from typing import Any, Iterable

import torch
from pydantic import BaseModel, ConfigDict, Field

from ..errors import MissingBlobError, SolbenchError
from ..spec.dtypes import to_torch
from ..spec.problem import Problem
from ..spec.workload import Workload

TINY_CONSTANT = 1e-6
DOWNGRADE_DTYPES = ("bfloat16", "float16")
#: workloads with more declared bytes than this are not screened on CPU by default
DEFAULT_MAX_BYTES_CPU = 1 << 30


class TrivialPass(BaseModel):
    """One trivial stand-in that passed one mode on one workload."""

    model_config = ConfigDict(extra="forbid")

    candidate: str
    workload: str
    output: str
    mode: str  # "upstream" | "solbench"


class ScreenResult(BaseModel):
    """Verdict of the screen for one problem.

    Attributes:
        degenerate: a trivial stand-in passes the upstream tolerance on some workload.
        passing_trivial: every (stand-in, workload, output, mode) that passed.
        admits_downgrade: the reference run in bf16 or fp16 passes the upstream tolerance
            on every screened workload of an fp32/fp64 problem.
        details: per-workload figures: for each stand-in and output the upstream and
            solbench verdicts, the failed check and the error figures; the downgrade runs;
            skipped workloads with reasons.
    """

    model_config = ConfigDict(extra="forbid")

    problem: str
    device: str
    degenerate: bool
    passing_trivial: list[TrivialPass] = Field(default_factory=list)
    admits_downgrade: bool
    downgrade_dtypes: list[str] = Field(default_factory=list)
    screened_workloads: list[str] = Field(default_factory=list)
    skipped: list[dict[str, str]] = Field(default_factory=list)
    #: stress rounds the problem's own reference fails: workload, round (input-set index),
    #: label (``stress:<op class>``), reason
    stress_reference_failed: list[dict[str, Any]] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def reasons(self) -> list[str]:
        """One line per distinct (stand-in, output) passing upstream, for reports."""
        seen = []
        for p in self.passing_trivial:
            if p.mode == "upstream":
                line = f"{p.candidate} passes for output {p.output!r}"
                if line not in seen:
                    seen.append(line)
        return seen

    def to_json(self) -> dict[str, Any]:
        """The `solbench audit --json` object (strict JSON: non-finite floats -> null)."""
        return _finite(self.model_dump(mode="json"))


def screen_problem(
    problem: Problem,
    device: str = "cpu",
    workloads: Iterable[Workload | str] | None = None,
    max_workloads: int | None = None,
    *,
    seed: int = 0,
    cpu_tagged_only: bool = False,
    max_bytes: int | None = None,
    downgrade: bool = True,
    stress: bool = True,
) -> ScreenResult:
    """Screen ``problem`` with trivial stand-ins and the reduced-precision reference.

    Args:
        problem: a loaded problem (definition dir or KernelBench file).
        device: "cpu" or "cuda" (inputs, reference and stand-ins all live there).
        workloads: workloads (objects or uuids / uuid prefixes) to screen; None = all.
        max_workloads: screen at most this many, smallest first (declared bytes).
        seed: input seed (one round per workload).
        cpu_tagged_only: keep only workloads tagged "cpu" (when any is so tagged).
        max_bytes: skip workloads with more declared input+output bytes than this
            (default: 1 GiB on CPU, no limit on CUDA); skipped ones are recorded.
        downgrade: also run the bf16/fp16 reference (the "admits downgrade" finding).
        stress: also judge the reference on each stress round's inputs (the
            ``stress_reference_failed`` list; module doc).

    Returns:
        a :class:`ScreenResult`. Never raises for a workload that cannot run (it is
        recorded in ``skipped``); raises :class:`SolbenchError` only when the problem itself
        is unusable (e.g. its reference cannot be imported).
    """
    from ..harness.correctness import check_outputs  # harness stage (architecture.md)

    chosen = _choose(problem, workloads, max_workloads, cpu_tagged_only)
    if max_bytes is None and torch.device(device).type == "cpu":
        max_bytes = DEFAULT_MAX_BYTES_CPU
    skipped: list[dict[str, str]] = []
    details: dict[str, Any] = {"workloads": {}}
    passing: list[TrivialPass] = []
    downgrade_runs: dict[str, list[bool]] = {d: [] for d in DOWNGRADE_DTYPES}
    screened: list[str] = []
    structural: list[dict[str, str]] = []
    stress_failed: list[dict[str, Any]] = []

    try:
        reference = problem.make_reference(device)
    except SolbenchError:
        raise
    except Exception as e:  # noqa: BLE001 - an unusable reference is reported, not raised
        return ScreenResult(
            problem=problem.name, device=device, degenerate=False, admits_downgrade=False,
            skipped=[{"workload": w.uuid, "reason": f"reference unusable: {_short(e)}"} for w in chosen],
            details=details,
        )

    out_names = list(problem.definition.outputs)
    for w in chosen:
        if max_bytes is not None:
            nbytes = problem.workload_bytes(w)
            if nbytes > max_bytes:
                skipped.append({"workload": w.uuid, "reason": f"{nbytes} declared bytes > {max_bytes}"})
                continue
        t0 = time.perf_counter()
        try:
            inputs = _make_inputs(problem, w, seed, device)
        except MissingBlobError as e:
            skipped.append({"workload": w.uuid, "reason": f"missing blob: {_short(e)}"})
            continue
        except Exception as e:  # noqa: BLE001
            skipped.append({"workload": w.uuid, "reason": f"inputs: {_short(e)}"})
            continue
        try:
            refs = _as_list(_call(reference, inputs))
        except Exception as e:  # noqa: BLE001
            skipped.append({"workload": w.uuid, "reason": f"reference failed on {device}: {_short(e)}"})
            continue
        if len(refs) != len(out_names):
            skipped.append({"workload": w.uuid,
                            "reason": f"reference returned {len(refs)} outputs, definition declares {len(out_names)}"})
            continue
        tol = w.tolerance_or_default()
        wd: dict[str, Any] = {"axes": dict(w.axes), "tolerance": tol.model_dump(), "trivial": [],
                              "downgrade": []}
        for name, ref in zip(out_names, refs):
            for cand_name, value in _stand_ins(name, ref, inputs):
                rep = check_outputs([value], [ref], tol, names=[name])
                up = bool(rep.upstream_passed)
                full = bool(rep.passed)
                exact = _bit_equal(value, ref)
                wd["trivial"].append({
                    "candidate": cand_name, "output": name, "upstream_passed": up,
                    "passed": full, "exact": exact, "failed_check": rep.failed_check,
                    "figures": _figs(rep.figures),
                })
                if exact:
                    # the stand-in IS the answer (e.g. the gradient of a residual add is the
                    # incoming gradient): a free output, not a tolerance hole
                    structural.append({"candidate": cand_name, "workload": w.uuid, "output": name})
                    continue
                if up:
                    passing.append(TrivialPass(candidate=cand_name, workload=w.uuid, output=name, mode="upstream"))
                if full:
                    passing.append(TrivialPass(candidate=cand_name, workload=w.uuid, output=name, mode="solbench"))
        if downgrade and _full_precision_outputs(problem):
            for dname in DOWNGRADE_DTYPES:
                rec = _downgrade_run(reference, inputs, refs, out_names, problem, tol, dname, check_outputs)
                wd["downgrade"].append(rec)
                if rec.get("error") is None:
                    downgrade_runs[dname].append(bool(rec["upstream_passed"]))
        if stress:
            wd["stress"] = _stress_reference(problem, w, seed, device, tol)
            stress_failed += [{"workload": w.uuid, **{k: r[k] for k in ("round", "label", "reason")}}
                              for r in wd["stress"] if r["reference_failed"]]
        wd["seconds"] = round(time.perf_counter() - t0, 3)
        details["workloads"][w.uuid] = wd
        screened.append(w.uuid)
        del inputs, refs

    admitted = [d for d, runs in downgrade_runs.items() if runs and all(runs)]
    details["skipped"] = skipped
    details["structural"] = structural
    return ScreenResult(
        problem=problem.name,
        device=device,
        degenerate=any(p.mode == "upstream" for p in passing),
        passing_trivial=passing,
        admits_downgrade=bool(admitted),
        downgrade_dtypes=admitted,
        screened_workloads=screened,
        skipped=skipped,
        stress_reference_failed=stress_failed,
        details=details,
    )


def _stress_reference(problem: Problem, w: Workload, seed: int, device: str, tol) -> list[dict[str, Any]]:
    """The reference judged on each stress round of ``w`` (module doc): one dict per round
    with ``round``, ``label``, ``profile``, ``reference_failed`` and ``reason`` (None when it
    holds). Raises nothing: inputs that cannot be made are a failed round with the reason."""
    from ..harness import Oracle
    from ..inputs.rounds import round_plan
    from ..inputs.seeds import derived_seed

    try:
        plan = [r for r in round_plan(1, problem, w) if r.profile.startswith("stress")]
    except Exception as e:  # noqa: BLE001 - bad input rules: the problem's own error
        return [{"round": None, "label": "stress", "profile": "stress", "reference_failed": True,
                 "reason": f"input rules: {_short(e)}"}]
    j = next((i for i, x in enumerate(problem.workloads) if x.uuid == w.uuid), 0)
    oracle = Oracle(problem, device)
    out = []
    for spec in plan:
        why = None
        try:
            values = spec.generate(problem, w, derived_seed(seed, j, spec.index), device, profile=spec.profile)
        except Exception as e:  # noqa: BLE001
            why = f"inputs: {_short(e)}"
        else:
            try:
                ref_out = oracle.run(values)
            except Exception as e:  # noqa: BLE001 - what the harness records too
                why = f"the reference raised {type(e).__name__}: {_short(e)}"
            else:
                why = oracle.stress_reference_issue(ref_out, values, tol)
        out.append({"round": spec.index, "label": spec.label, "profile": spec.profile,
                    "reference_failed": why is not None, "reason": why})
    return out


# --------------------------------------------------------------------------------------


def _choose(problem: Problem, workloads, max_workloads, cpu_tagged_only) -> list[Workload]:
    if workloads is None:
        chosen = list(problem.workloads)
    else:
        chosen = [w if isinstance(w, Workload) else problem.workload(w) for w in workloads]
    if cpu_tagged_only:
        tagged = [w for w in chosen if "cpu" in (w.tags or [])]
        chosen = tagged or chosen
    if max_workloads is not None:
        ids = {id(w) for w in chosen}
        ranked = [w for w in sorted(problem.workloads, key=problem.workload_bytes) if id(w) in ids]
        chosen = ranked[:max_workloads]
    return chosen


def _make_inputs(problem: Problem, w: Workload, seed: int, device: str) -> dict[str, Any]:
    from ..inputs import make_inputs

    return make_inputs(problem, w, seed, device)


def _call(reference, inputs: dict[str, Any]):
    with torch.no_grad():
        return reference(*inputs.values())


def _as_list(out) -> list[torch.Tensor]:
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    return [x if isinstance(x, torch.Tensor) else torch.as_tensor(x) for x in items]


def _is_float(t: torch.Tensor) -> bool:
    return t.dtype.is_floating_point and t.element_size() >= 2


def _stand_ins(name: str, ref: torch.Tensor, inputs: dict[str, Any]):
    """(candidate name, tensor) pairs of trivial stand-ins for output ``name``."""
    yield "zeros", torch.zeros_like(ref)
    if _is_float(ref):
        yield "tiny_constant", torch.full_like(ref, TINY_CONSTANT)
        finite = ref[torch.isfinite(ref)]
        if ref.numel() > 1:  # the mean of one element is the element itself
            m = float(finite.double().mean()) if finite.numel() else 0.0
            yield "mean", torch.full_like(ref, m)
    for iname, x in inputs.items():
        if isinstance(x, torch.Tensor) and x.shape == ref.shape and x.dtype == ref.dtype:
            yield f"passthrough:{iname}", x.clone()


def _bit_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    try:
        return bool(torch.equal(a, b))
    except RuntimeError:  # dtypes without eq kernels (fp8/fp4): compare bytes
        return bool(torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))


def _full_precision_outputs(problem: Problem) -> bool:
    return any(
        s.dtype in ("float32", "float64") for s in problem.definition.outputs.values()
    )


def _downgrade_run(reference, inputs, refs, out_names, problem, tol, dname, check_outputs) -> dict:
    low = to_torch(dname)
    cast_inputs = {
        k: (v.to(low) if isinstance(v, torch.Tensor) and v.dtype in (torch.float32, torch.float64) else v)
        for k, v in inputs.items()
    }
    rec: dict[str, Any] = {"dtype": dname, "error": None}
    try:
        fn = reference
        if isinstance(reference, torch.nn.Module):  # KernelBench: parameters in low precision too
            import copy

            fn = copy.deepcopy(reference).to(low)
        outs = _as_list(_call(fn, cast_inputs))
    except Exception as e:  # noqa: BLE001 - ops without bf16/fp16 kernels on this device
        rec["error"] = _short(e)
        return rec
    if len(outs) != len(refs):
        rec["error"] = f"{len(outs)} outputs"
        return rec
    outs = [o.to(r.dtype) if o.dtype != r.dtype else o for o, r in zip(outs, refs)]
    rep = check_outputs(outs, refs, tol, names=out_names)
    rec.update(upstream_passed=bool(rep.upstream_passed), passed=bool(rep.passed),
               failed_check=rep.failed_check, figures=_figs(rep.figures))
    return rec


def _figs(figures: Any) -> Any:
    if hasattr(figures, "model_dump"):
        figures = figures.model_dump(mode="json")
    return _finite(figures)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, torch.Tensor) and obj.numel() == 1:
        return _finite(obj.item())
    return obj


def _short(e: BaseException, n: int = 240) -> str:
    s = f"{type(e).__name__}: {e}".replace("\n", " ")
    return s if len(s) <= n else s[: n - 3] + "..."
