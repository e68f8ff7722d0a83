"""Hostile (precision downgrade): autocast to bfloat16 around an fp32 matmul."""
import torch


def run(a, b):
    with torch.autocast(device_type=a.device.type, dtype=torch.bfloat16):
        c = a @ b
    return c.float()
