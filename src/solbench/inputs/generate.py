"""Input generation for one workload (trusted side: runs in the parent, never the worker).

Random defaults follow upstream SOL-ExecBench where it is sound (formats.md): floats are
``randn``; fp8 is ``randn`` clamped to +-2 then cast; packed fp4 is uniform random e2m1
nibbles (every code is a finite e2m1 value); bool is 0/1; ints are drawn from [-1024, 1024)
(upstream) unless the definition declares a role. Roles (``Definition.input_roles``, a solbench
extension) take precedence over upstream's name guessing:

- ``index:<axis>`` ints in [0, axis value); ``positive`` |randn| + 0.1; ``unit_interval``
  U(0, 1); ``ones`` all ones; ``mask`` 0/1; ``uniform:<lo>:<hi>`` U(lo, hi);
  ``scaled`` randn / sqrt(last dim).

Name guessing (upstream behaviour, kept for SOL-ExecBench problems): 1-D ``*norm*weight``
-> 1 + 0.1 randn (upstream uses ones; the noise keeps a candidate that ignores the weight
from passing), ``*mask*`` -> 0/1, 2-D ``*_weight`` -> randn / sqrt(last dim), names with
``std``/``var`` -> positive.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import torch

from ..errors import MissingBlobError, SpecError
from ..spec.dtypes import to_torch
from ..spec.problem import Problem
from ..spec.workload import CustomInput, RandomInput, SafetensorsInput, ScalarInput, Workload


def find_blob(problem: Problem, rel_path: str) -> Path | None:
    """Locate a safetensors blob: the problem dir, then ``$FLASHINFER_TRACE_DIR``."""
    bases = [Path(problem.path) if Path(problem.path).is_dir() else Path(problem.path).parent]
    if os.environ.get("FLASHINFER_TRACE_DIR"):
        bases.append(Path(os.environ["FLASHINFER_TRACE_DIR"]))
    for b in bases:
        p = b / rel_path
        if p.is_file():
            return p
    return None


def _generator(seed: int, device: str) -> torch.Generator:
    dev = torch.device(device)
    g = torch.Generator(device=dev if dev.type == "cuda" else "cpu")
    g.manual_seed(seed)
    return g


def _random_tensor(name: str, shape: tuple[int, ...], dtype: torch.dtype, role: str | None,
                   env: dict[str, int], g: torch.Generator, device: str) -> torch.Tensor:
    dev = torch.device(device)
    lname = name.lower()

    def randn(dt=torch.float32):
        return torch.randn(shape, generator=g, device=dev, dtype=dt)

    if dtype == torch.float4_e2m1fn_x2:
        raw = torch.randint(0, 256, shape, generator=g, device=dev, dtype=torch.int32)
        return raw.to(torch.uint8).view(torch.float4_e2m1fn_x2)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g, device=dev).bool()
    if not dtype.is_floating_point:
        if role and role.startswith("index:"):
            axis = role.split(":", 1)[1]
            hi = env[axis] if axis in env else int(axis)
            return torch.randint(0, max(hi, 1), shape, generator=g, device=dev, dtype=dtype)
        if role == "mask" or "mask" in lname:
            return torch.randint(0, 2, shape, generator=g, device=dev, dtype=dtype)
        return torch.randint(-1024, 1024, shape, generator=g, device=dev, dtype=dtype)
    # floating point (incl. fp8)
    if role == "positive" or (role is None and ("std" in lname or "var" in lname.split("_"))):
        x = randn().abs() + 0.1
    elif role == "unit_interval":
        x = torch.rand(shape, generator=g, device=dev)
    elif role == "ones":
        x = torch.ones(shape, device=dev)
    elif role == "mask" or (role is None and "mask" in lname):
        x = torch.randint(0, 2, shape, generator=g, device=dev).float()
    elif role and role.startswith("uniform:"):
        _, lo, hi = role.split(":")
        x = torch.rand(shape, generator=g, device=dev) * (float(hi) - float(lo)) + float(lo)
    elif role == "scaled" or (
        role is None and lname.endswith("weight") and len(shape) >= 2 and "norm" not in lname
    ):
        x = randn() / math.sqrt(max(shape[-1], 1))
    elif role is None and len(shape) == 1 and "norm" in lname and (
        "weight" in lname or "gamma" in lname
    ):
        x = 1.0 + 0.1 * randn()
    else:
        x = randn()
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        x = x.clamp(-2, 2)
    return x.to(dtype)


def _random_scalar(dtype: torch.dtype, g: torch.Generator):
    v = torch.randn((), generator=g, device=g.device).item()
    if dtype == torch.bool:
        return v > 0
    if not dtype.is_floating_point:
        return int(abs(v) * 8) + 1
    return float(v)


def make_inputs(problem: Problem, workload: Workload, seed: int, device: str = "cpu") -> dict[str, Any]:
    """Build the inputs of ``workload`` in definition input order.

    Args:
        problem: the loaded problem. workload: one of its workloads.
        seed: RNG seed; the same seed gives the same values on the same device.
        device: "cpu" or "cuda[:i]".

    Returns:
        name -> tensor (declared shape and dtype) or Python scalar (shape ``None``).

    Raises:
        MissingBlobError: a safetensors blob is not on disk (names workload, input, path).
        SpecError: the custom entrypoint is missing, fails, or returns a wrong shape/dtype.
    """
    defn = problem.definition
    env = defn.resolve_axes(workload.axes)
    out: dict[str, Any] = {}
    if workload.is_custom:
        mod = problem.reference_module()
        fn = getattr(mod, defn.custom_inputs_entrypoint or "", None)
        if fn is None:
            raise SpecError(problem.path, "custom_inputs_entrypoint",
                            f"function {defn.custom_inputs_entrypoint!r} not found in reference")
        args = dict(env)
        for k, src in workload.inputs.items():
            if isinstance(src, ScalarInput):
                args[k] = src.value
        torch.manual_seed(seed)
        if torch.device(device).type == "cuda":
            torch.cuda.manual_seed_all(seed)
        got = fn(args, torch.device(device))
        if not isinstance(got, dict):
            raise SpecError(problem.path, "custom_inputs_entrypoint",
                            f"returned {type(got).__name__}, expected a dict of inputs")
        for name, spec in defn.inputs.items():
            if name not in got:
                raise SpecError(problem.path, f"custom_inputs_entrypoint.{name}",
                                "input not returned by the entrypoint")
            v = got[name]
            if isinstance(v, torch.Tensor):
                shape = defn.shape_of(spec, env)
                if shape is not None and tuple(v.shape) != shape:
                    raise SpecError(problem.path, f"inputs.{name}.shape",
                                    f"entrypoint made shape {tuple(v.shape)}, declared {shape}")
                if v.dtype != to_torch(spec.dtype):
                    raise SpecError(problem.path, f"inputs.{name}.dtype",
                                    f"entrypoint made {v.dtype}, declared {spec.dtype}")
            out[name] = v
        return out

    g = _generator(seed, device)
    roles = defn.input_roles or {}
    for name, spec in defn.inputs.items():
        src = workload.inputs[name]
        dtype = to_torch(spec.dtype)
        shape = defn.shape_of(spec, env)
        if isinstance(src, ScalarInput):
            out[name] = src.value
        elif isinstance(src, SafetensorsInput):
            blob = find_blob(problem, src.path)
            if blob is None:
                raise MissingBlobError(
                    src.path, f"workload {workload.uuid}.inputs.{name}",
                    "safetensors blob not found (looked in the problem directory and "
                    "$FLASHINFER_TRACE_DIR); this dataset ships without its blobs",
                )
            from safetensors.torch import load_file

            tensors = load_file(str(blob), device=str(torch.device(device)))
            if src.tensor_key not in tensors:
                raise SpecError(blob, f"tensor_key {src.tensor_key!r}", "key not in the blob")
            out[name] = tensors[src.tensor_key]
        elif isinstance(src, RandomInput):
            if shape is None:
                out[name] = _random_scalar(dtype, g)
            else:
                out[name] = _random_tensor(name, shape, dtype, roles.get(name), env, g, device)
        else:  # pragma: no cover - CustomInput handled above
            raise SpecError(problem.path, f"inputs.{name}", "mixed custom inputs")
    return out
