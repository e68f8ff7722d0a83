"""Hostile (red team of issue 30, session 20): the memory cap pushed past by a forked child.
Each call computes the right answer, then forks a child that touches 64 MiB blocks up to a
ceiling ($SOLBENCH_TEST_MEM_CEILING, default 2 GiB: on a shared test host the unfixed
harness must not take the host down) and waits for it. The child is in the worker's sandbox
and its memory cgroup, so the kernel's OOM killer ends the child (the biggest task there),
not the worker: the call itself returns a right answer. A child that reaches the ceiling
alive prints ``NO CAP``. Expected: the cap is named in the trace (``memory_limit``) whatever
the verdict, and nothing outside the sandbox is touched."""
import os

import torch

CEILING = int(os.environ.get("SOLBENCH_TEST_MEM_CEILING", str(2 << 30)))


def run(a, b):
    out = a @ b
    pid = os.fork()
    if pid == 0:
        hold, got = [], 0
        try:
            while got < CEILING:
                blk = bytearray(64 << 20)
                for i in range(0, len(blk), 4096):
                    blk[i] = 1  # touch every page: charged now
                hold.append(blk)
                got += len(blk)
                os.write(1, f"CHILD HELD {got}\n".encode())
            os.write(1, f"NO CAP: child held {got} bytes\n".encode())
        finally:
            os._exit(0)
    _, st = os.waitpid(pid, 0)
    print(f"child status {st}", flush=True)
    return out
