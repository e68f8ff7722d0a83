"""Hostile (lazy output): returns a tensor subclass whose values are produced only when an
operation touches it (__torch_function__), i.e. after the clock has stopped."""
import torch


class _Lazy(torch.Tensor):
    @staticmethod
    def __new__(cls, x, y):
        t = torch.Tensor._make_subclass(cls, torch.empty_like(x))
        t._args = (x, y)
        return t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for a in args:
            if isinstance(a, _Lazy) and hasattr(a, "_args"):
                x, y = a._args
                with torch._C.DisableTorchFunctionSubclass():
                    torch.add(x, y, out=a.as_subclass(torch.Tensor))
        return super().__torch_function__(func, types, args, kwargs)


def run(x, y):
    return _Lazy(x, y)
