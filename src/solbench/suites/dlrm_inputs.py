"""Index and table generators for DLRM-Bench (the ``dlrm`` suite).

Every DLRM-Bench problem is self-contained: its reference source carries the text of the
generator functions it uses (``build_dlrm.py`` copies them with :func:`inspect.getsource`),
so the functions here must only use ``torch`` and must not call one another
through this module's name. They draw from torch's global RNG: the caller seeds it
(``torch.manual_seed``) as the custom-input protocol of formats.md prescribes.

Distributions
-------------
- Uniform: row ids uniform over ``[0, num_rows)``.
- Zipf (``alpha_x100 > 0``, alpha = alpha_x100 / 100, typically 1.05-1.2): the rank of a draw
  follows a truncated power law P(rank = k) ~ (k + 1)^-alpha, sampled by inverting the CDF of
  the continuous power law on ``[1, num_rows + 1)`` (float64) and flooring. Ranks are then
  spread over the table by the bijection ``row = (rank * 2654435761) mod num_rows``
  (2654435761 is prime, so the map is a permutation for any num_rows < 2654435761), so hot
  rows are scattered as after feature hashing rather than packed at the table's start.

Edge cases (``plant_edge_cases``): the largest valid index ``num_rows - 1`` appears, one bag
of length >= 2 holds a repeated index, and ``bag_lengths(..., empty_pct)`` empties that
percentage of bags (at least one when empty_pct > 0) while keeping the total nnz fixed.

Public configurations (row counts per sparse feature):
- ``CRITEO_KAGGLE_ROWS``: Criteo Kaggle Display Advertising (26 features; counts of the
  dataset as processed by facebookresearch/dlrm), embedding dim 16, 13 dense features.
- ``CRITEO_TERABYTE_ROWS``: Criteo 1TB click logs with the MLPerf DLRM v1 setting
  ``--max-ind-range=40000000``, embedding dim 128.
- ``DLRMV2_ROWS`` / ``DLRMV2_POOLING``: MLPerf DLRMv2 (DCNv2, Criteo 1TB multi-hot) row
  counts and multi-hot sizes (pooling factors), embedding dim 128.
"""

from __future__ import annotations

import torch

CRITEO_KAGGLE_ROWS = [
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27,
    14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
]
CRITEO_TERABYTE_ROWS = [
    39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346, 10,
    2208, 11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972, 108, 36,
]
DLRMV2_ROWS = [
    40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10,
    2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36,
]
DLRMV2_POOLING = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]

#: config id (a workload axis) -> (rows per table, pooling per table, embedding dim)
CONFIGS = {
    0: ("criteo_kaggle", CRITEO_KAGGLE_ROWS, [1] * 26, 16),
    1: ("criteo_terabyte", CRITEO_TERABYTE_ROWS, [1] * 26, 128),
    2: ("mlperf_dlrmv2", DLRMV2_ROWS, DLRMV2_POOLING, 128),
}


def sample_indices(n, num_rows, alpha_x100, device):
    """Draw ``n`` row ids in ``[0, num_rows)`` (int64, on ``device``).

    ``alpha_x100 == 0``: uniform. Otherwise Zipf with alpha = alpha_x100 / 100: rank k has
    probability about (k + 1)^-alpha (inverse CDF of the continuous power law on
    [1, num_rows + 1), float64), ranks mapped to rows by ``(rank * 2654435761) % num_rows``.

    Raises ValueError when num_rows < 1 or n < 0.
    """
    if num_rows < 1 or n < 0:
        raise ValueError(f"need num_rows >= 1 and n >= 0, got {num_rows}, {n}")
    if alpha_x100 <= 0:
        return torch.randint(0, num_rows, (n,), device=device, dtype=torch.int64)
    a = alpha_x100 / 100.0
    u = torch.rand(n, device=device, dtype=torch.float64)
    top = float(num_rows + 1)
    if abs(a - 1.0) < 1e-9:
        x = torch.pow(top, u)
    else:
        c = 1.0 - top ** (1.0 - a)
        x = torch.pow(1.0 - u * c, 1.0 / (1.0 - a))
    ranks = (torch.floor(x) - 1).to(torch.int64).clamp_(0, num_rows - 1)
    return (ranks * 2654435761) % num_rows


def bag_lengths(batch, nnz, fixed, empty_pct, device):
    """Lengths of ``batch`` bags summing to exactly ``nnz`` (int64 [batch], all >= 0).

    ``fixed``: every bag gets nnz // batch (the first nnz % batch bags one more), as in the
    MLPerf DLRMv2 fixed multi-hot sizes. Otherwise bag boundaries are ``batch - 1`` uniform
    cut points in [0, nnz] (lengths spread around the mean nnz / batch, some possibly 0).
    ``empty_pct`` (0-99): that share of bags (at least one when > 0) is emptied, their ids
    handed round-robin to the remaining bags so the total stays ``nnz``.
    """
    if batch < 1 or nnz < 0 or not 0 <= empty_pct < 100:
        raise ValueError(f"bad bag_lengths arguments batch={batch} nnz={nnz} empty_pct={empty_pct}")
    if fixed:
        lengths = torch.full((batch,), nnz // batch, dtype=torch.int64, device=device)
        lengths[: nnz % batch] += 1
    else:
        cuts = torch.randint(0, nnz + 1, (batch - 1,), device=device, dtype=torch.int64)
        bounds = torch.cat([
            torch.zeros(1, dtype=torch.int64, device=device),
            torch.sort(cuts).values,
            torch.full((1,), nnz, dtype=torch.int64, device=device),
        ])
        lengths = bounds[1:] - bounds[:-1]
    if empty_pct > 0 and batch > 1:
        n_empty = max(1, batch * empty_pct // 100)
        n_empty = min(n_empty, batch - 1)
        perm = torch.randperm(batch, device=device)
        empty, keep = perm[:n_empty], perm[n_empty:]
        moved = int(lengths[empty].sum().item())
        lengths[empty] = 0
        k = keep.numel()
        lengths[keep] += moved // k
        lengths[keep[: moved % k]] += 1
    return lengths


def lengths_to_offsets(lengths):
    """Offsets [len(lengths) + 1] int64: 0, then the running sum (last = nnz)."""
    zero = torch.zeros(1, dtype=torch.int64, device=lengths.device)
    return torch.cat([zero, torch.cumsum(lengths.to(torch.int64), 0)])


def plant_edge_cases(indices, lengths, num_rows):
    """In place on ``indices`` (int64 [nnz], bags given by ``lengths``): the last id becomes
    ``num_rows - 1`` (the max index) and the first bag of length >= 2 repeats its first id.
    Returns ``indices``. Does nothing where there is no room (nnz == 0, no bag of length 2).
    """
    n = indices.numel()
    if n == 0:
        return indices
    offsets = torch.cat([
        torch.zeros(1, dtype=torch.int64, device=lengths.device),
        torch.cumsum(lengths.to(torch.int64), 0),
    ])
    long_bags = torch.nonzero(lengths >= 2).flatten()
    if long_bags.numel() > 0:
        start = int(offsets[int(long_bags[0].item())].item())
        indices[start + 1] = indices[start]
    indices[n - 1] = num_rows - 1
    return indices


def embedding_table(num_rows, dim, dtype, device):
    """An embedding table [num_rows, dim] of N(0, 1) values in ``dtype``.

    Deliberately not DLRM's init U(-1/sqrt(rows), 1/sqrt(rows)): with millions of rows that
    makes every pooled output ~1e-3, small enough that an all-zeros output passes an
    absolute tolerance (threats.md). Unit-scale rows keep the checks meaningful.
    """
    return torch.randn(num_rows, dim, device=device, dtype=torch.float32).to(dtype)


def capped_rows(rows, cap):
    """Per-table row counts capped at ``cap`` (DLRM's ``--max-ind-range``: ids are taken
    modulo the cap, so a table never needs more rows than that)."""
    return [min(int(r), int(cap)) for r in rows]


#: functions copied into reference sources, in dependency order
GENERATOR_FUNCTIONS = [
    sample_indices, bag_lengths, lengths_to_offsets, plant_edge_cases, embedding_table,
    capped_rows,
]


def zipf_slope(indices, num_rows, top=200):
    """Fitted log-log slope of access count against rank for the ``top`` most frequent
    rows (least squares over ranks with a non-zero count). About -alpha for Zipf draws,
    about 0 for uniform ones. Used by the property tests; returns float.
    """
    counts = torch.bincount(indices.cpu(), minlength=num_rows).double()
    c = torch.sort(counts, descending=True).values[:top]
    c = c[c > 0]
    r = torch.arange(1, c.numel() + 1, dtype=torch.float64)
    x, y = torch.log(r), torch.log(c)
    x = x - x.mean()
    return float((x * (y - y.mean())).sum() / (x * x).sum())


__all__ = [
    "CRITEO_KAGGLE_ROWS", "CRITEO_TERABYTE_ROWS", "DLRMV2_ROWS", "DLRMV2_POOLING", "CONFIGS",
    "sample_indices", "bag_lengths", "lengths_to_offsets", "plant_edge_cases",
    "embedding_table", "capped_rows", "GENERATOR_FUNCTIONS", "zipf_slope",
]
