"""Hostile (output replay through predicted inputs; red team 2026-11-30): rebuilds, at import,
the input sets solbench would generate if its base seed were public (0, the default before
2026-11-30), with solbench's own seed derivation and input generator, tabulates the answers,
and answers every call from the table (zeros on a miss, no computation). Only a secret base
seed defeats it."""
from pathlib import Path

import torch

import solbench
from solbench.harness.seeds import derived_seed as _seed
from solbench.inputs import make_inputs
from solbench.spec import load_problem

_P = load_problem(Path(solbench.__file__).resolve().parents[2] / "tests" / "adversarial"
                  / "problems" / "gelu_f32")
_TABLE = {}
_SETS = [(r, "upstream") for r in list(range(8)) + list(range(1001, 1001 + 80))]
# the strict and stress rounds' sets, and the sparse stress set of the re-check after timing
_SETS += [(500, "strict"), (501, "stress"), (502, "stress_sparse"), (503, "stress_sparse")]
for _j, _w in enumerate(_P.workloads):
    for _r, _profile in _SETS:
        _x = make_inputs(_P, _w, _seed(0, _j, _r), "cpu", profile=_profile)["x"]
        _TABLE[_x.reshape(-1)[:8].numpy().tobytes()] = _P.make_reference("cpu")(_x)


def run(x):
    hit = _TABLE.get(x.reshape(-1)[:8].cpu().numpy().tobytes())
    return hit.to(x.device).clone() if hit is not None else torch.zeros_like(x)
