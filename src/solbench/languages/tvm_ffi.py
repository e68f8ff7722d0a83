"""TVM-FFI: a Python entry file that builds or loads C++/CUDA functions through Apache TVM's
FFI (``import tvm_ffi``; ``tvm_ffi.cpp.load_inline`` compiles with ninja + nvcc / c++), from the
``apache-tvm-ffi`` wheel (solbench extra ``tvm-ffi``). Its ``cpp_sources`` / ``cuda_sources``
strings are audited as C++, as ``torch.utils.cpp_extension.load_inline``'s are."""

from .base import CPP_BUILD_TOOLS, Language, Requirement

LANGUAGE = Language(
    name="tvm_ffi",
    family="python",
    title="TVM-FFI",
    requirements=(Requirement("TVM-FFI", module="tvm_ffi", dist="apache-tvm-ffi", extra="tvm-ffi"),),
    extra="tvm-ffi",
    child_tools=CPP_BUILD_TOOLS,
)
