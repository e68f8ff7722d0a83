"""Hostile (red team of the memory watchdog, session 21): host memory the sandbox holds where
the watchdog without a cgroup did not look. It sums each process's anonymous memory
(RssAnon / Pss_Anon) and what the private /tmp and /dev/shm hold; RLIMIT_DATA binds private
writable mappings only. Memory of the shmem filesystem that is neither anonymous nor in those
two tmpfs escapes both:

- ``MODE = "shared_anon"``: ``mmap(-1, n, MAP_SHARED)`` touched page by page (shmem: RssShmem,
  not RssAnon; a shared mapping, not RLIMIT_DATA's);
- ``MODE = "memfd"``: ``memfd_create`` written with ``write()`` and never mapped: no process
  maps a page of it, only an open fd pins it;
- ``MODE = "shared_child"``: a shared anonymous mapping whose pages a forked child touches
  and then exits: they stay in the mapping, but no live process has faulted them in (its
  RssShmem does not show them);
- ``MODE = "memfd_closed"``: a memfd written with ``write()``, mapped without a touch, its
  fd closed: held by the mapping alone, and no page of it faulted in;
- ``MODE = "sysv"``: a System V segment (``shmget``/``shmat``), touched, then detached: no
  process maps it and no fd holds it; it lives as long as the sandbox's IPC namespace.

The first call takes ``SHARE`` x the cap (``$SOLBENCH_SANDBOX_MEM`` as the worker sees it;
bounded by ``$SOLBENCH_TEST_MEM_CEILING``, default 2 GiB, for the test host's sake) in 64 MiB
pieces and keeps it for the rest of the evaluation; every call waits ``HOLD_S`` so that the
watchdog's looks (every 0.1 s) fall while it is held, prints ``HELD <bytes>`` and returns the
right answer."""
import ctypes
import mmap
import os
import time

import torch

MODE = 1.0  # set by the test: "shared_anon" | "memfd" | "shared_child" | "memfd_closed" | "sysv"
SHARE = 1.5
HOLD_S = 1.0
PIECE = 64 << 20
CEILING = int(os.environ.get("SOLBENCH_TEST_MEM_CEILING", str(2 << 30)))
_held: list = []
_total = [0]


def _cap() -> int:
    try:
        return int(os.environ.get("SOLBENCH_SANDBOX_MEM", "0"))
    except ValueError:
        return 1 << 30


def _piece() -> object:
    if MODE == "shared_anon":
        m = mmap.mmap(-1, PIECE, flags=mmap.MAP_SHARED)
        for i in range(0, PIECE, mmap.PAGESIZE):
            m[i] = 1
        return m
    if MODE == "shared_child":
        m = mmap.mmap(-1, PIECE, flags=mmap.MAP_SHARED)
        pid = os.fork()
        if pid == 0:
            for i in range(0, PIECE, mmap.PAGESIZE):
                m[i] = 1
            os._exit(0)
        os.waitpid(pid, 0)
        return m
    if MODE == "memfd_closed":
        fd = os.memfd_create("piece")
        block = b"\1" * (1 << 20)
        for _ in range(PIECE >> 20):
            os.write(fd, block)
        m = mmap.mmap(fd, PIECE, flags=mmap.MAP_SHARED)
        os.close(fd)
        return m
    if MODE == "memfd":
        fd = os.memfd_create("piece")
        block = b"\1" * (1 << 20)
        for _ in range(PIECE >> 20):
            os.write(fd, block)
        return fd
    if MODE == "sysv":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
        libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
        libc.shmdt.argtypes = [ctypes.c_void_p]
        sid = libc.shmget(0, PIECE, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
        if sid < 0:
            raise OSError(ctypes.get_errno(), "shmget")
        addr = libc.shmat(sid, None, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "shmat")
        ctypes.memset(addr, 1, PIECE)
        libc.shmdt(ctypes.c_void_p(addr))
        return sid
    raise ValueError(MODE)


def run(a, b):
    if not _held:
        want = min(int(SHARE * (_cap() or (1 << 30))), CEILING)
        while _total[0] + PIECE <= want:
            _held.append(_piece())
            _total[0] += PIECE
    time.sleep(HOLD_S)
    os.write(1, f"HELD {_total[0]} {MODE}\n".encode())
    return torch.matmul(a, b)
