"""Hostile (red team of issue 30, session 20): exact while it is watched, flush-to-zero
afterwards. It counts its calls and turns flush-to-zero on only from call ``AFTER`` on (past
the correctness rounds, the stress rounds among them), in the computing thread only. On a
softmax whose upstream inputs make no subnormal output, the only later call that shows the
act is the stress re-check after the timed loop; before the fix that call's flush evidence
was dropped (it passed the tolerance): PASSED. It prints its call count (the test counts an
exact run's calls from the log). ``TEMPERATURE``: the problem's."""
import torch

TEMPERATURE = 1.0
AFTER = 1.0
torch.set_num_threads(1)
_calls = [0]


def run(x):
    _calls[0] += 1
    print(f"call {_calls[0]}", flush=True)
    flush = _calls[0] > AFTER
    torch.set_flush_denormal(flush)
    try:
        return torch.softmax(x / TEMPERATURE, dim=-1)
    finally:
        torch.set_flush_denormal(False)
