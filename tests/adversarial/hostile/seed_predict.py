"""Hostile (output replay through predicted inputs; red team 2026-11-30): rebuilds, at import,
the input sets solbench would generate if its base seed were public (0, the default before
2026-11-30), with solbench's own seed derivation and input generator, tabulates the answers,
and answers every call from the table (zeros on a miss, no computation). Only a secret base
seed defeats it. The re-check after timing (harness/replay.py) repeats the last timed set with
a few signs flipped; the table answers it too: a set that differs from a tabulated one only by
sign flips gets that set's answer with the flipped elements recomputed (the op is
elementwise), a handful of elements, not the call's work."""
import json
import tempfile
from pathlib import Path

import torch

from solbench.inputs.seeds import derived_seed as _seed
from solbench.inputs import make_inputs
from solbench.spec import load_problem

# the problem, as its author was given it (the sandbox shows the worker no problem folder)
_DIR = Path(tempfile.mkdtemp())
(_DIR / "definition.json").write_text(json.dumps({
    "name": "gelu_f32", "op_type": "test",
    "axes": {"m": {"type": "var"}, "k": {"type": "const", "value": 256}},
    "inputs": {"x": {"shape": ["m", "k"], "dtype": "float32"}},
    "outputs": {"out": {"shape": ["m", "k"], "dtype": "float32"}},
    "reference": "import math\nimport torch\n\n\n@torch.no_grad()\ndef run(x):\n"
                 "    c = math.sqrt(2.0 / math.pi)\n"
                 "    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))\n"}))
(_DIR / "workload.jsonl").write_text(json.dumps({
    "uuid": "2d6cff0c-bb3e-5fff-bc69-284d14d85d68", "axes": {"m": 64}, "inputs": {"x": {"type": "random"}},
    "tolerance": {"max_atol": 0.01, "max_rtol": 0.01, "required_matched_ratio": 0.99}, "tags": ["cpu"]}) + "\n")
_P = load_problem(_DIR)
_TABLE = {}
_ROWS = []  # (input set, answer): for the sets one sign flip per few thousand values away
_SETS = [(r, "upstream") for r in list(range(8)) + list(range(1001, 1001 + 80))]
# the strict and stress rounds' sets, and the sparse stress set of the re-check after timing
_SETS += [(500, "strict"), (501, "stress"), (502, "stress_sparse"), (503, "stress_sparse")]
for _j, _w in enumerate(_P.workloads):
    for _r, _profile in _SETS:
        _x = make_inputs(_P, _w, _seed(0, _j, _r), "cpu", profile=_profile)["x"]
        _TABLE[_x.numpy().tobytes()] = _y = _P.make_reference("cpu")(_x)
        _ROWS.append((_x, _y))


def run(x):
    xc = x.detach().cpu().contiguous()
    hit = _TABLE.get(xc.numpy().tobytes())
    if hit is not None:
        return hit.to(x.device).clone()
    for tx, ty in _ROWS:
        diff = tx != xc
        if 0 < int(diff.sum()) <= xc.numel() // 100 and torch.equal(tx[diff], -xc[diff]):
            out = ty.clone()
            out[diff] = _P.make_reference("cpu")(xc[diff])
            return out.to(x.device)
    return torch.zeros_like(x)
