"""Hostile (side-stream work, CUDA): switches the thread's current stream to a side stream at
import, so all later work (the candidate's, and any default-stream timing code that asks for the
current stream) lands there."""
import torch
import torch.nn.functional as F

_S = torch.cuda.Stream()
torch.cuda.set_stream(_S)


def run(x):
    return F.gelu(x, approximate="tanh")
