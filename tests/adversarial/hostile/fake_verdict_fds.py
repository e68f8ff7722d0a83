"""Hostile (fake verdict): writes forged PASSED results, raw and pickled, to every file
descriptor it inherited (pipes and sockets of a result channel included), then returns zeros."""
import json
import os
import pickle

import torch

_MSG = {"status": "PASSED", "ok": True, "passed": True, "max_abs_error": 0.0, "latency_ms": 1e-4}


def run(x, y):
    payloads = [json.dumps(_MSG).encode() + b"\n", pickle.dumps(_MSG), pickle.dumps(("result", _MSG))]
    for fd_name in os.listdir("/proc/self/fd"):
        fd = int(fd_name)
        if fd <= 2:
            continue
        for p in payloads:
            try:
                os.write(fd, len(p).to_bytes(4, "little") + p)
                os.write(fd, p)
            except OSError:
                pass
    return torch.zeros_like(x)
