"""Hostile (different while timed): a GELU that looks up its call stack and, when a caller's
function name mentions timing ("time", "bench", "iter"), returns a ReLU instead, cheaper and
wrong for negative inputs. Every output is computed in its call (no cache to find), so what
catches it is a verified timed iteration, and the same input set asked for again after the
timed loop, untimed, is answered right: ``timed_output_mismatch`` stands, a hack."""
import sys

import torch.nn.functional as F


def _in_timed_loop() -> bool:
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_name.lower()
        if "time" in name or "bench" in name or "iter" in name:
            return True
        f = f.f_back
    return False


def run(x):
    if _in_timed_loop():
        return F.relu(x)
    return F.gelu(x, approximate="tanh")
