"""What a problem needs of the device, decided from its definition before anything runs.

A problem whose reference cannot run on the device asked for is said so up front, with a
one-line reason, and recorded as NOT_RUNNABLE (docs/harness.md, "Problems that cannot run
here") instead of spending its input generation and a failed reference call on it: on the CPU
SOL-ExecBench's nvfp4 problems (Quant/009, 025, 029, 033 of the dev set) took about 49 s each
to end as INVALID_REFERENCE "Invalid scaling configuration", the message of
``torch._scaled_mm``'s CPU dispatch for a float4_e2m1fn_x2 operand.

Static rules (:func:`device_needs`), each a capability tag that ``--exclude-tag`` can skip:

- ``needs-cuda``: the reference calls ``torch._scaled_mm`` and the problem holds packed fp4
  (a ``float4_e2m1fn_x2`` input or output, or that dtype named in the reference): PyTorch
  has no CPU kernel for fp4 scaled matmul (fp8 per-tensor and row-wise scales do run on
  the CPU, so an fp8 ``_scaled_mm`` alone is not flagged); the reference calls
  ``torch._scaled_grouped_mm`` (no CPU kernel in any dtype); or the reference imports Triton.

What the static rules miss is caught when the reference fails (:func:`runtime_need`): an
error that names the CPU backend as the one without a kernel becomes the same status.
Pure functions of the definition's text; nothing is imported or run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .definition import Definition

#: the capability tag of problems whose reference needs a CUDA device
NEEDS_CUDA = "needs-cuda"

_FP4 = "float4_e2m1fn_x2"


@dataclass(frozen=True)
class DeviceNeed:
    """A capability the problem's reference needs: ``tag`` (``needs-cuda``) and a one-line
    ``reason`` ("needs CUDA: fp4 scaled matmul has no CPU kernel")."""

    tag: str
    reason: str


def _called_attrs(source: str) -> tuple[set[str], set[str]]:
    """(attribute and function names the reference refers to, modules it imports)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), set()
    names: set[str] = set()
    mods: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Import):
            mods.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods.add(node.module.split(".")[0])
    return names, mods


def device_needs(definition: Definition) -> list[DeviceNeed]:
    """The capabilities ``definition``'s reference needs beyond a CPU (module doc), first
    the most specific reason. Empty for a problem that runs anywhere."""
    src = definition.reference or ""
    names, mods = _called_attrs(src)
    dtypes = {s.dtype for s in list(definition.inputs.values()) + list(definition.outputs.values())}
    needs: list[DeviceNeed] = []
    if "_scaled_mm" in names and (_FP4 in dtypes or _FP4 in src):
        needs.append(DeviceNeed(NEEDS_CUDA, "needs CUDA: fp4 scaled matmul (torch._scaled_mm on "
                                            "float4_e2m1fn_x2) has no CPU kernel"))
    if "_scaled_grouped_mm" in names:
        needs.append(DeviceNeed(NEEDS_CUDA, "needs CUDA: torch._scaled_grouped_mm has no CPU kernel"))
    if "triton" in mods:
        needs.append(DeviceNeed(NEEDS_CUDA, "needs CUDA: the reference is a Triton kernel"))
    return needs


def capability_tags(definition: Definition) -> list[str]:
    """The capability tags of ``definition`` (``["needs-cuda"]`` or ``[]``), which
    ``solbench run --exclude-tag`` matches beside the workloads' own tags."""
    return sorted({n.tag for n in device_needs(definition)})


def unmet_need(definition: Definition, device: str) -> DeviceNeed | None:
    """The first need of ``definition`` that ``device`` ("cpu", "cuda:0", ...) does not
    meet, or None."""
    if str(device).startswith("cuda"):
        return None
    needs = device_needs(definition)
    return needs[0] if needs else None


#: fragments of PyTorch's errors for an op without a kernel on the CPU
_NO_CPU_KERNEL = ("with arguments from the 'CPU' backend", "not implemented for 'CPU'",
                  "Invalid scaling configuration")


def runtime_need(exc: BaseException, device: str) -> DeviceNeed | None:
    """The :class:`DeviceNeed` an exception raised by the reference on ``device`` shows, or
    None: on the CPU, PyTorch's "Could not run 'aten::X' with arguments from the 'CPU'
    backend", "... not implemented for 'CPU'", and ``torch._scaled_mm``'s "Invalid scaling
    configuration" (its CPU dispatch's answer to an fp4 or block-scaled operand) mean the op
    has no CPU kernel, not that the reference is wrong."""
    if str(device).startswith("cuda"):
        return None
    msg = str(exc)
    if not any(s in msg for s in _NO_CPU_KERNEL):
        return None
    op = None
    if "aten::" in msg:
        op = msg.split("aten::", 1)[1].split("'", 1)[0].split(" ", 1)[0]
    elif "scaling configuration" in msg:
        op = "_scaled_mm"
    what = f"torch.{op}" if op else "an op of the reference"
    first = msg.strip().splitlines()[0][:160] if msg.strip() else type(exc).__name__
    return DeviceNeed(NEEDS_CUDA, f"needs CUDA: {what} has no CPU kernel ({type(exc).__name__}: {first})")
