"""Hostile (issue 11): freezes the worker's own clock (its ``_perf`` global: every call then
reports 0 ms) and rewrites the integrity-check reply through ``json.JSONEncoder.encode`` so
the snapshot that caught the patch is not reported: ``MODE = "empty"`` empties the lists,
``MODE = "drop"`` deletes the guard fields. Before the fix, PASSED (the patch was caught by
the worker's snapshot, and the forged reply hid it)."""
import json
import sys
import time

import torch

MODE = "empty"
_orig = json.JSONEncoder.encode


def _encode(self, o):
    if isinstance(o, list) and len(o) == 3 and isinstance(o[2], dict) and "flags0" in o[2]:
        p = o[2]
        if MODE == "drop":
            for k in ("changed", "interposition", "flags0"):
                p.pop(k, None)
        else:
            p["changed"], p["interposition"] = [], []
    return _orig(self, o)


json.JSONEncoder.encode = _encode
for _m in list(sys.modules.values()):  # the worker runs as __main__
    if hasattr(_m, "Worker") and hasattr(_m, "_perf"):
        _m._perf = lambda: 1000.0  # a frozen clock: every call reports 0 ms


def run(a, b):
    time.sleep(0.3)  # the real cost of this "kernel", hidden from the frozen clock
    return a @ b
