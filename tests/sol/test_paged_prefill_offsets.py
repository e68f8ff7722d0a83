"""Paged-attention prefills whose query is split in parts (MLA: ``q_nope`` + ``q_pe``) and whose
offsets blob is absent: ``qo_indptr`` must end at the query count the reference asserts
(FlashInfer-Bench 019_mla_paged_prefill_causal_h16_ckv512_kpe64_ps1 asserts
``total_q == qo_indptr[-1].item()``; with ``qo_indptr`` zeros, none of its 38 workloads had a
bound). solbench.inputs.structure's rule: the first dimension every floating ``q_*`` tensor
shares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from solbench.inputs.structure import synthesize_indices
from solbench.sol import bound_from_counts, count_workload, load_hardware
from solbench.spec import load_problem


def test_split_query_gives_the_offsets_total():
    # q_nope [6, 4] and q_pe [6, 2] share 6 rows: 2 segments -> [0, 3, 6]; kv_indptr spreads
    # over kv_indices' 8 elements -> [0, 4, 8]; kv_indices arange % 6 (the smallest float
    # first dim: q's 6 rows, the cache's 10)
    v = {"q_nope": torch.zeros(6, 4), "q_pe": torch.zeros(6, 2), "ckv": torch.zeros(10, 4),
         "qo_indptr": torch.zeros(3, dtype=torch.int32), "kv_indptr": torch.zeros(3, dtype=torch.int32),
         "kv_indices": torch.zeros(8, dtype=torch.int32)}
    done = synthesize_indices(v, ["qo_indptr", "kv_indptr", "kv_indices"])
    assert done == ["qo_indptr", "kv_indptr", "kv_indices"]
    assert v["qo_indptr"].tolist() == [0, 3, 6]
    assert v["kv_indptr"].tolist() == [0, 4, 8]
    assert v["kv_indices"].tolist() == [0, 1, 2, 3, 4, 5, 0, 1]


def test_parts_that_disagree_give_no_total():
    # q_a [6, 4] and q_b [5, 4]: no one query count, so the offsets stay zeros (as before)
    v = {"q_a": torch.zeros(6, 4), "q_b": torch.zeros(5, 4), "qo_indptr": torch.zeros(3, dtype=torch.int32)}
    assert synthesize_indices(v, ["qo_indptr"]) == []
    assert v["qo_indptr"].tolist() == [0, 0, 0]


#: an MLA-shaped prefill in the reference's own style: per sequence, the gathered latent rows
#: K = ckv[kv_indices[ks:ke]] ([4, 4]); logits = q_nope @ K^T + q_pe @ Kp^T, out = logits @ K.
#: Offsets synthesized: qo [0, 3, 6], kv [0, 4, 8]; per sequence 3 queries x 4 keys:
#: q_nope @ K^T 3*4*4 = 48 MACs, q_pe @ Kp^T 3*4*2 = 24, (.) @ K 3*4*4 = 48 -> 120 MACs, two
#: sequences 240 MACs = 480 FLOP.
REF = ("import torch\n"
       "def run(q_nope, q_pe, ckv, kpe, qo_indptr, kv_indptr, kv_indices):\n"
       "    assert q_nope.shape[0] == qo_indptr[-1].item()\n"
       "    out = torch.zeros_like(q_nope)\n"
       "    for b in range(qo_indptr.shape[0] - 1):\n"
       "        s, e = int(qo_indptr[b].item()), int(qo_indptr[b + 1].item())\n"
       "        ks, ke = int(kv_indptr[b].item()), int(kv_indptr[b + 1].item())\n"
       "        idx = kv_indices[ks:ke].to(torch.long)\n"
       "        k, kp = ckv[idx], kpe[idx]\n"
       "        logits = q_nope[s:e] @ k.T + q_pe[s:e] @ kp.T\n"
       "        out[s:e] = logits @ k\n"
       "    return out\n")


def test_mla_prefill_with_absent_offsets_is_counted(tmp_path: Path):
    d = tmp_path / "mla"
    d.mkdir()
    f32 = "float32"
    inputs = {"q_nope": {"shape": [6, 4], "dtype": f32}, "q_pe": {"shape": [6, 2], "dtype": f32},
              "ckv": {"shape": [10, 4], "dtype": f32}, "kpe": {"shape": [10, 2], "dtype": f32},
              "qo_indptr": {"shape": [3], "dtype": "int32"}, "kv_indptr": {"shape": [3], "dtype": "int32"},
              "kv_indices": {"shape": [8], "dtype": "int32"}}
    (d / "definition.json").write_text(json.dumps({
        "name": "mla", "axes": {}, "inputs": inputs,
        "outputs": {"out": {"shape": [6, 4], "dtype": f32}}, "reference": REF}))
    blob = {"type": "safetensors", "path": "blobs/absent.safetensors"}
    srcs = {k: {"type": "random"} for k in inputs} | {
        k: dict(blob, tensor_key=k) for k in ("qo_indptr", "kv_indptr", "kv_indices")}
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": {}, "inputs": srcs}) + "\n")
    p = load_problem(d)
    c = count_workload(p, p.workloads[0])
    assert c.real_tensors
    assert c.synthesized == ["qo_indptr", "kv_indptr", "kv_indices"]
    assert sum(c.mma_flops.values()) == 480
    b = bound_from_counts(c, load_hardware("B200_SOLAR"), "solar")
    assert b.solar_macs == 240
