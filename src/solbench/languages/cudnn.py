"""cuDNN from C++: a CUDA C++ extension that calls the cuDNN library (``-lcudnn``).

Headers and library come from the CUDA toolkit or the system; when ``cudnn.h`` is in neither,
the ``nvidia-cudnn`` wheel torch depends on (``nvidia/cudnn/include`` and ``lib``) is used."""

from pathlib import Path

from .base import CPP_BUILD_TOOLS, AuditRules, Language, cuda_home, cuda_source_requirements, package_dir


def _wheel_dir() -> Path | None:
    d = package_dir("nvidia.cudnn")
    return d if d and (d / "include" / "cudnn.h").exists() else None


def _system_has_header() -> bool:
    roots = [Path(cuda_home()) / "include"] if cuda_home() else []
    roots += [Path("/usr/include"), Path("/usr/include/x86_64-linux-gnu")]
    return any((r / "cudnn.h").exists() for r in roots)


def _include_dirs() -> list[str]:
    d = None if _system_has_header() else _wheel_dir()
    return [str(d / "include")] if d else []


def _ld_flags(solution) -> list[str]:
    if _system_has_header():
        return []
    d = _wheel_dir()
    if d is None:
        return []
    lib = d / "lib"
    # the wheel ships only the versioned library (libcudnn.so.9): link it by file name
    so = sorted(lib.glob("libcudnn.so*"))
    flags = [f"-L{lib}", f"-Wl,-rpath,{lib}"]
    if so and not (lib / "libcudnn.so").exists():
        flags.append(f"-l:{so[-1].name}")
    return flags


LANGUAGE = Language(
    name="cudnn",
    family="cpp",
    title="cuDNN (C++)",
    source_requirements=cuda_source_requirements,
    child_tools=CPP_BUILD_TOOLS,
    child_modules=("solbench.harness.build_cpp",),
    include_dirs=_include_dirs,
    ld_flags=_ld_flags,
    audit=AuditRules(cpp_identifiers={
        "audit.precision_cast": frozenset({"CUDNN_DATA_HALF", "CUDNN_DATA_BFLOAT16",
                                           "CUDNN_DATA_FP8_E4M3", "CUDNN_DATA_FP8_E5M2",
                                           "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION"}),
    }),
)
