"""CUDA C++: ``.cu`` / ``.cpp`` sources compiled with torch.utils.cpp_extension (nvcc for CUDA
sources, the host C++ compiler for the rest); the module binds the entry symbol itself
(``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }``)."""

from .base import CPP_BUILD_TOOLS, Language, cuda_source_requirements

LANGUAGE = Language(
    name="cuda_cpp",
    family="cpp",
    title="CUDA C++",
    aliases=("cuda",),
    source_requirements=cuda_source_requirements,
    child_tools=CPP_BUILD_TOOLS,
    child_modules=("solbench.harness.build_cpp",),
)
