"""Causal attention called as an aten op (the reference of an exported graph, `solbench
extract`'s) is counted as F.scaled_dot_product_attention is: the masked query-key pairs are
no required work. Before, the aten op decomposed into full matmuls (meta) or counted the fused
CPU kernel in full, so T_SOL was about twice what a kernel that skips masked blocks needs: a
bound an honest kernel beats."""

from __future__ import annotations

import json

import pytest

from solbench.sol import count_workload
from solbench.spec import load_problem

B, H, L, E = 2, 4, 64, 32

REFS = {
    "functional": "import torch\ndef run(q, k, v):\n"
                  "    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)\n",
    "aten": "import torch\ndef run(q, k, v):\n"
            "    return torch.ops.aten.scaled_dot_product_attention.default(q, k, v, is_causal=True)\n",
    "aten_kwargs": "import torch\ndef run(q, k, v):\n"
                   "    return torch.ops.aten.scaled_dot_product_attention.default(q, k, v, None, 0.0, True)\n",
    "fused_cpu": "import torch\ndef run(q, k, v):\n"
                 "    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v, 0.0, True)[0]\n",
}


def _problem(tmp_path, name: str, ref: str):
    d = tmp_path / name
    d.mkdir()
    t = {"shape": [B, H, L, E], "dtype": "float32"}
    (d / "definition.json").write_text(json.dumps({
        "name": name, "axes": {}, "inputs": {"q": t, "k": t, "v": t}, "outputs": {"o": t}, "reference": ref}))
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": {}, "inputs": {
        n: {"type": "random"} for n in "qkv"}}) + "\n")
    return load_problem(d)


@pytest.mark.parametrize("name", sorted(REFS))
def test_causal_attention_counts_the_kept_pairs_however_it_is_called(tmp_path, name):
    p = _problem(tmp_path, name, REFS[name])
    c = count_workload(p, p.workloads[0])
    # hand-worked: query i sees keys 0..i, 64 * 65 / 2 = 2080 kept pairs of 4096; each kept
    # pair costs QK^T (E MACs) and PV (E MACs): 2 FLOP per MAC
    kept = B * H * (L * (L + 1) // 2) * 2 * (E + E)
    full = B * H * L * L * 2 * (E + E)
    assert kept == 8 * 2080 * 128 and full == 8 * 4096 * 128
    assert sum(c.mma_flops.values()) == pytest.approx(kept)
    assert sum(c.mma_flops_full.values()) == pytest.approx(full)
