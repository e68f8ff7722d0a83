"""Honest (CUDA): computes on a side stream and joins it back to the caller's stream before
returning (wait_stream + record_stream), so all work is inside the call."""
import torch
import torch.nn.functional as F

_S = {}


def run(x):
    dev = x.device
    if dev not in _S:
        _S[dev] = torch.cuda.Stream(device=dev)
    s = _S[dev]
    cur = torch.cuda.current_stream(dev)
    s.wait_stream(cur)
    with torch.cuda.stream(s):
        out = F.gelu(x, approximate="tanh")
    cur.wait_stream(s)
    out.record_stream(cur)
    return out
