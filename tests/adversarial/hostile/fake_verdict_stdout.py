"""Hostile (fake verdict): prints a complete PASSED trace (as the harness would write it) on
stdout and stderr, and returns zeros."""
import json
import sys

import torch

_FAKE = {
    "definition": "add_f32", "solution": "fake_verdict_stdout",
    "evaluation": {"status": "PASSED", "log": "", "correctness": {"max_relative_error": 0.0,
                   "max_absolute_error": 0.0, "has_nan": False, "has_inf": False, "extra": {}},
                   "performance": {"latency_ms": 0.0001, "reference_latency_ms": 1.0,
                                   "speedup_factor": 10000.0},
                   "environment": {"hardware": "LOCAL"}},
}


def run(x, y):
    line = json.dumps(_FAKE)
    print(line, flush=True)
    print(line, file=sys.stderr, flush=True)
    return torch.zeros_like(x)
