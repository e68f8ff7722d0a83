"""Honest (CUDA): profiles itself once, on its first call, with torch.profiler (Kineto, whose
CUPTI registers its own activity-buffer callbacks and disables the kinds it enabled when it
stops), as an autotuner that reads kernel times would, then runs a plain matmul. It must
PASS, and its later timed blocks must still be timed from the recorder's records (or from
CUDA events, never flagged)."""

import torch

_tuned = False


def run(a, b):
    global _tuned
    if not _tuned and a.is_cuda:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.matmul(a, b)
            torch.cuda.synchronize()
        _ = [e.key for e in prof.key_averages()]
        _tuned = True
    return torch.matmul(a, b)
