"""Fixtures shared by several test folders."""

from __future__ import annotations

import json

import pytest

from solbench.spec import load_problem


@pytest.fixture(autouse=True)
def _no_default_sol_cache(monkeypatch):
    """Tests count afresh unless they turn the default SOL counts cache on themselves (with a
    folder of their own): a count cached by one test would hide another's counting."""
    monkeypatch.setenv("SOLBENCH_SOL_CACHE", "off")


@pytest.fixture
def scale_problem(tmp_path):
    """A factory: ``scale_problem(n, root=None)`` writes and loads ``y = 2 x`` over ``n`` fp32
    elements (one workload ``w0``, random ``x``) under ``root`` (default ``tmp_path``), in a
    folder ``scale``. On the H200: T_SOL = 8n / BW (read x, write y), certain floor
    (4n - L2)+ / BW (the output bytes that cannot stay in L2)."""
    def make(n: int, root=None):
        d = (root or tmp_path) / "scale"
        d.mkdir(parents=True)
        (d / "definition.json").write_text(json.dumps({
            "name": "scale", "axes": {}, "inputs": {"x": {"shape": [n], "dtype": "float32"}},
            "outputs": {"y": {"shape": [n], "dtype": "float32"}},
            "reference": "import torch\ndef run(x):\n    return x * 2\n"}))
        (d / "workload.jsonl").write_text(
            json.dumps({"uuid": "w0", "axes": {}, "inputs": {"x": {"type": "random"}}}) + "\n")
        return load_problem(d)
    return make
