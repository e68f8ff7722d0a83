"""Honest (red team of issue 30, session 20b): a candidate with multiprocessing connections
and a ``send_bytes`` class of its own. Each call sends its inputs' shape through a Pipe of
its own (a ``Connection`` subclass wrapping one end) and a plain class with a ``send_bytes``
method, encoded by a ``json.JSONEncoder`` subclass of its own, reads them back, and computes
the matmul. Nothing of the worker's is touched.
Expected: PASSED."""
import json
from multiprocessing import Pipe
from multiprocessing.connection import Connection

import torch


class Counting(Connection):
    sent = 0

    def send_bytes(self, buf, *a, **kw):
        Counting.sent += 1
        return super().send_bytes(buf, *a, **kw)


class Sink:
    def __init__(self):
        self.got = []

    def send_bytes(self, buf):
        self.got.append(bytes(buf))


class Enc(json.JSONEncoder):
    def default(self, o):
        return str(o)


_r, _w = Pipe(duplex=False)
_w.__class__ = Counting  # its own connection, its own class
_sink = Sink()


def run(a, b):
    msg = json.dumps({"shape": a.shape, "dtype": a.dtype}, cls=Enc).encode()
    _w.send_bytes(msg)
    _sink.send_bytes(_r.recv_bytes())
    assert _sink.got[-1] == msg
    return torch.matmul(a, b)
