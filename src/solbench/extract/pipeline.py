"""``solbench extract``: a model -> checked SOL-ExecBench problem directories.

For each region (:mod:`.capture`) the pipeline exports a reference (:mod:`.codegen`), writes
its definition and workloads into a staging directory, checks it (:func:`check_problem`), and
only then moves it into the output directory. Regions whose problem is identical (same
reference, inputs, outputs and workloads: the layers of a stack) are written once, with the
count and every module path in ``extract.json``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import uuid as uuidlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..spec.workload import Tolerance
from .capture import PROBES, Region, capture, dynamic_dims, find_regions
from .codegen import Extracted, RegionError, Tensor, build_reference, dtype_name, export_region, reference_source
from .sources import ModelSource

#: (max_atol, max_rtol) per output dtype, loosest output wins. float32 is tight enough that a
#: bf16 or tf32 shortcut fails it at the model's sizes; the half types follow the
#: SOL-ExecBench problems taken from the same kinds of layers (1e-2 .. 5e-2 relative)
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7), "float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2),
}
#: the sweep around the model's real size: each varying axis scaled by these factors in turn
SWEEP = (0.25, 0.5, 2.0)
_NS = uuidlib.UUID("6b1d0f5e-8c1e-4f0a-9d38-3c2f2f7f3a10")


@dataclass
class RegionResult:
    """What became of one distinct region.

    ``status``: ``written`` (checked, in ``problem_dir``) or ``failed`` (``reason`` says which
    step and why). ``paths``: every module path that gave this problem (``count`` of them).
    """

    kind: str
    cls: str
    paths: list[str]
    status: str
    reason: str | None = None
    name: str | None = None
    problem_dir: str | None = None
    checks: dict[str, Any] = field(default_factory=dict)
    backward: bool = False

    @property
    def count(self) -> int:
        return len(self.paths)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "class": self.cls, "backward": self.backward,
                "count": self.count, "paths": self.paths, "status": self.status, "reason": self.reason,
                "problem_dir": self.problem_dir, "checks": self.checks}


def tolerance_for(outputs: list[Tensor]) -> Tolerance:
    """The workload tolerance for these outputs (:data:`TOLERANCES`; exact for integers)."""
    tols = [TOLERANCES[dtype_name(o.value.dtype)] for o in outputs
            if o.value.is_floating_point() and dtype_name(o.value.dtype) in TOLERANCES]
    if not tols:
        return Tolerance(max_atol=0.0, max_rtol=0.0, required_matched_ratio=1.0)
    return Tolerance(max_atol=max(a for a, _ in tols), max_rtol=max(r for _, r in tols))


def _snake(s: str) -> str:
    """``LlamaRMSNorm`` -> ``llama_rms_norm``, ``ViTEmbeddings`` -> ``vit_embeddings``."""
    s = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z]{2})", "_", s)
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z]{2})", "_", s)
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z][a-z])", "_", s).lower()


def _named_dim(ex: Extracted, t: Tensor, dim: int, default: str) -> str:
    """Axis name of ``t``'s dimension ``dim``, naming a literal one ``default`` (a const axis)."""
    d = t.shape[dim]
    if isinstance(d, str):
        return d
    name = default
    if name in ex.axes and ex.axes[name].get("value") != d:
        name = f"{default}_{d}"
    ex.axes.setdefault(name, {"type": "const", "value": int(d)})
    t.shape[dim] = name
    return name


def assign_roles(ex: Extracted, kind: str, has_seq_axis: bool) -> bool:
    """Input roles (docs/inputs.md, rule 0) for every input; True when the problem needs a custom
    input generator (embedding-bag offsets, which must be ascending).

    Parameters of rank >= 2 are ``scaled`` (randn / sqrt(fan-in)); 1-D parameters of a norm are
    U(0.5, 1.5) (a kernel ignoring them fails), other 1-D parameters ``scaled``. An integer input
    indexes the first parameter whose leading dimension exceeds every value it held
    (``index:<that axis>``); else, with a sequence axis and values below it, ``index:seq_len``
    (positions); else its own range axis. Offsets (name ``offsets``) get a custom generator.

    Raises:
        RegionError: an integer input holding negative values.
    """
    custom = False
    for t in ex.inputs:
        v = t.value
        if v.is_floating_point():
            if t.kind == "parameter" and v.dim() >= 2:
                t.role = "scaled"
            elif t.kind == "parameter":
                t.role = "uniform:0.5:1.5" if (kind == "norm" or "norm" in t.name) and t.name.endswith("weight") \
                    else "scaled"
            continue
        if v.dtype == torch.bool:
            t.role = "mask"
            continue
        if "offset" in t.name:
            custom = True
            t.role = "offsets"
            continue
        lo, hi = (int(v.min()), int(v.max())) if v.numel() else (0, 0)
        if lo < 0:
            raise RegionError(f"integer input {t.name} holds negative values ({lo}); its range is unknown")
        table = next((p for p in ex.inputs if p.kind == "parameter" and p.value.dim() >= 2
                      and p.value.shape[0] > hi), None) if kind in ("embedding", "experts", "moe") else None
        if has_seq_axis and "seq_len" in ex.axes and "position" in t.name:
            t.role = "index:seq_len"
        elif table is not None:
            t.role = "index:" + _named_dim(ex, table, 0, "num_embeddings" if kind == "embedding" else f"{table.name}_rows")
        elif has_seq_axis and "seq_len" in ex.axes and hi < PROBES[0][1]:
            t.role = "index:seq_len"
        else:
            name = f"{t.name}_range"
            ex.axes[name] = {"type": "const", "value": hi + 1}
            t.role = f"index:{name}"
    return custom


def _shape_code(shape: list[str | int]) -> str:
    parts = [f"values[{d!r}]" if isinstance(d, str) else str(d) for d in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def custom_generator(ex: Extracted, inputs: list[Tensor]) -> list[str]:
    """Source of ``make_inputs(values, device)``: every input drawn by its role; offsets of an
    embedding bag as ``arange(bags) * (indices // bags)`` (equal pooling per bag)."""
    lines = ["def make_inputs(values, device):", "    out = {}"]
    index_input = next((t for t in inputs if t.role and t.role.startswith("index:")), None)
    for t in inputs:
        shape = _shape_code(t.shape)
        dt = f"torch.{str(t.value.dtype).split('.')[-1]}"
        role = t.role or ""
        if role.startswith("index:"):
            lines.append(f"    out[{t.name!r}] = torch.randint(0, values[{role[6:]!r}], {shape}, device=device)"
                         f".to({dt})")
        elif role == "offsets":
            if index_input is None:
                raise RegionError(f"offsets input {t.name} without an index input")
            n = " * ".join(f"values[{d!r}]" if isinstance(d, str) else str(d) for d in index_input.shape) or "1"
            bags = f"values[{t.shape[0]!r}]" if isinstance(t.shape[0], str) else str(t.shape[0])
            lines.append(f"    out[{t.name!r}] = (torch.arange({bags}, device=device) * (({n}) // {bags})).to({dt})")
        elif role == "scaled":
            lines.append(f"    out[{t.name!r}] = (torch.randn({shape}, device=device) / "
                         f"math.sqrt({shape}[-1])).to({dt})")
        elif role.startswith("uniform:"):
            lo, hi = (float(x) for x in role.split(":")[1:])
            lines.append(f"    out[{t.name!r}] = (torch.rand({shape}, device=device) * {hi - lo!r} + {lo!r}).to({dt})")
        elif role == "mask":
            lines.append(f"    out[{t.name!r}] = torch.randint(0, 2, {shape}, device=device).bool()")
        else:
            lines.append(f"    out[{t.name!r}] = torch.randn({shape}, device=device).to({dt})")
    lines.append("    return out")
    return lines


def workloads_for(axes: dict[str, dict[str, Any]], source: ModelSource, tol: Tolerance, inputs: list[str],
                  custom: bool) -> list[dict[str, Any]]:
    """The CPU-sized probe workload (tagged ``cpu``), the model's real size, then each varying
    axis scaled by :data:`SWEEP` (at least 1), without repeats."""
    var = [a for a, spec in axes.items() if spec["type"] == "var"]
    b0, s0 = PROBES[0] if source.probe else (source.fixed_batch or 1, 1)
    probe = {"batch_size": b0, "seq_len": s0, "num_tokens": b0 * s0}
    rb = source.real.get("batch_size", b0)
    rs = source.real.get("seq_len", s0)
    real = {"batch_size": rb, "seq_len": rs, "num_tokens": rb * rs}
    rows = [({a: probe[a] for a in var}, ["cpu", "probe"]), ({a: real[a] for a in var}, ["real"])]
    for a in var:
        for f in SWEEP:
            vals = {x: real[x] for x in var}
            vals[a] = max(1, int(round(real[a] * f)))
            rows.append((vals, ["sweep"]))
    out, seen = [], set()
    src = {"type": "custom"} if custom else {"type": "random"}
    for vals, tags in rows:
        key = json.dumps(vals, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        out.append({"uuid": "", "axes": vals, "inputs": {n: dict(src) for n in inputs},
                    "tolerance": tol.model_dump(exclude_none=True), "tags": tags})
    return out


def _definition(name: str, kind: str, ex: Extracted, inputs: list[Tensor], outputs: list[Tensor],
                reference: str, description: str, custom: bool, hf_id: str | None, backward: bool) -> dict[str, Any]:
    roles = {t.name: t.role for t in inputs if t.role and t.role != "offsets"}
    d: dict[str, Any] = {
        "name": name, "op_type": "backward" if backward else kind, "description": description,
        "tags": ["extracted", kind, "backward" if backward else "forward"],
        "axes": ex.axes,
        "inputs": {t.name: {"shape": t.shape, "dtype": dtype_name(t.value.dtype), "description": t.origin}
                   for t in inputs},
        "outputs": {t.name: {"shape": t.shape, "dtype": dtype_name(t.value.dtype), "description": t.origin}
                    for t in outputs},
        "reference": reference,
    }
    if hf_id:
        d["hf_id"] = hf_id
    if custom:
        d["custom_inputs_entrypoint"] = "make_inputs"
    elif roles:
        d["input_roles"] = roles
    return d


def _backward_signature(region: Region, ex: Extracted) -> tuple[list[Tensor], list[Tensor]]:
    """Inputs (the forward's, then ``grad_<output>`` for each output) and outputs (``grad_<input>``
    for each floating-point input, weights included, as the module's own autograd gives them
    at the first probe with seeded random output gradients).

    Raises:
        RegionError: integer outputs, or no floating-point input.
    """
    if any(not o.value.is_floating_point() for o in ex.outputs):
        raise RegionError("no backward: the region has integer outputs")
    wrt = [t for t in ex.inputs if t.value.is_floating_point()]
    if not wrt:
        raise RegionError("no backward: no floating-point input")
    g = torch.Generator().manual_seed(7)
    grads = [Tensor(f"grad_{o.name}", "activation", torch.randn(o.value.shape, generator=g).to(o.value.dtype),
                    list(o.shape), f"gradient of {o.name}") for o in ex.outputs]
    module_grads = _module_grads(region, ex, grads)
    outs = [Tensor(f"grad_{t.name}", "output", gv, list(t.shape), f"gradient of {t.name}")
            for t, gv in zip(wrt, module_grads)]
    return ex.inputs + grads, outs


def _module_grads(region: Region, ex: Extracted, grads: list[Tensor]) -> list[torch.Tensor]:
    """The region module's own gradients at the probe (autograd through the module itself)."""
    call = region.calls[0]
    wrt = [t for t in ex.inputs if t.value.is_floating_point()]
    from torch.utils import _pytree as pytree

    act_vals = {t.origin[len("argument "):]: t for t in ex.inputs if t.kind == "activation"}
    params = dict(region.module.named_parameters())
    with torch.enable_grad():
        leaves = []
        req: dict[str, torch.Tensor] = {}
        for leaf in call.leaves:
            v = leaf.value
            if leaf.is_tensor and leaf.name in act_vals and v.is_floating_point():
                v = v.detach().clone().requires_grad_(True)
                req[act_vals[leaf.name].name] = v
            leaves.append(v)
        for t in wrt:
            if t.kind == "parameter":
                req[t.name] = params[t.origin[len("parameter "):]]
        args, kwargs = pytree.tree_unflatten(leaves, call.spec)
        out = region.module(*args, **kwargs)
        outs = [v for v in pytree.tree_leaves(out) if isinstance(v, torch.Tensor)]
        tens = [req[t.name] for t in wrt]
        got = torch.autograd.grad(outs, tens, [g.value for g in grads], allow_unused=True)
    return [torch.zeros_like(t) if g is None else g.detach().clone() for g, t in zip(got, tens)]


def check_problem(pdir: Path, inputs: list[Tensor], outputs: list[Tensor], hardware: str) -> dict[str, Any]:
    """The checks every extracted problem passes before it is written (docs/extract.md):

    1. ``load``: it loads and validates (:func:`solbench.spec.load_problem`);
    2. ``deterministic``: its reference runs on the CPU at the ``cpu`` workload, twice, with
       bit-identical outputs of the declared shapes;
    3. ``screen``: the degenerate-output screen (``solbench audit``) finds no trivial stand-in
       passing on the ``cpu`` workload;
    4. ``sol``: the SOL count succeeds for every workload (T_SOL on ``hardware``);
    5. ``reproduces``: the reference, given the values the module saw (activations, its own
       weights), gives the module's own outputs within the workload tolerance.

    Returns the figures of each check. Raises RegionError naming the first check that fails.
    """
    from ..errors import SolbenchError
    from ..harness.correctness import check_outputs
    from ..inputs import make_inputs
    from ..integrity.screen import screen_problem
    from ..sol import bound
    from ..spec import load_problem

    checks: dict[str, Any] = {}
    try:
        prob = load_problem(pdir)
    except SolbenchError as e:
        raise RegionError(f"validate: {e}") from None
    checks["load"] = "ok"
    cpu_w = next(w for w in prob.workloads if "cpu" in (w.tags or []))
    ref = prob.make_reference("cpu")
    try:
        vals = make_inputs(prob, cpu_w, 0, "cpu")
        a = ref(*vals.values())
        b = ref(*vals.values())
    except Exception as e:  # noqa: BLE001
        raise RegionError(f"reference on the CPU: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    a = list(a) if isinstance(a, (tuple, list)) else [a]
    b = list(b) if isinstance(b, (tuple, list)) else [b]
    env = prob.definition.resolve_axes(cpu_w.axes)
    for name, x, y in zip(prob.definition.outputs, a, b):
        want = prob.definition.shape_of(prob.definition.outputs[name], env)
        if tuple(x.shape) != want:
            raise RegionError(f"reference output {name} has shape {tuple(x.shape)}, declared {want}")
        if not torch.equal(torch.nan_to_num(x), torch.nan_to_num(y)):
            raise RegionError(f"reference is not deterministic on the CPU (output {name} differs between two runs)")
    checks["deterministic"] = "ok"
    scr = screen_problem(prob, "cpu", workloads=[cpu_w], downgrade=False, stress=False)
    if scr.skipped or not scr.screened_workloads:
        raise RegionError(f"screen: the cpu workload was not screened: {scr.skipped}")
    if scr.degenerate:
        raise RegionError(f"screen: degenerate: {'; '.join(scr.reasons)}")
    checks["screen"] = "ok"
    sol = []
    for w in prob.workloads:
        try:
            bd = bound(prob, w, hardware)
        except Exception as e:  # noqa: BLE001
            raise RegionError(f"SOL count failed for workload {w.axes}: {type(e).__name__}: {e}") from None
        sol.append({"axes": dict(w.axes), "sol_ms": bd.sol_ms, "bottleneck": bd.bottleneck,
                    "unknown_ops": bd.unknown_ops})
    checks["sol"] = {"hardware": hardware, "workloads": sol}
    got = ref(*[t.value for t in inputs])
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    rep = check_outputs(got, [o.value for o in outputs], cpu_w.tolerance_or_default(), names=[o.name for o in outputs])
    if not rep.passed:
        raise RegionError(f"reproduces: the reference differs from the module's own output "
                          f"({rep.failed_check}: {rep.status})")
    errs = [float((g.double() - o.value.double()).abs().max()) if g.numel() else 0.0
            for g, o in zip(got, outputs)]
    checks["reproduces"] = {"max_abs_error": max(errs) if errs else 0.0}
    return checks


def _problem(region: Region, source: ModelSource, backward: bool) -> tuple[dict, list[dict], list[Tensor], list[Tensor], str]:
    if not region.calls:
        raise RegionError("never called in the model's forward")
    dyn = dynamic_dims(source, region)
    bad = sorted({a for d in dyn for a in d.values() if a.startswith("dyn")})
    if bad:
        raise RegionError("a dimension varies with the inputs but is neither batch, sequence nor tokens")
    ep = export_region(region, dyn)
    ex = build_reference(region, ep, dyn, source.names)
    custom = assign_roles(ex, region.kind, source.has_seq)
    inputs, outputs = ex.inputs, ex.outputs
    if backward:
        inputs, outputs = _backward_signature(region, ex)
    if custom:
        ex.custom_lines = custom_generator(ex, inputs)
    what = f"{'backward of ' if backward else ''}{region.kind} region ({region.cls})"
    ref = reference_source(ex, f"Extracted by solbench extract: {what}. Functional ATen from torch.export; "
                               "weights are inputs.", backward=backward)
    tol = tolerance_for(outputs)
    wls = workloads_for(ex.axes, source, tol, [t.name for t in inputs], custom)
    defn = _definition("", region.kind, ex, inputs, outputs, ref, "", custom, source.hf_id, backward)
    return defn, wls, inputs, outputs, what


def _key(defn: dict, wls: list[dict]) -> str:
    d = {k: v for k, v in defn.items() if k not in ("name", "description")}
    return hashlib.sha256(json.dumps([d, [w["axes"] for w in wls]], sort_keys=True).encode()).hexdigest()


@dataclass
class ExtractReport:
    """Every distinct region found: written problems and failures with reasons."""

    model: str
    out_dir: str
    results: list[RegionResult]

    @property
    def written(self) -> list[RegionResult]:
        return [r for r in self.results if r.status == "written"]

    @property
    def failed(self) -> list[RegionResult]:
        return [r for r in self.results if r.status == "failed"]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "out_dir": self.out_dir, "results": [r.to_json() for r in self.results]}


def extract(source: ModelSource, out_dir: Path, *, backward: bool = False, kinds: set[str] | None = None,
            hardware: str = "H200") -> ExtractReport:
    """Extract, check and write the problems of ``source`` into ``out_dir``.

    Args:
        source: the model (:func:`~solbench.extract.sources.load_source`).
        out_dir: created if missing; one directory per written problem, plus
            ``extract_report.json``.
        backward: also extract each region's backward problem.
        kinds: keep only regions of these kinds (None: all of :data:`~.capture.RULES`).
        hardware: the GPU spec the SOL check prices.

    Returns:
        the report; failing regions are in it with their reason, never written.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = out_dir / ".staging"
    regions = [r for r in find_regions(source.module) if kinds is None or r.kind in kinds]
    capture(source, regions)
    distinct: dict[str, RegionResult] = {}
    failed_by_key: dict[tuple, RegionResult] = {}
    results: list[RegionResult] = []
    n = 0
    for region in regions:
        for bw in ([False, True] if backward else [False]):
            try:
                defn, wls, inputs, outputs, what = _problem(region, source, bw)
            except RegionError as e:
                fkey = (region.cls, str(e), bw)
                if fkey in failed_by_key:
                    failed_by_key[fkey].paths.append(region.path)
                    continue
                res = RegionResult(region.kind, region.cls, [region.path], "failed", str(e), backward=bw)
                failed_by_key[fkey] = res
                results.append(res)
                continue
            key = _key(defn, wls)
            if key in distinct:
                distinct[key].paths.append(region.path)
                continue
            n += 1
            name = f"{n:03d}_{region.kind}_{_snake(region.cls)}{'_backward' if bw else ''}"
            defn["name"] = name
            defn["description"] = (f"{what[0].upper()}{what[1:]} extracted from {source.label} at "
                                   f"{region.path}; see extract.json for every module path it occurs at.")
            for w in wls:
                w["uuid"] = str(uuidlib.uuid5(_NS, f"{name}:{json.dumps(w['axes'], sort_keys=True)}"))
            res = RegionResult(region.kind, region.cls, [region.path], "failed", name=name, backward=bw)
            distinct[key] = res
            results.append(res)
            pdir = staging / name
            if pdir.exists():
                shutil.rmtree(pdir)
            pdir.mkdir(parents=True)
            (pdir / "definition.json").write_text(json.dumps(defn, indent=2) + "\n")
            (pdir / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in wls))
            try:
                res.checks = check_problem(pdir, inputs, outputs, hardware)
            except RegionError as e:
                res.reason = str(e)
                shutil.rmtree(pdir, ignore_errors=True)
                continue
            res.status = "written"
            final = out_dir / name
            if final.exists():
                shutil.rmtree(final)
            shutil.move(str(pdir), str(final))
            res.problem_dir = str(final)
    shutil.rmtree(staging, ignore_errors=True)
    for res in results:
        if res.status == "written":
            meta = {"model": source.label, "kind": res.kind, "class": res.cls, "count": res.count,
                    "paths": res.paths, "backward": res.backward, "probes": list(PROBES) if source.probe else None,
                    "real_sizes": source.real, "checks": res.checks}
            (Path(res.problem_dir) / "extract.json").write_text(json.dumps(meta, indent=2) + "\n")
    report = ExtractReport(source.label, str(out_dir), results)
    (out_dir / "extract_report.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return report


__all__ = ["extract", "ExtractReport", "RegionResult", "check_problem", "tolerance_for", "TOLERANCES", "SWEEP"]
