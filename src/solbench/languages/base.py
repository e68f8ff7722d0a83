"""What a kernel language plug-in declares, and the shared checks behind those declarations.

A plug-in is one :class:`Language` instance in its own module, listed once in
:mod:`solbench.languages` (the registry). Everything that depends on the language
reads the plug-in: spec validation (:mod:`solbench.spec.solution`), the build step
(:mod:`solbench.harness.build`), the child-process allow-list
(:data:`solbench.harness.guards.ALLOWED_CHILD_CMDLINE`) and the static audit's
language-specific rules (:mod:`solbench.integrity.static_audit`).

Nothing here imports torch or a toolchain at module import: requirements are probed with
:func:`importlib.util.find_spec` and :mod:`importlib.metadata`, which read the installed
files without running them.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, Literal, Protocol, Sequence


# What a plug-in reads of a solution, as structural types: the registry sits below spec
# (spec.solution validates its languages here), so it names spec's models only by shape.
class BuildSpec(Protocol):
    """The fields of :class:`solbench.spec.solution.BuildSpec` a plug-in reads."""

    binding: str | None

    @property
    def entry_file(self) -> str: ...


class SourceFile(Protocol):
    """One source of a solution: its relative ``path`` and text ``content``."""

    path: str
    content: str


class Solution(Protocol):
    """The fields of :class:`solbench.spec.solution.Solution` a plug-in reads."""

    @property
    def sources(self) -> Sequence[SourceFile]: ...

    @property
    def spec(self) -> BuildSpec: ...

#: suffixes of C/C++/CUDA sources torch.utils.cpp_extension compiles (headers are included)
CPP_COMPILED_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")
#: suffixes an upstream C++-family entry point may have (upstream's solution validator)
CPP_ENTRY_SUFFIXES = CPP_COMPILED_SUFFIXES + (".h", ".hpp", ".cuh")


class ToolchainMissing(Exception):
    """A language's toolchain or GPU requirement is not met. ``str(e)`` is one line naming
    what to install or why the language cannot run here (recorded as COMPILE_ERROR)."""


def install_hint(extra: str) -> str:
    """The one command that installs a solbench extra."""
    return f"pip install 'solbench[{extra}]'"


@dataclass(frozen=True)
class Requirement:
    """One thing a language needs at build time.

    Attributes:
        what: human name ("CuTe DSL", "CUTLASS C++ headers").
        module: top-level import name probed with ``find_spec`` (never imported here).
        dist: the PyPI distribution that provides it; its version enters the build key.
        extra: the solbench extra that installs it (``pip install 'solbench[<extra>]'``).
        probe: instead of (or after) ``module``: returns a path proving the requirement is
            met (e.g. a header directory), or None.
        hint: what to do when there is no extra (e.g. "set CUDA_HOME").
        message: the whole one-line reason when unmet (instead of "<what> not found: ...").
    """

    what: str
    module: str | None = None
    dist: str | None = None
    extra: str | None = None
    probe: Callable[[], str | None] | None = None
    hint: str | None = None
    message: str | None = None

    def missing(self) -> str | None:
        """None when met, else the one-line reason naming what to install."""
        found = True
        if self.module is not None:
            try:
                found = importlib.util.find_spec(self.module) is not None
            except (ImportError, ValueError):
                found = False
        if found and self.probe is not None:
            found = self.probe() is not None
        if found:
            return None
        if self.message:
            return self.message
        how = install_hint(self.extra) if self.extra else (self.hint or "not installable here")
        src = f" (import {self.module})" if self.module else ""
        return f"{self.what} not found{src}: {how}"

    def version(self) -> str | None:
        if self.dist is None:
            return None
        try:
            return importlib.metadata.version(self.dist)
        except importlib.metadata.PackageNotFoundError:
            return None


@dataclass(frozen=True)
class AuditRules:
    """Static-audit rules specific to a language (advisory findings, see static_audit).

    Attributes:
        cpp_identifiers: rule id -> C/C++ identifiers flagged in this language's C++ sources
            (added to the generic C++ rules; ``audit.precision_cast`` identifiers are judged
            against the problem's precision floor by their name, as the generic ones are).
        dtype_names: fully qualified Python names of this language's dtypes -> format name
            (``"cutlass.Float16" -> "float16"``), so casts and ``dtype=`` arguments below the
            declared precision are seen in its DSL as in torch.
        cast_methods: method or function leaf names that cast to their dtype argument
            (``astype``), in addition to torch's ``.to`` / ``.type``.
        python_calls: rule id -> fully qualified calls flagged wherever they appear.
    """

    cpp_identifiers: dict[str, frozenset[str]] = field(default_factory=dict)
    dtype_names: dict[str, str] = field(default_factory=dict)
    cast_methods: frozenset[str] = frozenset()
    python_calls: dict[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Language:
    """A kernel language plug-in.

    Attributes:
        name: the ``spec.languages`` value (upstream's spelling).
        family: "python" (the entry file is imported in the worker) or "cpp" (compiled with
            torch.utils.cpp_extension in a build subprocess; the module binds the entry
            symbol itself via pybind11).
        title: human name used in messages.
        aliases: other accepted spellings (solbench's older names).
        requirements: build-time requirements (:class:`Requirement`).
        extra: the solbench extra (pyproject optional dependency) that installs them.
        needs_cuda: the language cannot run without a CUDA device.
        gpu_rule: compute capability (major*10+minor) -> None when supported, else the
            reason (cuTile: "needs sm_100+ ..."); None: any CUDA GPU.
        child_tools: executables (basenames) its build legitimately starts.
        child_modules: Python modules (``python -m``) its build legitimately starts.
        audit: language-specific static-audit rules.
        include_dirs / ld_flags / cuda_cflags: C++ family: extra compile and link options
            derived from the installed toolchain (callables, evaluated at build time).
    """

    name: str
    family: Literal["python", "cpp"]
    title: str
    aliases: tuple[str, ...] = ()
    requirements: tuple[Requirement, ...] = ()
    extra: str | None = None
    needs_cuda: bool = False
    gpu_rule: Callable[[int], str | None] | None = None
    child_tools: frozenset[str] = frozenset()
    child_modules: tuple[str, ...] = ()
    audit: AuditRules = field(default_factory=AuditRules)
    include_dirs: Callable[[], list[str]] | None = None
    ld_flags: Callable[[Solution], list[str]] | None = None
    source_requirements: Callable[[Solution], tuple[Requirement, ...]] | None = None

    # -- spec ------------------------------------------------------------------------
    def validate_spec(self, spec: BuildSpec) -> None:
        """Raise ValueError (one line, naming the field) when ``spec`` cannot be built as
        this language: entry file suffix (upstream's rule), binding."""
        suffix = PurePosixPath(spec.entry_file).suffix.lower()
        if self.family == "python" and suffix != ".py":
            raise ValueError(f"spec.entry_point: {self.name} needs a .py entry file, "
                             f"got {spec.entry_file!r}")
        if self.family == "cpp":
            if suffix not in CPP_ENTRY_SUFFIXES:
                raise ValueError(f"spec.entry_point: {self.name} needs a C/C++/CUDA entry file "
                                 f"({', '.join(CPP_ENTRY_SUFFIXES)}), got {spec.entry_file!r}")
            if spec.binding not in (None, "torch"):
                raise ValueError(f"spec.binding: {self.name} supports 'torch' only")

    # -- requirements ----------------------------------------------------------------
    def check_device(self, device: str) -> None:
        """Raise :class:`ToolchainMissing` when ``device`` cannot run this language."""
        if not (self.needs_cuda or self.gpu_rule):
            return
        if not str(device).startswith("cuda"):
            raise ToolchainMissing(f"{self.name}: needs a CUDA GPU (device is {device})")
        if self.gpu_rule:
            name, sm = gpu_identity(device)
            why = self.gpu_rule(sm) if sm is not None else None
            if why:
                raise ToolchainMissing(f"{self.name}: unsupported on this GPU ({name}, sm_{sm}; {why})")

    def all_requirements(self, solution: Solution | None = None) -> tuple[Requirement, ...]:
        extra = self.source_requirements(solution) if (solution and self.source_requirements) else ()
        return tuple(self.requirements) + tuple(extra)

    def check_toolchain(self, solution: Solution | None = None) -> None:
        """Raise :class:`ToolchainMissing` naming the first unmet requirement."""
        for r in self.all_requirements(solution):
            why = r.missing()
            if why:
                raise ToolchainMissing(f"{self.name}: {why}")

    def toolchain_versions(self, solution: Solution | None = None) -> dict[str, str | None]:
        """Versions that enter the build key (distribution -> version)."""
        return {r.dist: r.version() for r in self.all_requirements(solution) if r.dist}

    def extra_include_dirs(self) -> list[str]:
        return list(self.include_dirs()) if self.include_dirs else []

    def extra_ld_flags(self, solution: Solution) -> list[str]:
        return list(self.ld_flags(solution)) if self.ld_flags else []


# --------------------------------------------------------------------------------------
# probes shared by plug-ins


def gpu_identity(device: str) -> tuple[str, int | None]:
    """(device name, compute capability major*10+minor) of a CUDA device; (device, None)
    when torch cannot tell (then no capability rule is applied)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return str(device), None
        idx = torch.device(device).index or 0
        major, minor = torch.cuda.get_device_capability(idx)
        return torch.cuda.get_device_name(idx), major * 10 + minor
    except Exception:  # noqa: BLE001 - an unreadable device leaves the rule to the runtime
        return str(device), None


def package_dir(module: str) -> Path | None:
    """Directory of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locs = list(spec.submodule_search_locations or [])
    if locs:
        return Path(locs[0])
    return Path(spec.origin).parent if spec.origin else None


@functools.lru_cache(maxsize=None)
def cuda_home() -> str | None:
    """The CUDA toolkit torch.utils.cpp_extension would use (CUDA_HOME / CUDA_PATH, else the
    directory above ``nvcc`` on PATH, else /usr/local/cuda), or None."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var) and Path(os.environ[var], "bin", "nvcc").exists():
            return os.environ[var]
    nvcc = shutil.which("nvcc")
    if nvcc:
        real = Path(os.path.realpath(nvcc))
        if real.parent.name == "bin" and (real.parent.parent / "include").is_dir():
            return str(real.parent.parent)
    if Path("/usr/local/cuda/bin/nvcc").exists():
        return "/usr/local/cuda"
    return None


@functools.lru_cache(maxsize=None)
def tool_version(cmd: tuple[str, ...]) -> str | None:
    """Last line of ``cmd``'s version output (``nvcc --version``, ``c++ -dumpfullversion``);
    None when the tool is absent. Part of the build key: a new compiler rebuilds."""
    try:
        out = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    return lines[-1].strip() if lines else None


def torch_cuda_version() -> str | None:
    """CUDA version torch was built with (None for a CPU build)."""
    try:
        import torch

        return torch.version.cuda
    except Exception:  # noqa: BLE001
        return None


def imports_module(source: str, top: str) -> bool:
    """Whether Python ``source`` imports package ``top`` (``import torch, triton``,
    ``import triton.language as tl``, ``from triton import jit``), read with :mod:`ast`
    (never run); a source that does not parse is searched line by line."""
    import ast
    import re

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        pat = re.compile(rf"^\s*(from\s+{top}\b|import\s+([\w.]+\s*(as\s+\w+)?\s*,\s*)*{top}\b)",
                         re.MULTILINE)
        return pat.search(source) is not None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == top for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == top:
            return True
    return False


def has_cuda_sources(solution: Solution) -> bool:
    return any(s.path.lower().endswith((".cu", ".cuh")) for s in solution.sources)


def _cuda_toolkit_probe() -> str | None:
    return cuda_home()


def _torch_cuda_probe() -> str | None:
    return torch_cuda_version()


#: a .cu source needs torch built with CUDA and the CUDA toolkit (nvcc)
TORCH_CUDA = Requirement("a CUDA build of torch", probe=_torch_cuda_probe,
                         message="CUDA sources need a CUDA build of torch (this one is CPU-only)")
CUDA_TOOLKIT = Requirement("the CUDA toolkit (nvcc)", probe=_cuda_toolkit_probe,
                           message="CUDA sources need the CUDA toolkit (nvcc): set CUDA_HOME")


def _host_cxx_probe() -> str | None:
    return shutil.which(os.environ.get("CXX", "c++"))


def _ninja_probe() -> str | None:
    # torch.utils.cpp_extension runs the `ninja` executable (the PyPI wheel puts it on PATH)
    return shutil.which("ninja")


HOST_CXX = Requirement("the host C++ compiler", probe=_host_cxx_probe,
                       message="C++ builds need a host C++ compiler (c++ / $CXX): install g++")
NINJA = Requirement("ninja", probe=_ninja_probe,
                    message="C++ builds need ninja (torch.utils.cpp_extension): pip install ninja")


def cuda_source_requirements(solution: Solution) -> tuple[Requirement, ...]:
    """C++ family: every build needs the host compiler and ninja; CUDA sources also need torch
    with CUDA and nvcc (.cpp-only builds need neither)."""
    cuda = (TORCH_CUDA, CUDA_TOOLKIT) if has_cuda_sources(solution) else ()
    return (HOST_CXX, NINJA) + cuda


#: executables every C++ build through torch.utils.cpp_extension (ninja) may start
CPP_BUILD_TOOLS = frozenset({
    "ninja", "c++", "g++", "gcc", "cc", "cc1plus", "cc1", "as", "ld", "ld.bfd", "ld.gold",
    "collect2", "clang", "clang++", "sh", "dash", "bash", "nvcc", "ptxas", "cicc", "cudafe++",
    "nvlink", "fatbinary",
})
#: executables a CUDA JIT (Triton, CuTe DSL, cuTile) may start
CUDA_JIT_TOOLS = frozenset({"ptxas", "nvlink", "fatbinary", "cuobjdump", "nvdisasm"})
