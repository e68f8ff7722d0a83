"""bench/sol_regress.py's comparison reports the largest difference per model/spec, so a
solar-mode change can show that no refined-mode field moved."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _regress():
    path = Path(__file__).resolve().parents[2] / "bench" / "sol_regress.py"
    spec = importlib.util.spec_from_file_location("sol_regress", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_compare_reports_each_model_separately():
    mod = _regress()
    old = {"L1/p": {"u0": {"mode": "meta",
                           "refined/H200": {"sol_ms": 2.0, "terms_ms": {"dram": 2.0}, "bottleneck": "dram"},
                           "solar/B200": {"sol_ms": 4.0, "bytes_model": 100.0, "bottleneck": "dram"}}}}
    new = {"L1/p": {"u0": {"mode": "meta",
                           "refined/H200": {"sol_ms": 2.0, "terms_ms": {"dram": 2.0}, "bottleneck": "dram"},
                           "solar/B200": {"sol_ms": 5.0, "bytes_model": 150.0, "bottleneck": "dram"}}}}
    res = mod.compare(old, new)
    # solar: |5 - 4| / 4 = 0.25, |150 - 100| / 100 = 0.5; refined unchanged
    assert res["per_model"] == {"refined/H200": 0.0, "solar/B200": 0.5}
    assert res["max_rel_diff"] == 0.5
    assert "solar/B200.bytes_model" in res["where"]
    new["L1/p"]["u0"]["refined/H200"]["terms_ms"]["dram"] = 3.0
    assert mod.compare(old, new)["per_model"]["refined/H200"] == 0.5
