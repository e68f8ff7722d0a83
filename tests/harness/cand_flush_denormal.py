"""Hostile (issue 30, item 4): computes the softmax with flush-to-zero / denormals-are-zero
turned on in the thread that runs it (``torch.set_flush_denormal(True)``, and torch's own
pool reduced to that thread so every row runs there), then turns it off again: the flag is
per thread and cannot be read from outside. Subnormal arithmetic is slow on CPUs (microcode
assists), so the flushed kernel is faster where many outputs are subnormal; each flushed
value is off by less than 1.2e-38, far inside any tolerance. Before the fix: PASSED with no
finding. ``TEMPERATURE``: the problem's."""
import torch

TEMPERATURE = 1.0
torch.set_num_threads(1)


def run(x):
    torch.set_flush_denormal(True)
    try:
        return torch.softmax(x / TEMPERATURE, dim=-1)
    finally:
        torch.set_flush_denormal(False)
