"""CuTe DSL: Python kernels written with CUTLASS's CuTe DSL (``import cutlass``,
``import cutlass.cute as cute``, ``@cute.kernel`` / ``@cute.jit``, ``cute.compile``), from the
``nvidia-cutlass-dsl`` wheel (solbench extra ``cute-dsl``). Kernels compiled with
``options="--enable-tvm-ffi"`` also need ``apache-tvm-ffi`` (extra ``tvm-ffi``)."""

from .base import CUDA_JIT_TOOLS, AuditRules, Language, Requirement, package_dir

#: Python-side CUDA stream creation outside torch (work outside the caller's stream)
DRIVER_STREAM_CALLS = frozenset({
    "cuda.bindings.driver.cuStreamCreate", "cuda.bindings.driver.cuStreamCreateWithPriority",
    "cuda.cuda.cuStreamCreate", "cuda.cuda.cuStreamCreateWithPriority",
    "cuda.bindings.runtime.cudaStreamCreate", "cuda.bindings.runtime.cudaStreamCreateWithFlags",
    "cuda.cudart.cudaStreamCreate", "cuda.cudart.cudaStreamCreateWithFlags",
})


def _cute_probe() -> str | None:
    # nvidia-cutlass 3.x also installed a top-level `cutlass` (the C++ generator's Python
    # interface); only the DSL has the `cute` subpackage
    d = package_dir("cutlass")
    return str(d / "cute") if d and (d / "cute").is_dir() else None


TVM_FFI = Requirement("TVM-FFI (for --enable-tvm-ffi)", module="tvm_ffi", dist="apache-tvm-ffi",
                      extra="tvm-ffi")


def _source_requirements(solution) -> tuple[Requirement, ...]:
    uses_ffi = any("enable-tvm-ffi" in s.content or "tvm_ffi" in s.content for s in solution.sources)
    return (TVM_FFI,) if uses_ffi else ()


_FLOATS = {"Float16": "float16", "BFloat16": "bfloat16", "TFloat32": "tf32",
           "Float8E4M3FN": "float8_e4m3fn", "Float8E5M2": "float8_e5m2",
           "Float8E8M0FNU": "float8_e8m0fnu", "Float4E2M1FN": "float4_e2m1"}

LANGUAGE = Language(
    name="cute_dsl",
    family="python",
    title="CuTe DSL",
    requirements=(Requirement("CuTe DSL", module="cutlass", dist="nvidia-cutlass-dsl",
                              extra="cute-dsl", probe=_cute_probe),),
    extra="cute-dsl",
    needs_cuda=True,
    source_requirements=_source_requirements,
    child_tools=CUDA_JIT_TOOLS,
    audit=AuditRules(
        dtype_names={f"{mod}.{k}": v for mod in ("cutlass", "cutlass.cute") for k, v in _FLOATS.items()},
        python_calls={"audit.side_stream": DRIVER_STREAM_CALLS},
    ),
)
