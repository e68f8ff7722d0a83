"""Honest (red team of issue 30, session 20): the softmax in numpy on the tensor's memory
(``Tensor.numpy()``, numpy's own SIMD exp), the result wrapped back with
``torch.from_numpy``. It must PASS on a low-temperature softmax whose outputs are partly
subnormal. ``TEMPERATURE``: the problem's."""
import numpy as np
import torch

TEMPERATURE = 1.0


def run(x):
    z = x.numpy() / np.float32(TEMPERATURE)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return torch.from_numpy(e / e.sum(axis=-1, keepdims=True, dtype=np.float32))
