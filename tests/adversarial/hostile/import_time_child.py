"""Hostile (background process started while the candidate is imported; red team 2026-11-30):
a plain Python child started at import, before the harness looked at the worker's children,
stays alive for the whole evaluation (here it only sleeps). Import time is no excuse: every
descendant that is not a runtime helper, judged by its real executable, is reported."""
import math
import subprocess
import sys

import torch

_child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def run(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))
