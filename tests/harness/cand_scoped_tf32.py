"""Hostile (issue 30, the reply race's simplest form): lowers the fp32 matmul precision (TF32
on NVIDIA GPUs) only for the length of its own call and restores it before returning, so no
snapshot of the flags taken between calls (the guards reply, the parent's reads) ever shows
it. What it cannot hide is what ran: on CUDA its timed calls run TF32 kernels (their CUPTI
names) and its outputs carry TF32's error against the fp64 truth. On the CPU the flags change
no kernel, so it is an honest matmul there."""
import torch


def run(a, b):
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return a @ b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
