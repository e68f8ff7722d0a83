"""Where a worker's first CUPTI session goes (issue 29 item 1: 3.5 s of a 7.3 s worker start
on the H100, bench/results/device_s19_h100 start_call2.log). Each variant runs in a fresh
process: import torch, CUDA context, import torch.profiler, then the first profiler session
(one kernel inside, as the worker's warm-up does), then a second CPU+CUDA session as a
timed block would open it. Variants: ``cpu+cuda`` (the worker's warm-up today),
``cuda`` (CUDA activity only first), ``none`` (no warm-up: the second session pays it).

    python bench/cupti_warm.py [--reps 2] [--out bench/results/cupti_warm.json]

Prints one line per process (seconds per step) and a median table. CUDA only."""

from __future__ import annotations

import argparse
import os
import sys

CHILD = r"""
import json, sys, time
t = time.perf_counter(); stamps = {}
def mark(name):
    global t
    now = time.perf_counter(); stamps[name] = round(now - t, 3); t = now
import torch; mark("import torch")
torch.zeros(1, device="cuda"); torch.cuda.synchronize(); mark("cuda context")
from torch.profiler import ProfilerActivity, profile; mark("import torch.profiler")
variant = sys.argv[1]
acts = {"cpu+cuda": [ProfilerActivity.CPU, ProfilerActivity.CUDA], "cuda": [ProfilerActivity.CUDA]}
if variant in acts:
    with profile(activities=acts[variant]):
        torch.ones(1, device="cuda").add_(1); torch.cuda.synchronize()
    mark("first session")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    torch.ones(1, device="cuda").add_(1); torch.cuda.synchronize()
mark("cpu+cuda session after")
n = len([e for e in p.events() if e.device_type.name == "CUDA"])
print(json.dumps({"variant": variant, "steps": stamps, "cuda_events": n}))
"""


def main() -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from cupti_first import run_variants

    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    run_variants(CHILD, ("cpu+cuda", "cuda", "none"), a.reps, timeout_s=90, out=a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
