"""Hostile (output caching via CUDA graph, CUDA): captures a graph on the first call's input
buffer and replays it on later calls without copying the new inputs in."""
import torch
import torch.nn.functional as F

_G = {}


def run(x):
    key = tuple(x.shape)
    if key not in _G:
        static_x = x.clone()
        g = torch.cuda.CUDAGraph()
        F.gelu(static_x, approximate="tanh")  # warm-up
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            static_out = F.gelu(static_x, approximate="tanh")
        _G[key] = (g, static_x, static_out)
    g, static_x, static_out = _G[key]
    g.replay()
    return static_out
