"""Honest (an unusual layout): a GELU returned as the imaginary part of a conjugated complex
tensor, ``torch.complex(0, -y).conj().imag``, which is y: a plain torch.Tensor of the declared
shape and dtype whose negative bit is set (its memory holds -y; every read through torch
negates), like the ``.imag`` of a conjugated spectrum. A copy-out that reads the output's
bytes (the parent's, of the CPU timed calls) gets -y; one through torch gets y."""
import torch
import torch.nn.functional as F


def run(x):
    y = F.gelu(x, approximate="tanh")
    return torch.complex(torch.zeros_like(y), -y).conj().imag
