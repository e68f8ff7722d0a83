"""Triton: a Python entry file with ``@triton.jit`` kernels (torch ships triton on CUDA)."""

from .base import CUDA_JIT_TOOLS, Language, Requirement, imports_module

#: Triton's runtime compiles its C launcher stub with the host C compiler
_LAUNCHER_TOOLS = frozenset({"cc", "gcc", "clang", "cc1", "as", "ld", "ld.bfd", "collect2", "sh"})

TRITON = Requirement("Triton", module="triton", dist="triton", hint="pip install triton")


def _source_requirements(solution) -> tuple[Requirement, ...]:
    # required when a source imports it (KernelBench files are labelled "triton" when the
    # word merely appears in them)
    return (TRITON,) if any(imports_module(s.content, "triton") for s in solution.sources
                            if s.path.endswith(".py")) else ()


LANGUAGE = Language(
    name="triton",
    family="python",
    title="Triton",
    source_requirements=_source_requirements,
    child_tools=CUDA_JIT_TOOLS | _LAUNCHER_TOOLS,
    child_modules=("triton",),
)
