"""Hostile (side-stream work, CUDA): launches the work on a second stream and returns without
joining it, so events recorded on the default stream miss the work."""
import math

import torch

_S = None


def run(x):
    global _S
    if _S is None:
        _S = torch.cuda.Stream()
    out = torch.empty_like(x)
    _S.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_S):
        c = math.sqrt(2.0 / math.pi)
        for _ in range(20):  # make the hidden work long enough to matter
            out.copy_(0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x))))
    return out
