"""KernelBench adapters: a problem .py (``Model``, ``get_inputs``, ``get_init_inputs``)
becomes a :class:`Problem` with one all-custom workload; a candidate .py (``ModelNew``,
or a plain ``run``) becomes a :class:`Solution`.

KernelBench's own check is ``torch.allclose`` with atol = rtol = 1e-2 on every element
(formats.md); we keep that tolerance (required_matched_ratio = 1.0) and add the
scale-invariant checks of the harness on top.
"""

from __future__ import annotations

import ast
import hashlib
import uuid
from pathlib import Path

from ..errors import SpecError
from .definition import Definition
from .dtypes import name_of
from .problem import Problem
from .reference import import_source
from .solution import Solution
from .workload import Workload

ADAPTER = '''

# --- solbench KernelBench adapter (appended; not part of the original file) ---
def _solbench_get_inputs(axes_and_scalars, device):
    import torch as _t
    _vals = get_inputs()
    return {f"arg{_i}": (_v.to(device) if isinstance(_v, _t.Tensor) else _v)
            for _i, _v in enumerate(_vals)}
'''

KB_SEED = 42


def missing_entry(names) -> str:
    """The error of a candidate .py that defines neither entry point, naming what it defines
    at top level instead (``names``: class and function names)."""
    found = ", ".join(sorted(names)[:8]) + (", ..." if len(names) > 8 else "") if names else "none"
    return f"defines neither class ModelNew nor def run (top-level classes and functions: {found})"


def _defines(tree: ast.Module) -> set[str]:
    return {
        n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))
    }


def load_kernelbench_problem(path: Path) -> Problem:
    """Adapt a KernelBench problem file. Raises SpecError naming the missing symbol."""
    import torch

    text = path.read_text()
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise SpecError(path, f"line {e.lineno}", f"syntax error: {e.msg}") from None
    names = _defines(tree)
    for need in ("Model", "get_inputs", "get_init_inputs"):
        if need not in names:
            raise SpecError(path, need, "KernelBench problem file must define it")
    source = text + ADAPTER
    try:
        mod = import_source(source, stem=path.stem)
    except Exception as e:  # noqa: BLE001 - report any import failure as a spec error
        raise SpecError(path, "", f"import failed: {type(e).__name__}: {e}") from None
    torch.manual_seed(KB_SEED)
    init_args = tuple(mod.get_init_inputs())
    torch.manual_seed(KB_SEED)
    sample = list(mod.get_inputs())
    inputs = {}
    for i, v in enumerate(sample):
        if isinstance(v, torch.Tensor):
            inputs[f"arg{i}"] = {"shape": list(v.shape), "dtype": name_of(v.dtype)}
        elif isinstance(v, bool):
            inputs[f"arg{i}"] = {"shape": None, "dtype": "bool"}
        elif isinstance(v, int):
            inputs[f"arg{i}"] = {"shape": None, "dtype": "int64"}
        elif isinstance(v, float):
            inputs[f"arg{i}"] = {"shape": None, "dtype": "float32"}
        else:
            raise SpecError(path, f"get_inputs()[{i}]", f"unsupported input type {type(v).__name__}")
    outs = _infer_outputs(mod, init_args, sample)
    outputs = {}
    for i, o in enumerate(outs):
        key = "output" if len(outs) == 1 else f"output{i}"
        outputs[key] = {"shape": list(o.shape), "dtype": name_of(o.dtype)}
    digest = hashlib.sha256(text.encode()).hexdigest()
    defn = Definition.model_validate(
        {
            "name": path.stem,
            "op_type": "kernelbench",
            "description": f"KernelBench problem {path.name}",
            "axes": {},
            "inputs": inputs,
            "outputs": outputs,
            "reference": source,
            "custom_inputs_entrypoint": "_solbench_get_inputs",
        }
    )
    wl = Workload(
        uuid=str(uuid.UUID(digest[:32])),
        axes={},
        inputs={k: {"type": "custom"} for k in inputs},
        tolerance={"max_atol": 1e-2, "max_rtol": 1e-2, "required_matched_ratio": 1.0},
    )
    return Problem(
        definition=defn, workloads=[wl], path=path, kind="kernelbench",
        init_args=init_args, init_seed=KB_SEED,
    )


def _infer_outputs(mod, init_args, sample) -> list:
    """Output shapes/dtypes: on the meta device when the model allows it, else on CPU."""
    import torch

    def as_list(o):
        return list(o) if isinstance(o, (tuple, list)) else [o]

    try:
        with torch.device("meta"):
            torch.manual_seed(KB_SEED)
            model = mod.Model(*init_args)
            meta_in = [
                torch.empty_like(v, device="meta") if isinstance(v, torch.Tensor) else v
                for v in sample
            ]
            with torch.no_grad():
                return as_list(model(*meta_in))
    except Exception:  # noqa: BLE001 - meta unsupported: run for real on CPU
        torch.manual_seed(KB_SEED)
        model = mod.Model(*init_args)
        with torch.no_grad():
            return as_list(model(*sample))


def solution_from_py(path: Path, problem: Problem | None) -> Solution:
    """Wrap a candidate .py as a Solution: ``ModelNew`` (class, built with the problem's
    init args) or a plain ``run`` function (inputs in definition order, returns outputs)."""
    text = path.read_text()
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise SpecError(path, f"line {e.lineno}", f"syntax error: {e.msg}") from None
    names = _defines(tree)
    if "ModelNew" in names:
        entry = "ModelNew"
    elif "run" in names:
        entry = "run"
    else:
        raise SpecError(path, "entry point", missing_entry(names))
    lang = "triton" if "triton" in text else "pytorch"
    return Solution(
        name=path.stem,
        definition=problem.name if problem else path.stem,
        author="unknown",
        description=f"candidate file {path.name}",
        spec={"languages": [lang], "entry_point": f"{path.name}::{entry}",
              "destination_passing_style": False},
        sources=[{"path": path.name, "content": text}],
    )
