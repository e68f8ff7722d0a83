"""Classification rules on trimmed real traces recorded on the H200.

``fixtures/h200_traces.json`` is bench/profile_device.py's ``profile_fixtures.json`` (the top
kernel groups of every workload x mode at full scale: kernel name, launching aten ops, phase,
tags, microseconds per step). Each kernel's family is checked against an oracle that reads
the name's library prefix only (independent of the ordered rules), unknown time must stay
under 1% per run, and every workload must show the kernels its architecture implies.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from solbench.profile.classify import CLASSES, classify_kernel

FIXTURE = Path(__file__).parent / "fixtures" / "h200_traces.json"

pytestmark = pytest.mark.skipif(not FIXTURE.is_file(), reason=f"no recorded H200 traces at {FIXTURE} "
                                "(copy bench/profile_device.py's profile_fixtures.json there)")


def _rows():
    return json.loads(FIXTURE.read_text())["rows"]


def _context(row):
    return (["Optimizer.step"] if row["phase"] == "optimizer" else [])


def _oracle(kernel: str) -> str | None:
    """Family from the library prefix of the name alone; None when the prefix does not say."""
    k = re.sub(r"^void\s+", "", kernel)
    if k.startswith(("Memcpy", "Memset")):
        return "copy_engine"
    if k.startswith("triton_"):
        return "generated"
    if k.startswith(("at::native::", "at_cuda_detail::", "at::cuda::", "cub::", "thrust::")):
        return "framework_native"
    if k.startswith("nvjet_") or "cublas" in k.lower():
        return "gemm"
    if k.startswith(("pytorch_flash::", "fmha_")) or "_sdpa_" in k:
        return "attention"
    if k.startswith("nccl"):
        return "communication"
    return None


def test_fixture_is_small_and_real():
    data = json.loads(FIXTURE.read_text())
    rows = data["rows"]
    assert 50 <= len(rows) <= 1000
    assert "H200" in data["device"]
    assert {"kernel", "ops", "phase", "us_per_step"} <= set(rows[0])


def test_every_recorded_kernel_classifies_as_its_library():
    bad = []
    for r in _rows():
        c = classify_kernel(r["kernel"], r["ops"], _context(r))
        assert c.cls in CLASSES
        want = _oracle(r["kernel"])
        if want is not None and c.cls != want:
            bad.append((r["workload"], r["kernel"][:90], c.cls, want))
    assert not bad, bad[:10]


def test_unknown_under_one_percent_per_run():
    tot, unk = defaultdict(float), defaultdict(float)
    for r in _rows():
        key = (r["workload"], r["mode"])
        tot[key] += r["us_per_step"]
        if classify_kernel(r["kernel"], r["ops"], _context(r)).cls == "unknown":
            unk[key] += r["us_per_step"]
    over = {k: unk[k] / tot[k] for k in tot if tot[k] and unk[k] / tot[k] > 0.01}
    assert not over, over


def test_rules_still_give_the_recorded_classes():
    drift = [(r["kernel"][:80], r["recorded_cls"], c.cls) for r in _rows()
             if (c := classify_kernel(r["kernel"], r["ops"], _context(r))).cls != r["recorded_cls"]]
    assert not drift, drift[:10]


def test_workloads_show_their_architecture():
    seen = defaultdict(set)
    for r in _rows():
        c = classify_kernel(r["kernel"], r["ops"], _context(r))
        seen[r["workload"]].add(c.cls)
        if c.subclass:
            seen[r["workload"]].add("native:" + c.subclass)
    expect = {
        "llama-1b": {"gemm", "attention"}, "llama-8b": {"gemm"}, "bert-base": {"gemm"}, "vit-b16": {"gemm"},
        "dit-block": {"gemm"}, "resnet50": {"convolution"}, "dlrm-kaggle": {"native:embedding"},
        "dlrm-v2": {"native:embedding"}, "dcnv2": {"native:embedding"},
    }
    for w, classes in expect.items():
        if w in seen:
            assert classes <= seen[w], (w, seen[w])
