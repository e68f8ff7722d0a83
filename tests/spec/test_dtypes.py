"""spec.dtypes: the torch-free storage widths agree with torch's, and choosing workloads by
size (``--limit``, ``--max-bytes``) starts no torch import (it runs before the parent's, and
decides whether the SOL counting child starts at once)."""

import json
import subprocess
import sys
from pathlib import Path

import torch

from solbench.spec import dtypes

SRC = Path(dtypes.__file__).resolve().parents[2]


def test_storage_bytes_are_torchs_element_sizes():
    assert set(dtypes.STORAGE_BYTES) == set(dtypes.DTYPE_NAMES)
    for name in dtypes.DTYPE_NAMES:
        dt = dtypes.to_torch(name)
        assert dtypes.STORAGE_BYTES[name] == torch.empty((), dtype=dt).element_size(), name
        assert dtypes.STORAGE_BYTES[name] == dtypes.element_bytes(dt), name


CHOOSE = r"""
import json, sys
from solbench.spec.problem import load_problem
from solbench.cli.common import choose_workloads
p = load_problem(sys.argv[1])
small = choose_workloads(p, limit=1)
fits = choose_workloads(p, max_bytes=p.workload_bytes(p.workloads[0]))
print(json.dumps({"torch": "torch" in sys.modules, "small": [w.uuid for w in small],
                  "fits": [w.uuid for w in fits]}))
"""


def test_choosing_workloads_by_size_imports_no_torch(tmp_path):
    # a bf16 x [n, 8] and an fp4 (packed: one byte a stored element) y [n, 4] in, fp32 z [n] out:
    # 16n + 4n + 4n = 24n bytes a workload
    d = {"name": "mix", "axes": {"n": {"type": "var"}},
         "inputs": {"x": {"shape": ["n", 8], "dtype": "bfloat16"}, "y": {"shape": ["n", 4], "dtype": "float4_e2m1"}},
         "outputs": {"z": {"shape": ["n"], "dtype": "float32"}},
         "reference": "import torch\n\ndef run(x, y):\n    return x.float().sum(-1)\n"}
    (tmp_path / "definition.json").write_text(json.dumps(d))
    wls = [{"uuid": f"w{n}", "axes": {"n": n}, "inputs": {"x": {"type": "random"}, "y": {"type": "random"}}}
           for n in (64, 16, 32)]
    (tmp_path / "workload.jsonl").write_text("\n".join(json.dumps(w) for w in wls) + "\n")
    from solbench.spec.problem import load_problem

    p = load_problem(tmp_path)
    assert [p.workload_bytes(w) for w in p.workloads] == [24 * 64, 24 * 16, 24 * 32]
    r = subprocess.run([sys.executable, "-c", CHOOSE, str(tmp_path)], capture_output=True, text=True,
                       timeout=120, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"torch": False, "small": ["w16"], "fits": ["w64", "w16", "w32"]}, out
