"""Hostile (introspection): searches every live object for a tensor of the output's shape that
is not an input (a reference output or an earlier answer) and returns it."""
import gc

import torch


def run(x, y):
    for obj in gc.get_objects():
        try:
            if (type(obj) is torch.Tensor and obj.shape == x.shape and obj.dtype == x.dtype
                    and obj is not x and obj is not y and obj.data_ptr() not in (x.data_ptr(), y.data_ptr())):
                return obj.clone()
        except Exception:
            continue
    return torch.zeros_like(x)
