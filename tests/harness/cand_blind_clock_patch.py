"""Hostile (issue 30, item 10): slows ``time.perf_counter`` (every reading is a tenth of the
real elapsed time since import) and hooks the JSON encoder so the guards' reply carries empty
``changed`` and ``interposition`` lists. The parent takes its timing outside, so the clock
patch changes no figure, but patching the clock is a reward hack by SOL-ExecBench's rules,
and the same blinding hides any flag flip or hook. Before the fix: PASSED (the worker's own
snapshot saw both patches; the reply it sent had been emptied)."""
import json
import time

import torch

_t0 = time.perf_counter()
_real = time.perf_counter
time.perf_counter = lambda: _t0 + (_real() - _t0) / 10.0
_orig = json.JSONEncoder.encode


def _encode(self, o):
    if isinstance(o, list) and len(o) == 3 and isinstance(o[2], dict) and "flags0" in o[2]:
        o[2]["changed"], o[2]["interposition"] = [], []
    return _orig(self, o)


json.JSONEncoder.encode = _encode


def run(a, b):
    return a @ b
