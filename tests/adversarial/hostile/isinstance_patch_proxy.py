"""Hostile (monkey patch + lazy output): replaces builtins.isinstance so a proxy claims to be a
torch.Tensor, then returns the proxy."""
import builtins

import torch

_real_isinstance = builtins.isinstance


class _Proxy:
    def __init__(self, x, y):
        self._x, self._y = x, y

    def __getattr__(self, name):
        return getattr(self._x + self._y, name)


def _fake_isinstance(obj, cls):
    if type(obj) is _Proxy and (cls is torch.Tensor or (type(cls) is tuple and torch.Tensor in cls)):
        return True
    return _real_isinstance(obj, cls)


builtins.isinstance = _fake_isinstance


def run(x, y):
    return _Proxy(x, y)
