"""Hostile (red team of the memory watchdog, session 21): files written outside /tmp and
/dev/shm. The sandbox's root and its /dev are tmpfs mounts bwrap makes (host RAM, sized at
half of it by default); in ``userns`` mode (the mode of every CUDA worker) the candidate is
uid 0 of its namespace and owns them, so it can write there, and the watchdog without a
cgroup reads only /tmp and /dev/shm. The first call writes ``SHARE`` x the cap
(``$SOLBENCH_SANDBOX_MEM``; at most ``$SOLBENCH_TEST_MEM_CEILING``, default 2 GiB) in 64 MiB
files under ``DIR`` and keeps them; every call waits ``HOLD_S``, prints ``HELD <bytes>`` and
returns the right answer."""
import os
import time

import torch

DIR = 1.0  # set by the test: "/" | "/dev"
SHARE = 1.5
HOLD_S = 1.0
PIECE = 64 << 20
CEILING = int(os.environ.get("SOLBENCH_TEST_MEM_CEILING", str(2 << 30)))
_total = [0]


def _cap() -> int:
    try:
        return int(os.environ.get("SOLBENCH_SANDBOX_MEM", "0"))
    except ValueError:
        return 1 << 30


def run(a, b):
    if not _total[0]:
        want = min(int(SHARE * (_cap() or (1 << 30))), CEILING)
        block = b"\1" * (1 << 20)
        n = 0
        while _total[0] + PIECE <= want:
            with open(os.path.join(DIR, f"fill{n}"), "wb") as f:
                for _ in range(PIECE >> 20):
                    f.write(block)
            _total[0] += PIECE
            n += 1
    time.sleep(HOLD_S)
    os.write(1, f"HELD {_total[0]} {DIR}\n".encode())
    return torch.matmul(a, b)
