"""Triton: a Python entry file with ``@triton.jit`` kernels (torch ships triton on CUDA)."""

from .base import CUDA_JIT_TOOLS, Language, Requirement

#: Triton's runtime compiles its C launcher stub with the host C compiler
_LAUNCHER_TOOLS = frozenset({"cc", "gcc", "clang", "cc1", "as", "ld", "ld.bfd", "collect2", "sh"})

LANGUAGE = Language(
    name="triton",
    family="python",
    title="Triton",
    requirements=(Requirement("Triton", module="triton", dist="triton",
                              hint="pip install triton"),),
    child_tools=CUDA_JIT_TOOLS | _LAUNCHER_TOOLS,
    child_modules=("triton",),
)
