"""Property tests of the DLRM-Bench index generators (solbench.suites.dlrm_inputs)."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from solbench.suites import dlrm_inputs as g

FAST = settings(max_examples=40, deadline=None)


@FAST
@given(n=st.integers(0, 3000), rows=st.integers(1, 5_000_000),
       alpha=st.sampled_from([0, 105, 110, 120]), seed=st.integers(0, 2**31 - 1))
def test_indices_are_valid_rows(n, rows, alpha, seed):
    torch.manual_seed(seed)
    ids = g.sample_indices(n, rows, alpha, "cpu")
    assert ids.dtype == torch.int64 and ids.shape == (n,)
    if n:
        assert int(ids.min()) >= 0 and int(ids.max()) < rows


@FAST
@given(batch=st.integers(1, 400), mean=st.integers(0, 40), fixed=st.booleans(),
       empty_pct=st.integers(0, 60), seed=st.integers(0, 2**31 - 1))
def test_lengths_and_offsets(batch, mean, fixed, empty_pct, seed):
    torch.manual_seed(seed)
    nnz = batch * mean
    lengths = g.bag_lengths(batch, nnz, fixed, empty_pct, "cpu")
    assert lengths.shape == (batch,) and int(lengths.min()) >= 0
    assert int(lengths.sum()) == nnz
    offsets = g.lengths_to_offsets(lengths)
    assert offsets.dtype == torch.int64 and offsets.shape == (batch + 1,)
    assert int(offsets[0]) == 0 and int(offsets[-1]) == nnz
    assert bool((offsets[1:] >= offsets[:-1]).all())
    if empty_pct > 0 and batch > 1:
        expect = min(max(1, batch * empty_pct // 100), batch - 1)
        assert int((lengths == 0).sum()) >= expect
    if fixed and empty_pct == 0:
        assert int(lengths.max()) - int(lengths.min()) <= 1


@FAST
@given(batch=st.integers(1, 200), mean=st.integers(1, 20), rows=st.integers(1, 10_000),
       seed=st.integers(0, 2**31 - 1))
def test_edge_cases_planted(batch, mean, rows, seed):
    torch.manual_seed(seed)
    lengths = g.bag_lengths(batch, batch * mean, False, 0, "cpu")
    ids = g.sample_indices(batch * mean, rows, 110, "cpu")
    g.plant_edge_cases(ids, lengths, rows)
    assert int(ids[-1]) == rows - 1 and int(ids.max()) == rows - 1
    offs = g.lengths_to_offsets(lengths)
    long_bags = torch.nonzero(lengths >= 2).flatten()
    if long_bags.numel():
        s = int(offs[int(long_bags[0])])
        if s + 1 < ids.numel() - 1:  # the repeat's second slot is not the max-id slot
            assert int(ids[s]) == int(ids[s + 1])
        else:  # one slot for both edge cases (e.g. one bag of two ids): the max id wins there
            assert int(ids[s + 1]) == rows - 1


def test_zipf_skew_is_measurable():
    """Fitted log-log slope of counts vs rank: about -alpha for Zipf, about 0 for uniform;
    the hottest 1% of rows take far more than 1% of the draws."""
    rows, n = 100_000, 400_000
    torch.manual_seed(0)
    for alpha in (105, 120):
        ids = g.sample_indices(n, rows, alpha, "cpu")
        slope = g.zipf_slope(ids, rows, top=300)
        assert abs(slope + alpha / 100) < 0.15, (alpha, slope)
        counts = torch.sort(torch.bincount(ids, minlength=rows), descending=True).values
        assert float(counts[: rows // 100].sum()) / n > 0.4
    uni = g.sample_indices(n, rows, 0, "cpu")
    assert abs(g.zipf_slope(uni, rows, top=300)) < 0.2
    counts = torch.sort(torch.bincount(uni, minlength=rows), descending=True).values
    assert float(counts[: rows // 100].sum()) / n < 0.03


def test_zipf_hot_rows_are_scattered():
    """The rank -> row map is a bijection, so hot rows are not packed at the table's start."""
    rows = 1000
    ranks = torch.arange(rows)
    mapped = (ranks * 2654435761) % rows
    assert torch.equal(torch.sort(mapped).values, ranks)
    torch.manual_seed(1)
    ids = g.sample_indices(50_000, rows, 120, "cpu")
    top = torch.topk(torch.bincount(ids, minlength=rows), 10).indices
    assert int(top.max()) > 100


def test_embedding_table_is_unit_scale():
    torch.manual_seed(0)
    w = g.embedding_table(4096, 64, torch.bfloat16, "cpu")
    assert w.dtype == torch.bfloat16 and w.shape == (4096, 64)
    assert 0.9 < float(w.float().std()) < 1.1


def test_generator_text_is_in_every_reference(problems):
    import inspect

    for p in problems.values():
        for f in g.GENERATOR_FUNCTIONS:
            assert inspect.getsource(f) in p.definition.reference, (p.name, f.__name__)
