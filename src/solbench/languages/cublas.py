"""cuBLAS from C++: a CUDA C++ extension that calls cuBLAS (linked with ``-lcublas``, the
library torch itself uses)."""

from .base import CPP_BUILD_TOOLS, AuditRules, Language, cuda_source_requirements


def _ld_flags(solution) -> list[str]:
    opts = solution.spec.compile_options
    given = set(opts.ld_flags) if opts else set()
    return [f for f in ("-lcublas", "-lcublasLt") if f not in given]


LANGUAGE = Language(
    name="cublas",
    family="cpp",
    title="cuBLAS (C++)",
    source_requirements=cuda_source_requirements,
    child_tools=CPP_BUILD_TOOLS,
    child_modules=("solbench.harness.build_cpp",),
    ld_flags=_ld_flags,
    audit=AuditRules(cpp_identifiers={
        # cublasGemmEx compute types and math modes below fp32
        "audit.precision_cast": frozenset({"CUBLAS_COMPUTE_16F", "CUBLAS_COMPUTE_32F_FAST_TF32",
                                           "CUBLAS_COMPUTE_32F_FAST_16BF", "CUBLAS_COMPUTE_32F_FAST_16F"}),
        "audit.side_stream": frozenset({"cublasSetStream_v2"}),
    }),
)
