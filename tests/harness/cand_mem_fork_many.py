"""Hostile (red team of issue 30, session 20): the memory cap split over forked children.
Each call forks ``CHILDREN`` children; each touches 64 MiB blocks up to ``SHARE`` of the
sandbox's cap, or until an allocation fails, ($SOLBENCH_SANDBOX_MEM as the worker sees it) and holds them while its
siblings do the same, then exits; the call waits for them and returns the right answer.
Where one memory cgroup holds the whole sandbox, the children together pass the cap and the
kernel ends some; where the cap is a per-process ``RLIMIT_DATA`` (no cgroup), each child gets
a cap of its own and the sandbox holds ``CHILDREN x SHARE`` caps. The children print what
they held (``CHILD HELD``), and a call whose children held more than the cap together
raises ``NO CAP: ...`` (the test reads the log); the total is bounded by a ceiling for the
test host's sake ($SOLBENCH_TEST_MEM_CEILING, default 2 GiB, split over the children)."""
import os
import time

import torch

CHILDREN = 4
SHARE = 0.75
CEILING = int(os.environ.get("SOLBENCH_TEST_MEM_CEILING", str(2 << 30)))


def _cap() -> int:
    v = os.environ.get("SOLBENCH_SANDBOX_MEM", "0")
    try:
        return int(v)
    except ValueError:
        return 1 << 30


def run(a, b):
    out = a @ b
    each = min(int(SHARE * (_cap() or (1 << 30))), CEILING // CHILDREN)
    r, w = os.pipe()
    rr, rw = os.pipe()
    kids = []
    for _ in range(CHILDREN):
        pid = os.fork()
        if pid == 0:
            os.close(w)
            hold, got = [], 0
            try:
                while got + (64 << 20) <= each:
                    try:
                        blk = bytearray(64 << 20)
                    except MemoryError:
                        break  # this process's own bound: what it holds counts
                    for i in range(0, len(blk), 4096):
                        blk[i] = 1
                    hold.append(blk)
                    got += len(blk)
                os.write(1, f"CHILD HELD {got}\n".encode())
                os.write(rw, f"{got}\n".encode())
                os.read(r, 1)  # hold until the parent has seen every sibling's
            finally:
                os._exit(0)
        kids.append(pid)
    os.close(r)
    os.close(rw)
    time.sleep(3.0)  # every child at its share at once
    os.close(w)
    for pid in kids:
        os.waitpid(pid, 0)
    total = sum(int(x) for x in os.read(rr, 4096).split())
    os.close(rr)
    if total > _cap():
        raise RuntimeError(f"NO CAP: {CHILDREN} children held {total} bytes together, cap {_cap()}")
    return out
