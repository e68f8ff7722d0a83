"""PyTorch: a Python entry file using torch operators (torch.compile included)."""

from .base import CPP_BUILD_TOOLS, CUDA_JIT_TOOLS, Language

LANGUAGE = Language(
    name="pytorch",
    family="python",
    title="PyTorch",
    aliases=("python",),
    # torch.compile: inductor's compile-worker pool, its C++ codegen (CPU) and Triton (CUDA)
    child_tools=CPP_BUILD_TOOLS | CUDA_JIT_TOOLS,
    child_modules=("torch._inductor.compile_worker", "triton"),
)
