"""Dtype names of the SOL-ExecBench format and their torch equivalents.

Element widths are storage widths in bytes; the packed fp4 format stores two e2m1 values
per byte, and its declared shapes already count bytes (the last dim is halved), so one
element of ``float4_e2m1fn_x2`` is 1 byte holding 2 values. Source: formats.md.
"""

from __future__ import annotations

import torch

#: name in definition.json -> torch dtype
DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "float4_e2m1": torch.float4_e2m1fn_x2,
    "float4_e2m1fn_x2": torch.float4_e2m1fn_x2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}

FLOAT_DTYPES = {torch.float64, torch.float32, torch.float16, torch.bfloat16}
LOW_PRECISION_FLOAT = {torch.float8_e4m3fn, torch.float8_e5m2, torch.float4_e2m1fn_x2}


def to_torch(name: str) -> torch.dtype:
    """Map a format dtype name to a torch dtype. Raises KeyError for unknown names."""
    return DTYPES[name]


def name_of(dtype: torch.dtype) -> str:
    """Inverse of :func:`to_torch` (canonical name)."""
    for k, v in DTYPES.items():
        if v == dtype and k != "float4_e2m1":
            return k
    return str(dtype).replace("torch.", "")


def is_float(dtype: torch.dtype) -> bool:
    """True for dtypes compared numerically with tolerances (fp8/fp4 included)."""
    return dtype.is_floating_point or dtype in LOW_PRECISION_FLOAT


def element_bytes(dtype: torch.dtype) -> float:
    """Storage bytes per stored element (packed fp4: 1 byte = 2 values)."""
    return torch.empty((), dtype=dtype).element_size() if dtype != torch.bool else 1
