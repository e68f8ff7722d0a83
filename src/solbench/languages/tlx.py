"""TLX (Triton Low-Level Extensions): Triton kernels using ``triton.language.extra.tlx``,
which only Meta's Triton fork ships (not on PyPI)."""

from .base import Language, Requirement, package_dir
from .triton import LANGUAGE as _TRITON


def _tlx_probe() -> str | None:
    d = package_dir("triton")
    return str(d / "language" / "extra" / "tlx") if d and (d / "language" / "extra" / "tlx").is_dir() else None


LANGUAGE = Language(
    name="tlx",
    family="python",
    title="Triton TLX",
    requirements=(Requirement("Triton with TLX (triton.language.extra.tlx)", module="triton",
                              dist="triton", probe=_tlx_probe,
                              hint="needs Meta's Triton build with TLX, not on PyPI"),),
    needs_cuda=True,
    child_tools=_TRITON.child_tools,
    child_modules=_TRITON.child_modules,
)
