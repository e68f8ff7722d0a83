"""The registry of kernel languages: one plug-in module each, one line each below.

Adding a language: write ``languages/<name>.py`` defining ``LANGUAGE = Language(...)``
(see :class:`~solbench.languages.base.Language`) and add its module to
``_MODULES``. Spec validation, the build step, the child-process allow-list and the static
audit read it from here; nothing else changes.

The names are upstream SOL-ExecBench's ``spec.languages`` values (``SupportedLanguages``):
Python family pytorch, triton, tlx, cute_dsl, cutile, cudnn_frontend (plus solbench's
tvm_ffi); C++ family cuda_cpp, cutlass, cudnn, cublas. Families never mix in one solution.
"""

from __future__ import annotations

import importlib

from .base import AuditRules, Language, Requirement, ToolchainMissing, install_hint

_MODULES = (
    "pytorch",
    "triton",
    "tlx",
    "cute_dsl",
    "cutile",
    "cudnn_frontend",
    "tvm_ffi",
    "cuda_cpp",
    "cutlass",
    "cudnn",
    "cublas",
)

LANGUAGES: dict[str, Language] = {}
_ALIASES: dict[str, str] = {}
for _m in _MODULES:
    _lang: Language = importlib.import_module(f"{__name__}.{_m}").LANGUAGE
    LANGUAGES[_lang.name] = _lang
    for _a in (_lang.name, *_lang.aliases):
        _ALIASES[_a] = _lang.name


def canonical(name: str) -> str | None:
    """The registered name for ``name`` (case-insensitive; aliases resolved), or None."""
    return _ALIASES.get(name.strip().lower())


def get(name: str) -> Language:
    """The plug-in for ``name``; KeyError naming the known languages when there is none."""
    c = canonical(name)
    if c is None:
        raise KeyError(f"unknown language {name!r}; expected one of {sorted(LANGUAGES)}")
    return LANGUAGES[c]


def accepted_names() -> list[str]:
    return sorted(_ALIASES)


def for_languages(names: list[str]) -> list[Language]:
    """Plug-ins of a solution's ``spec.languages`` (in order, without repeats)."""
    out: list[Language] = []
    for n in names:
        lang = get(n)
        if lang not in out:
            out.append(lang)
    return out


def primary(names: list[str]) -> Language:
    """The plug-in that builds a solution: its C++-family language when there is one (the
    others are the libraries it calls), else its most specific Python language (a solution
    listing ``["pytorch", "cute_dsl"]`` needs CuTe DSL's toolchain and GPU)."""
    langs = for_languages(names)
    cpp = [lang for lang in langs if lang.family == "cpp"]
    if cpp:
        # cuda_cpp is the generic one: a library-specific language decides include paths
        return next((lang for lang in cpp if lang.name != "cuda_cpp"), cpp[0])
    specific = [lang for lang in langs if lang.name != "pytorch"]
    return specific[-1] if specific else langs[0]


def child_tools() -> frozenset[str]:
    """Executables any registered language's build or JIT legitimately starts."""
    out: set[str] = set()
    for lang in LANGUAGES.values():
        out |= lang.child_tools
    return frozenset(out)


def child_modules() -> tuple[str, ...]:
    """Python modules (``python -m``) any registered language's build legitimately starts."""
    out: list[str] = []
    for lang in LANGUAGES.values():
        out += [m for m in lang.child_modules if m not in out]
    return tuple(out)


__all__ = ["LANGUAGES", "AuditRules", "Language", "Requirement", "ToolchainMissing",
           "accepted_names", "canonical", "child_modules", "child_tools", "for_languages",
           "get", "install_hint", "primary"]
