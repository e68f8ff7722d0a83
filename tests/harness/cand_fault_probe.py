"""Honest (DPS ReLU) that reports the minor page faults of its own work in every call: the
faults of reading its input slot and writing its output slot (a probe of the harness's
page-fault steady state, not a trick)."""
import resource

import torch


def run(x, y):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.clamp(x, min=0.0, out=y)
    f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    print(f"FAULTS {f1 - f0}", flush=True)
