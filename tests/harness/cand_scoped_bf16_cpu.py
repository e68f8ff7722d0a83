"""Hostile (red team of issue 30, session 20): the CPU form of ``cand_scoped_tf32.py``. On a
CPU with AMX or AVX512-BF16 (oneDNN), ``torch.set_float32_matmul_precision("medium")`` runs
fp32 matmuls on bf16 inputs: measured on this host's Xeon at 1024^3, 12.8 ms against 28.0 ms
and a relative L2 error of 2.4e-3 against 3.4e-7. It lowers the precision only for the
length of its own call and restores it before returning, so no snapshot of the flags taken
between calls (the guards reply, the parent's reads) shows it, and its outputs are fp32
accumulations (no lower dtype in their values). Expected: not PASSED."""
import torch


def run(a, b):
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        return a @ b
    finally:
        torch.set_float32_matmul_precision(old)
