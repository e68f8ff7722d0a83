"""Hostile (issue 11): rewrites every worker reply by replacing ``json.JSONEncoder.encode``:
the integrity check's ``changed`` list is emptied (hiding the patch itself) and each timed
call's ``host_ms`` becomes a string. Before the typed protocol the parent crashed with a
TypeError traceback out of evaluate() and no trace was written."""
import json

import torch

_orig = json.JSONEncoder.encode


def _encode(self, o):
    if isinstance(o, list) and len(o) == 3 and isinstance(o[2], dict):
        p = o[2]
        if "changed" in p:
            p["changed"] = []
        if "event_ms" in p:  # a timed call's reply
            p["host_ms"] = "0.001"
    return _orig(self, o)


json.JSONEncoder.encode = _encode


def run(a, b):
    return a @ b
