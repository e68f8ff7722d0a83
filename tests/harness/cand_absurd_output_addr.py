"""Hostile (issue 30, item 1): makes the address the worker reports for its returned output
absurd by replacing ``torch.Tensor.data_ptr`` (the worker describes a contiguous output to
the parent by it on the CPU's held timing path). ``MODE = "high"``: an address past 2^63,
which ``os.preadv`` cannot even take (OverflowError); ``"kernel"``: an address in the kernel's
half of the address space. Before the fix ``evaluate`` raised an OverflowError traceback out
of the timed loop: no trace for this workload or any later one."""
import torch

MODE = "high"
_ADDR = {"high": 2**63 + 4096, "kernel": 0xFFFF_8000_0000_1000}[MODE]
torch.Tensor.data_ptr = lambda self: _ADDR


def run(a, b):
    return a @ b
