"""CUTLASS C++: a CUDA C++ extension that includes CUTLASS / CuTe headers
(``#include <cutlass/gemm/device/gemm.h>``).

The headers come from, in order: ``$CUTLASS_DIR`` / ``$CUTLASS_HOME`` (a CUTLASS checkout,
as upstream's container sets it), then the ``nvidia-cutlass`` wheel
(``cutlass_library/source/include``, the solbench extra ``cutlass``). Both ``include`` and
``tools/util/include`` (``cutlass/util/...``) are put on the include path."""

import os
from pathlib import Path

from .base import CPP_BUILD_TOOLS, AuditRules, Language, Requirement, cuda_source_requirements, package_dir


def cutlass_root() -> Path | None:
    """The CUTLASS source root holding ``include/cutlass/cutlass.h``, or None."""
    for var in ("CUTLASS_DIR", "CUTLASS_HOME", "CUTLASS_PATH"):
        v = os.environ.get(var)
        if v and (Path(v) / "include" / "cutlass" / "cutlass.h").exists():
            return Path(v)
    d = package_dir("cutlass_library")
    if d and (d / "source" / "include" / "cutlass" / "cutlass.h").exists():
        return d / "source"
    return None


def _probe() -> str | None:
    r = cutlass_root()
    return str(r) if r else None


def _include_dirs() -> list[str]:
    r = cutlass_root()
    if r is None:
        return []
    return [str(p) for p in (r / "include", r / "tools" / "util" / "include") if p.is_dir()]


LANGUAGE = Language(
    name="cutlass",
    family="cpp",
    title="CUTLASS C++",
    # the module name is probed only through the header directory (CUTLASS_DIR also counts)
    requirements=(Requirement("CUTLASS C++ headers (cutlass/cutlass.h)", dist="nvidia-cutlass",
                              extra="cutlass", probe=_probe),),
    extra="cutlass",
    source_requirements=cuda_source_requirements,
    child_tools=CPP_BUILD_TOOLS,
    child_modules=("solbench.harness.build_cpp",),
    include_dirs=_include_dirs,
    audit=AuditRules(cpp_identifiers={
        # CUTLASS numeric types below fp32 (judged against the problem's precision floor)
        "audit.precision_cast": frozenset({"half_t", "bfloat16_t", "tfloat32_t", "float_e4m3_t",
                                           "float_e5m2_t", "OpMultiplyAddFastF16",
                                           "OpMultiplyAddFastBF16"}),
    }),
)
