"""Dtype names of the SOL-ExecBench format and their torch equivalents.

Element widths are storage widths in bytes; the packed fp4 format stores two e2m1 values
per byte, and its declared shapes already count bytes (the last dim is halved), so one
element of ``float4_e2m1fn_x2`` is 1 byte holding 2 values. Source: formats.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: the dtype names definition.json may use (the keys of :data:`DTYPES`). Validating a
#: definition needs these alone, and torch is imported on first use of a torch dtype, not by
#: loading a problem: a warm ``solbench sol`` (every count cached) never starts it.
DTYPE_NAMES: tuple[str, ...] = (
    "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1",
    "float4_e2m1fn_x2", "int64", "int32", "int16", "int8", "uint8", "bool",
)

#: storage bytes of one element of each name (the packed fp4 names: one byte holding two
#: values), without torch: choosing workloads by size (``--limit``, ``--max-bytes``) happens
#: before the parent's torch import and decides whether the SOL counting child starts at once.
#: ``tests/spec/test_dtypes.py`` checks every entry against torch's own element size.
STORAGE_BYTES: dict[str, int] = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "float4_e2m1": 1, "float4_e2m1fn_x2": 1, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint8": 1, "bool": 1,
}

_TABLES: dict[str, Any] = {}


def _tables() -> dict[str, Any]:
    if not _TABLES:
        import torch

        #: name in definition.json -> torch dtype (float4_e2m1 is the packed x2 storage type)
        dtypes = {n: getattr(torch, "float4_e2m1fn_x2" if n == "float4_e2m1" else n) for n in DTYPE_NAMES}
        _TABLES.update(
            DTYPES=dtypes,
            FLOAT_DTYPES={torch.float64, torch.float32, torch.float16, torch.bfloat16},
            LOW_PRECISION_FLOAT={torch.float8_e4m3fn, torch.float8_e5m2, torch.float4_e2m1fn_x2})
    return _TABLES


def __getattr__(name: str):
    # DTYPES (name -> torch dtype), FLOAT_DTYPES, LOW_PRECISION_FLOAT: built with torch on first use
    if name in ("DTYPES", "FLOAT_DTYPES", "LOW_PRECISION_FLOAT"):
        return _tables()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def to_torch(name: str) -> torch.dtype:
    """Map a format dtype name to a torch dtype. Raises KeyError for unknown names."""
    return _tables()["DTYPES"][name]


def name_of(dtype: torch.dtype) -> str:
    """Inverse of :func:`to_torch` (canonical name)."""
    for k, v in _tables()["DTYPES"].items():
        if v == dtype and k != "float4_e2m1":
            return k
    return str(dtype).replace("torch.", "")


def is_float(dtype: torch.dtype) -> bool:
    """True for dtypes compared numerically with tolerances (fp8/fp4 included)."""
    return dtype.is_floating_point or dtype in _tables()["LOW_PRECISION_FLOAT"]


def element_bytes(dtype: torch.dtype) -> float:
    """Storage bytes per stored element (packed fp4: 1 byte = 2 values)."""
    import torch

    return torch.empty((), dtype=dtype).element_size() if dtype != torch.bool else 1
