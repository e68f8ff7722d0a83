"""Hostile (lazy output): returns a proxy object, not a tensor, that computes on access."""
import torch


class _Proxy:
    def __init__(self, x, y):
        self._x, self._y = x, y
        self.shape, self.dtype, self.device = x.shape, x.dtype, x.device

    def _value(self):
        return self._x + self._y

    def __getattr__(self, name):
        return getattr(self._value(), name)

    def __array__(self, dtype=None):
        return self._value().cpu().numpy()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        args = [a._value() if isinstance(a, _Proxy) else a for a in args]
        return func(*args, **(kwargs or {}))


def run(x, y):
    return _Proxy(x, y)
