"""Honest (red team of issue 30, session 20): the softmax through ``torch.compile`` (Inductor's
generated C++ on the CPU, its own vectorised exp), compiled at import. It must PASS on a
low-temperature softmax whose outputs are partly subnormal: the ``denormals_flushed`` rule
must not take a compiler's exp for flush-to-zero unless the outputs show the zeros.
``TEMPERATURE``: the problem's."""
import torch

TEMPERATURE = 1.0


@torch.compile(dynamic=False)
def _softmax(x):
    z = x / TEMPERATURE
    e = torch.exp(z - z.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def run(x):
    return _softmax(x)
