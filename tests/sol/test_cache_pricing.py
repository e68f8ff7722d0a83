"""A bound priced from a cache entry equals the bound of the count it was made from.

The entry keeps the solar model's three figures (:class:`~solbench.sol.solar_graph.SolarTotals`),
not the layer graph; pricing must not tell the difference. Checked on real SOL-ExecBench dev
problems whose solar bound reads each figure: a paged KV-cache decode (a gather through a
converted cache: fused elements), a fp8 MLP (GEMM weights at 2 B: weight-root elements) and a
projection (MACs), on both models and two GPUs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solbench.sol import bound_from_counts, count_workload, load_hardware
from solbench.sol.cache import counts_from_json, counts_to_json
from solbench.spec import load_problem

DEV = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "sol-execbench-dev"
CASES = ["FlashInfer-Bench/012_gqa_paged_decode_h32_kv4_d128_ps1", "Quant/017_fp8_shared_expert_mlp",
         "L1/077_whisper_decoder_output_projection"]


@pytest.mark.skipif(not DEV.exists(), reason="../shared/datasets/sol-execbench-dev not present")
@pytest.mark.parametrize("rel", CASES)
def test_cached_count_prices_like_the_fresh_count(rel):
    p = load_problem(DEV / rel)
    w = p.smallest_workloads(1)[0]
    c = count_workload(p, w)
    assert c.solar_graph is not None and c.solar_graph.layers
    back = counts_from_json(json.loads(json.dumps(counts_to_json(c))))
    assert back.solar_graph is None
    for hw in ("B200", "H100_SXM"):
        for model in ("solar", "refined"):
            a = bound_from_counts(c, load_hardware(hw), model, workload_uuid=w.uuid, axes=w.axes).to_json()
            b = bound_from_counts(back, load_hardware(hw), model, workload_uuid=w.uuid, axes=w.axes).to_json()
            assert a == b, (rel, hw, model)
    t = back.solar()
    assert (t.macs, t.fused_elements, t.weight_root_elements) == (
        c.solar_graph.macs(), c.solar_graph.fused_elements(), c.solar_graph.weight_root_elements())
