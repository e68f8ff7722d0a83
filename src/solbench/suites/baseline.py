"""Baseline candidates produced automatically from a problem's reference.

:func:`compile_baseline` wraps the reference in ``torch.compile`` and packages it as a
(non-DPS) solution, for any problem solbench loads: a definition dir (ours, l1, dlrm or
SOL-ExecBench) or a KernelBench ``.py``. The solution is a single self-contained source
file: the reference text verbatim, then a small wrapper, so the candidate computes exactly
the reference's function and differs only in how it is executed.

The wrapper compiles lazily on the first call (``dynamic=False``: one graph per shape, as a
tuned baseline would be), so build time falls in the harness's warm-up, not in a timed call.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import SpecError
from ..spec.problem import Problem
from ..spec.solution import Solution

#: torch.compile backends a baseline may name ("inductor" is the real baseline; "eager" and
#: "aot_eager" run the same graph capture without code generation, for CPU tests and CI)
BACKENDS = ("inductor", "aot_eager", "eager")
MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

_RUN_WRAPPER = '''

# --- solbench baseline: the reference above, run through torch.compile ---
_SOLBENCH_COMPILED = []


def {entry}(*args):
    """The reference's run(...) compiled with torch.compile(backend={backend!r},
    mode={mode!r}, dynamic=False); compiled on the first call."""
    if not _SOLBENCH_COMPILED:
        _SOLBENCH_COMPILED.append(torch.compile(run, backend={backend!r}, mode={mode!r},
                                                dynamic=False))
    return _SOLBENCH_COMPILED[0](*args)
'''

_MODEL_WRAPPER = '''

# --- solbench baseline: the reference Model above, its forward run through torch.compile ---
class ModelNew(Model):
    """Model with forward compiled by torch.compile(backend={backend!r}, mode={mode!r},
    dynamic=False)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._solbench_forward = torch.compile(super().forward, backend={backend!r},
                                               mode={mode!r}, dynamic=False)

    def forward(self, *args):
        return self._solbench_forward(*args)
'''


def compile_baseline(problem: Problem, *, backend: str = "inductor", mode: str | None = None,
                     name: str | None = None) -> Solution:
    """A torch.compile candidate for ``problem``.

    Args:
        problem: a loaded problem (definition dir or KernelBench file).
        backend: torch.compile backend, one of :data:`BACKENDS`.
        mode: torch.compile mode, one of :data:`MODES`.
        name: solution name (default ``<problem>__torch_compile`` plus the backend when it is
            not inductor).

    Returns:
        A pytorch Solution, ``destination_passing_style`` false, one source
        ``baseline_compile.py`` whose entry is ``compiled_run`` (definition problems) or
        ``ModelNew`` (KernelBench).

    Raises:
        ValueError: unknown backend or mode.
        SpecError: the reference defines no ``run`` (or no ``Model`` for KernelBench).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r} not in {BACKENDS}")
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} not in {MODES}")
    if problem.kind == "kernelbench":
        source = Path(problem.path).read_text()
        if "class Model" not in source:
            raise SpecError(problem.path, "Model", "KernelBench file defines no class Model")
        if "import torch\n" not in source:
            source = "import torch\n" + source
        source += _MODEL_WRAPPER.format(backend=backend, mode=mode)
        entry = "ModelNew"
    else:
        source = problem.definition.reference
        if "def run(" not in source:
            raise SpecError(problem.path, "reference", "defines no top-level run(...)")
        entry = "compiled_run"
        if "import torch\n" not in source:
            source = "import torch\n" + source
        source += _RUN_WRAPPER.format(entry=entry, backend=backend, mode=mode)
    suffix = "" if backend == "inductor" else f"_{backend}"
    return Solution(
        name=name or f"{problem.name}__torch_compile{suffix}",
        definition=problem.name,
        author="solbench-baseline",
        description=(f"torch.compile(backend={backend!r}, mode={mode!r}) of the problem's "
                     "reference: the scoring baseline beside eager"),
        spec={
            "languages": ["pytorch"],
            "target_hardware": ["LOCAL"],
            "entry_point": f"baseline_compile.py::{entry}",
            "destination_passing_style": False,
            "dependencies": ["torch"],
        },
        sources=[{"path": "baseline_compile.py", "content": source}],
    )


def write_solution(solution: Solution, out_dir: str | Path, filename: str = "solution.json") -> Path:
    """Write ``solution`` as ``<out_dir>/<filename>`` (created); returns the path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / filename
    path.write_text(json.dumps(solution.model_dump(mode="json", exclude_none=True), indent=2)
                    + "\n")
    return path


__all__ = ["BACKENDS", "MODES", "compile_baseline", "write_solution"]
