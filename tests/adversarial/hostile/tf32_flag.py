"""Hostile (precision downgrade via backend flag): turns on TF32 for fp32 matmuls (a real
downgrade on NVIDIA GPUs; on CPU the numbers do not change, so only the flag snapshot sees it)."""
import torch


def run(a, b):
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    return a @ b
