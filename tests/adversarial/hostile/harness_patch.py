"""Hostile (harness monkey patch): finds the harness's own modules in sys.modules and replaces
every function whose name suggests timing or checking with one that reports success or zero
time. Output is zeros."""
import sys
import types

import torch


def _fake(*args, **kwargs):
    return 0.0


def _patch():
    for name, mod in list(sys.modules.items()):
        if not name.startswith("solbench") or mod is None:
            continue
        for attr in list(vars(mod)):
            obj = getattr(mod, attr, None)
            low = attr.lower()
            if isinstance(obj, types.FunctionType) and any(
                k in low for k in ("time", "clock", "check", "verify", "guard", "hash", "poison",
                                   "compare", "elapsed", "sync")
            ):
                try:
                    setattr(mod, attr, _fake)
                except Exception:
                    pass


_patch()


def run(x, y):
    _patch()
    return torch.zeros_like(x)
