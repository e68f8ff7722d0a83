"""Not a hack: a GELU right on its first CALLS_RIGHT calls and 10% too large on every call
after them, whoever calls (a stand-in for any error the correctness rounds' input sets do not
show and the timed sets do: the wrong constant of ``cand_kb_wrong_constant.py`` shows only on
input sets with a row of mostly negative pre-activations, which only some seeds give).
CALLS_RIGHT is the number of correctness rounds ``tests/harness/test_ask_again.py`` runs, so
every timed call is wrong, and so is the same input set asked for again after the timed loop:
``timed_output_wrong`` (INCORRECT), not ``timed_output_mismatch`` (a hack), since it does not
answer differently while timed."""
import torch.nn.functional as F

CALLS_RIGHT = 5
_CALLS = [0]


def run(x):
    _CALLS[0] += 1
    y = F.gelu(x, approximate="tanh")
    return y if _CALLS[0] <= CALLS_RIGHT else y * 1.1
