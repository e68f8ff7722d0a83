"""Hostile (background thread, CUDA): a thread launches the kernels after the call returns."""
import threading
import time

import torch
import torch.nn.functional as F


def _work(x, out, dev):
    torch.cuda.set_device(dev)
    time.sleep(0.001)
    out.copy_(F.gelu(x, approximate="tanh"))


def run(x):
    out = torch.empty_like(x)
    threading.Thread(target=_work, args=(x, out, x.device), daemon=True).start()
    return out
