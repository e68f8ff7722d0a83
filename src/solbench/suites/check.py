"""Design-time checks of a suite problem (used by ``build_l1 --check`` and the suite tests).

For one workload this module builds the inputs with the problem's own
``custom_inputs_entrypoint`` (or plain ``randn`` for ``random`` inputs), runs the reference,
and checks:

* the inputs and outputs have the declared shapes and dtypes;
* no trivial candidate passes the workload's tolerance under the upstream rule
  (formats.md, "Tolerance semantics"): all zeros, a tiny constant (1e-6), the mean of the
  reference output broadcast, and each input of the output's shape passed through
  (docs/threats.md, "Trivial-candidate screen"). The upstream rule's extra
  "all-zero output fails" clause is deliberately NOT applied here, so a zeros candidate
  must fail on element matching alone;
* an honest, more precise candidate passes: the reference evaluated on inputs upcast to
  float64, its outputs cast back to the declared dtype (a tolerance that rejects this is
  too tight for any real kernel).

This is the suite's own check; :mod:`solbench.integrity.screen` is the product's screen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..spec import Problem, Tolerance, Workload, load_problem
from ..spec.dtypes import DTYPES  # noqa: F401  (dtype names, kept for symmetry with spec)

TINY_CONSTANT = 1e-6


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def upstream_match(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> tuple[bool, float]:
    """The upstream element rule: |a-b| <= atol + rtol*|b| on float32 copies (on the
    reference's device); NaN/Inf fail (except positions where both are -inf when
    ``allow_negative_inf``).

    Returns (passed, matched fraction). Shapes must already agree (ValueError otherwise).
    """
    if out.shape != ref.shape:
        raise ValueError(f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    b = ref.detach().to(torch.float32)
    a = out.detach().to(b.device, torch.float32)
    both_neg_inf = torch.isneginf(a) & torch.isneginf(b)
    if not tol.allow_negative_inf:
        both_neg_inf = torch.zeros_like(both_neg_inf)
    finite = torch.isfinite(a) & torch.isfinite(b)
    ok = finite & ((a - b).abs() <= tol.max_atol + tol.max_rtol * b.abs())
    ok = ok | both_neg_inf
    if (~torch.isfinite(a) & ~both_neg_inf).any():
        return False, float(ok.float().mean()) if ok.numel() else 1.0
    n = ok.numel()
    ratio = float(ok.float().mean()) if n else 1.0
    passed = ratio >= tol.required_matched_ratio
    if passed and tol.max_error_cap is not None and n:
        passed = float((a - b).abs()[finite].max()) <= tol.max_error_cap
    return passed, ratio


def make_workload_inputs(problem: Problem, workload: Workload, seed: int = 0,
                         device: str = "cpu") -> dict:
    """Inputs of one workload, in definition order, seeded with ``seed``.

    Custom workloads call the reference's ``custom_inputs_entrypoint(axes, device)`` with
    every resolved axis; ``random`` float inputs are randn, ``scalar`` inputs their value.
    Raises ValueError for input kinds this design-time helper does not build (safetensors).
    """
    defn = problem.definition
    env = defn.resolve_axes(workload.axes)
    torch.manual_seed(seed)
    if workload.is_custom:
        fn = getattr(problem.reference_module(), defn.custom_inputs_entrypoint)
        scalars = {k: s.value for k, s in workload.inputs.items() if hasattr(s, "value")}
        made = fn({**env, **scalars}, device)
        return {k: made[k] for k in defn.inputs}
    out = {}
    for k, spec in defn.inputs.items():
        src = workload.inputs[k]
        if src.type == "scalar":
            out[k] = src.value
        elif src.type == "random":
            shape = defn.shape_of(spec, env)
            dt = torch_dtype(spec.dtype)
            if dt.is_floating_point:
                out[k] = torch.randn(shape, device=device).to(dt)
            elif dt == torch.bool:
                out[k] = torch.rand(shape, device=device) < 0.5
            else:
                out[k] = torch.randint(0, 16, shape, device=device, dtype=dt)
        else:
            raise ValueError(f"input {k}: {src.type} inputs are not built by this check")
    return out


def as_tuple(outs) -> tuple:
    return outs if isinstance(outs, (tuple, list)) else (outs,)


def trivial_candidates(refs: dict[str, torch.Tensor], inputs: dict) -> list[tuple[str, dict]]:
    """(label, outputs) for each trivial candidate of threats.md's screen."""
    cands = []
    cands.append(("zeros", {k: torch.zeros_like(r) for k, r in refs.items()}))
    tiny = {}
    for k, r in refs.items():
        tiny[k] = torch.full_like(r, TINY_CONSTANT if r.is_floating_point() else 1)
    cands.append(("tiny_constant", tiny))
    mean = {}
    for k, r in refs.items():
        m = r.double().mean() if r.numel() else torch.tensor(0.0)
        mean[k] = torch.full_like(r, float(m) if r.is_floating_point() else round(float(m)))
    cands.append(("mean_of_reference", mean))
    for iname, x in inputs.items():
        if not isinstance(x, torch.Tensor):
            continue
        for k, r in refs.items():
            if tuple(x.shape) == tuple(r.shape):
                cands.append((f"passthrough:{iname}->{k}", {k: x.to(r.dtype)}))
    return cands


@dataclass
class CheckResult:
    """The design-time verdict on one workload of one problem."""

    problem: str
    uuid: str
    shapes_ok: bool = True
    passing_trivial: list[str] = field(default_factory=list)
    trivial_ratios: dict[str, float] = field(default_factory=dict)
    honest_ok: bool = True
    honest_ratio: float | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.shapes_ok and not self.passing_trivial and self.honest_ok and not self.errors

    def summary(self) -> str:
        worst = max(self.trivial_ratios.items(), key=lambda kv: kv[1], default=("-", 0.0))
        s = (f"{self.uuid[:8]} best-trivial={worst[0]}:{worst[1]:.3f} "
             f"honest={self.honest_ratio if self.honest_ratio is None else round(self.honest_ratio, 5)}")
        if self.passing_trivial:
            s += f" PASSING={self.passing_trivial}"
        if self.errors:
            s += f" ERRORS={self.errors}"
        return s


def check_workload(problem: Problem, workload: Workload, seed: int = 0) -> CheckResult:
    """Run the design-time checks (module docstring) on one workload, on the CPU."""
    defn = problem.definition
    res = CheckResult(problem=problem.name, uuid=workload.uuid)
    env = defn.resolve_axes(workload.axes)
    tol = workload.tolerance_or_default()
    inputs = make_workload_inputs(problem, workload, seed=seed)
    for k, spec in defn.inputs.items():
        x = inputs[k]
        want = defn.shape_of(spec, env)
        if want is None:
            continue
        if tuple(x.shape) != want or x.dtype != torch_dtype(spec.dtype):
            res.shapes_ok = False
            res.errors.append(f"input {k}: {tuple(x.shape)} {x.dtype}, declared {want} {spec.dtype}")
    run = problem.make_reference("cpu")
    args = [inputs[k] for k in defn.inputs]
    outs = as_tuple(run(*args))
    names = list(defn.outputs)
    if len(outs) != len(names):
        res.errors.append(f"reference returned {len(outs)} outputs, declared {len(names)}")
        return res
    refs = dict(zip(names, outs))
    for k, spec in defn.outputs.items():
        want = defn.shape_of(spec, env)
        r = refs[k]
        if tuple(r.shape) != want or r.dtype != torch_dtype(spec.dtype):
            res.shapes_ok = False
            res.errors.append(f"output {k}: {tuple(r.shape)} {r.dtype}, declared {want} {spec.dtype}")
        if not torch.isfinite(r.float()).all():
            res.errors.append(f"output {k}: reference has NaN/Inf")
    if not res.shapes_ok or res.errors:
        return res
    for label, cand in trivial_candidates(refs, inputs):
        all_pass = True
        ratios = []
        for k, c in cand.items():
            passed, ratio = upstream_match(c, refs[k], tol)
            all_pass &= passed
            ratios.append(ratio)
        res.trivial_ratios[label] = min(ratios)
        if all_pass:
            res.passing_trivial.append(label)
    # honest candidate: reference on float64 inputs, cast back
    up = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    hon = as_tuple(run(*up))
    ratios = []
    for k, h in zip(names, hon):
        passed, ratio = upstream_match(h.to(refs[k].dtype), refs[k], tol)
        res.honest_ok &= passed
        ratios.append(ratio)
    res.honest_ratio = min(ratios)
    return res


def check_problem_dir(path: str | Path, cpu_only: bool = True, seed: int = 0) -> list[CheckResult]:
    """check_workload over a problem's workloads (only ``cpu``-tagged ones by default)."""
    problem = load_problem(path)
    out = []
    for w in problem.workloads:
        if cpu_only and "cpu" not in (w.tags or []):
            continue
        out.append(check_workload(problem, w, seed=seed))
    return out
