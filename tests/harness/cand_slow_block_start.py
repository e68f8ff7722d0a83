"""Candidate whose first timed call of every block is slow (it reads the worker's count of
timed calls in the block from its caller's frame and sleeps 0.3 s when it is 0): a cost paid
once per block, which the median hides. The outputs are right; the harness reports
first_call_outlier (advisory)."""
import sys
import time

import torch


def run(x):
    f = sys._getframe(1)
    if f.f_code.co_name == "_timed_iter" and getattr(f.f_locals.get("self"), "timed_n", None) == 0:
        time.sleep(0.3)
    return torch.relu(x)
