"""Honest (CUDA): a CUDA graph captured once per shape; every call copies the new inputs into
the graph's static buffer, replays, and returns a copy of the static output."""
import torch
import torch.nn.functional as F

_G = {}


def run(x):
    key = (tuple(x.shape), x.dtype, x.device)
    if key not in _G:
        static_x = torch.empty_like(x)
        static_x.copy_(x)
        F.gelu(static_x, approximate="tanh")  # warm-up on the current stream
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_out = F.gelu(static_x, approximate="tanh")
        _G[key] = (g, static_x, static_out)
    g, static_x, static_out = _G[key]
    static_x.copy_(x)
    g.replay()
    return static_out.clone()
