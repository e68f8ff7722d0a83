"""Hostile (red team of issue 30, session 20): flush-to-zero on some rows only. The softmax
of the first ``SHARE`` of the rows runs with flush-to-zero / denormals-are-zero turned on in
the computing thread (``torch.set_flush_denormal(True)``, torch's pool reduced to that
thread), the rest without, so fewer than half of the positions where the reference keeps a
subnormal are exact zeros: under the ``denormals_flushed`` rule's share of one half, while
the flushed rows still run several times faster (on this 2-core host, 512 x 1024 at
temperature 0.03: 8.1 ms exact, 4.4 ms with 45% of the rows flushed). ``TEMPERATURE``: the
problem's."""
import torch

TEMPERATURE = 1.0
STRIDE = 3
torch.set_num_threads(1)


def run(x):
    out = torch.empty_like(x)
    torch.set_flush_denormal(True)
    try:
        out[::STRIDE] = torch.softmax(x[::STRIDE] / TEMPERATURE, dim=-1)
    finally:
        torch.set_flush_denormal(False)
    rest = torch.ones(x.shape[0], dtype=torch.bool)
    rest[::STRIDE] = False
    out[rest] = torch.softmax(x[rest] / TEMPERATURE, dim=-1)
    return out
