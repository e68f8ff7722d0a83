"""Honest (issue 30, item 7): returns a transposed view of its result (``x.t()``: the
reference materialises the same values contiguously). Before the fix REWARD_HACK
``timing_plausibility`` on the CPU: the worker's own strided copy of the view into the
parent's buffer ran inside the timed window and was charged against the candidate's clock.
Now the parent reads the span the strides cover and copies it outside the window."""
import torch


def run(a, b):
    # (a @ b) = (b^T a^T)^T: the product computed transposed, returned as a view
    return (b.t() @ a.t()).t()


TRANSPOSE = "import torch\n\ndef run(x):\n    return x.t()\n"
