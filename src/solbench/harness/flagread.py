"""The precision-relevant backend flags, read through torch's C functions bound at import.

Why not through ``torch.backends`` or a table of Python readers: every Python level between
the worker and torch's C++ ``at::Context`` can be rebound by a candidate in the same
process, and the red team of issue 30 did it: it lowered the fp32 matmul precision, then
replaced the entries of the worker's reader table (a plain dict) with functions returning
the old values, so every reading showed the default flags and a precision downgrade read as
a plain numerical error. The same blinding works one level down (``torch.get_float32_matmul_precision``,
``torch.backends.cuda.matmul``'s ``__getattr__``, the ``torch._C._get_*`` attributes).

Here the C getters (``builtin_function_or_method`` objects, immutable) are bound once, when
this module is imported, which in the worker is before any candidate code exists; they are
kept in a tuple that is the default argument of :func:`backend_flags`, and the function's
body looks up no global or builtin name (the few builtins it needs are defaults too). A
candidate that rebinds ``torch._C._get_float32_matmul_precision`` or any Python reader
changes nothing read here; one that replaces :func:`backend_flags` itself, its code object
or its defaults tuple is seen by the worker's snapshot and by the parent's read of the
worker's memory (:mod:`.memguard`: ``func_code`` and ``func_defaults`` of each guarded
function). What remains is the reply that carries the reading (docs/threats.md, "Red team of
issue 30": the reply channel).

Flags and their C getters (torch >= 2.1; the ``fp32_precision`` ones torch >= 2.9, left out
where the getter does not exist): ``float32_matmul_precision`` (``_get_float32_matmul_precision``,
"highest" / "high" / "medium"), ``cuda.matmul.allow_tf32`` (``_get_cublas_allow_tf32``),
``cudnn.allow_tf32`` (``_get_cudnn_allow_tf32``), the reduced-precision reductions
(``_get_cublas_allow_{fp16,bf16}_reduced_precision_reduction``, a bool or, in newer torch,
(allowed, split-k allowed): the first is the flag), and ``_get_fp32_precision_getter(backend,
op)`` for ("generic", "all"), ("cuda", "matmul"), ("cuda", "all"), ("cuda", "conv"),
("cuda", "rnn"), the arguments ``torch.backends`` itself passes.
"""

from __future__ import annotations

from typing import Any

import torch

#: flag name -> (C getter's name in ``torch._C``, its arguments)
FLAGS: tuple[tuple[str, str, tuple], ...] = (
    ("float32_matmul_precision", "_get_float32_matmul_precision", ()),
    ("cuda.matmul.allow_tf32", "_get_cublas_allow_tf32", ()),
    ("cudnn.allow_tf32", "_get_cudnn_allow_tf32", ()),
    ("cuda.matmul.allow_fp16_reduced_precision_reduction", "_get_cublas_allow_fp16_reduced_precision_reduction", ()),
    ("cuda.matmul.allow_bf16_reduced_precision_reduction", "_get_cublas_allow_bf16_reduced_precision_reduction", ()),
    ("fp32_precision", "_get_fp32_precision_getter", ("generic", "all")),
    ("cuda.matmul.fp32_precision", "_get_fp32_precision_getter", ("cuda", "matmul")),
    ("cudnn.fp32_precision", "_get_fp32_precision_getter", ("cuda", "all")),
    ("cudnn.conv.fp32_precision", "_get_fp32_precision_getter", ("cuda", "conv")),
    ("cudnn.rnn.fp32_precision", "_get_fp32_precision_getter", ("cuda", "rnn")),
)


def _bind() -> tuple[tuple[str, Any, tuple], ...]:
    """(flag, C getter, args) for every getter of :data:`FLAGS` this torch has as a C
    function (anything else, e.g. a getter already rebound to Python, is left out)."""
    out = []
    for name, fn, args in FLAGS:
        f = getattr(torch._C, fn, None)
        if type(f).__name__ == "builtin_function_or_method":
            out.append((name, f, args))
    return tuple(out)


#: the C getters as this module found them at import
READERS = _bind()


def backend_flags(_readers=READERS, _tuple=tuple, _bool=bool, _str=str, _type=type, _exc=Exception) -> dict[str, Any]:
    """Precision-relevant backend flags: name -> value (a str for the precision settings, a
    bool for the ``allow_*`` switches); a flag this torch lacks is left out, one whose read
    raises (torch refuses a legacy read once the legacy and the fp32_precision APIs were
    mixed) is ``"unreadable: <error>"``. Never raises. The keyword arguments are the bound
    readers and builtins (module doc): never pass them."""
    out: dict[str, Any] = {}
    for name, fn, args in _readers:
        try:
            v = fn(*args)
        except _exc as e:  # noqa: BLE001 - mixed legacy/new TF32 APIs raise RuntimeError
            out[name] = "unreadable: " + _type(e).__name__ + ": " + _str(e)[:120]
            continue
        if _type(v) is _tuple:  # (allowed, split-k allowed) of the reduced-precision reductions
            v = v[0] if v else None
        out[name] = _bool(v) if _type(v) is not _str and v is not None else v
    return out
