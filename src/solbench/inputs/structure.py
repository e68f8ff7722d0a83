"""Valid values for integer inputs that a workload gives no values for.

Upstream's generator draws every integer input from ``int_uniform`` ([-1024, 1024)), which is
no valid index: negative, and past the end of the tensor it indexes. A SOL-ExecBench workload
that needs valid indices ships them (a safetensors blob of the trace it was taken from) or makes
them in its custom-inputs entrypoint, so the harness never needs more. A consumer that must run
a reference on such a workload *without* its blob (the SOL counter's real-tensor run, where the
dev dataset ships no blobs) gives those inputs values here, by name:

- ``<prefix>indptr`` (1-D, n + 1 elements): offsets spread evenly, ``round(i * total / n)``
  for i = 0..n, over ``total`` = the element count of ``<prefix>indices`` when the values hold
  one, else the first dimension of the tensor named ``<prefix>`` without its trailing ``_``, or
  of the one named by its first letter (``qo_indptr`` -> ``q``), or the one first dimension
  shared by every floating tensor named ``<first letter>_*`` (``qo_indptr`` -> ``q_nope`` and
  ``q_pe`` of an MLA prefill, FlashInfer-Bench 019, whose reference asserts
  ``qo_indptr[-1] == total_q``); zeros (every segment empty) when none is there.
- ``*indices``, ``*_idx``, ``*ids``: ``arange(numel) % bound``, ``bound`` = the smallest first
  dimension among the floating-point tensors of the values (whatever such an index reads, it
  stays in range); zeros when there is none.
- any other integer input: zeros. Nothing in a definition without roles tells an index from
  a count; zero is in range of every non-empty dimension, an empty segment, a count of none.

Inputs with a declared role (``index:<axis>``, :mod:`solbench.inputs.rules`) are already valid
and are never passed here. The rule is the one the SOL counter has used since its first
version; the bounds of bench/results/sol_bounds_*.json were counted with it.
"""

from __future__ import annotations

from typing import Iterable

import torch


def is_index_name(name: str) -> bool:
    """An offsets (``*indptr``) or index (``*indices``, ``*_idx``, ``*ids``) input by name."""
    return name.endswith(("indptr", "indices", "_idx", "ids"))


def _split_total(values: dict, letter: str) -> int | None:
    """The first dimension every floating tensor named ``<letter>_*`` shares (a query split in
    parts, ``q_nope`` + ``q_pe``), None when there is no such tensor or they disagree."""
    if not letter:
        return None
    dims = {v.shape[0] for k, v in values.items()
            if k.startswith(letter + "_") and isinstance(v, torch.Tensor)
            and v.dtype.is_floating_point and v.dim() > 0}
    return dims.pop() if len(dims) == 1 else None


def synthesize_indices(values: dict, names: Iterable[str]) -> list[str]:
    """Give the integer inputs ``names`` of ``values`` (name -> tensor or scalar, changed in
    place) valid offsets, index or zero values by the rules of the module doc; the tensors
    keep their shapes and dtypes. Other names (floating, bool, scalars) are left alone.

    Args:
        values: every input of the workload (the floating ones give the index bounds).
        names: inputs whose values the workload does not give.

    Returns:
        The index and offsets inputs given synthesized values (those whose rule found a total
        or a bound), in the order of ``names``; every other integer input of ``names`` is
        zeros.
    """
    done: list[str] = []
    for k in names:
        t = values.get(k)
        if not isinstance(t, torch.Tensor) or t.dtype.is_floating_point \
                or t.dtype in (torch.bool, torch.float4_e2m1fn_x2):
            continue
        if t.numel() == 0 or not is_index_name(k):
            values[k] = torch.zeros_like(t)
            continue
        if k.endswith("indptr"):
            prefix = k[: -len("indptr")]
            total = None
            if isinstance(values.get(prefix + "indices"), torch.Tensor):
                total = values[prefix + "indices"].numel()
            else:
                for cand in (prefix.rstrip("_"), prefix[:1]):
                    if cand and isinstance(values.get(cand), torch.Tensor) and values[cand].dim() > 0:
                        total = values[cand].shape[0]
                        break
                else:
                    total = _split_total(values, prefix[:1])
            if total is not None and t.dim() == 1:
                n = t.numel() - 1
                values[k] = torch.tensor([round(i * total / max(n, 1)) for i in range(n + 1)], dtype=t.dtype)
                done.append(k)
            else:
                values[k] = torch.zeros_like(t)
        else:
            bound = None
            for other, ov in values.items():
                if other != k and isinstance(ov, torch.Tensor) and ov.dtype.is_floating_point and ov.dim() > 0:
                    bound = ov.shape[0] if bound is None else min(bound, ov.shape[0])
            if bound:
                values[k] = (torch.arange(t.numel()) % bound).to(t.dtype).reshape(t.shape)
                done.append(k)
            else:
                values[k] = torch.zeros_like(t)
    return done
