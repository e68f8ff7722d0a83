"""Hostile (red team 24): every call forks a child that lives 0.5 s (work that outlives the
call, as cand_child_per_call.py), but the child first unmaps the pages of its stack that hold
its argv and environment strings. The kernel then reads nothing for /proc/<pid>/cmdline (as
for a zombie), and the harness's process check took an empty command line for "exited or a
zombie" and skipped the process: a live child, never flagged."""
import ctypes
import os
import time


def _blank_cmdline() -> int:
    with open("/proc/self/stat") as f:
        s = f.read()
    fl = s[s.rindex(")") + 2:].split()  # fl[i] is field i + 3 of proc(5)
    arg_start, env_end = int(fl[45]), int(fl[48])
    page = os.sysconf("SC_PAGE_SIZE")
    lo = arg_start & ~(page - 1)
    hi = (env_end + page - 1) & ~(page - 1)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc.munmap(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo))


def run(a, b):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, b"1" if _blank_cmdline() == 0 else b"0")
            time.sleep(0.5)
        finally:
            os._exit(0)
    os.close(w)
    os.read(r, 1)  # the child's command line is blank before the call returns
    os.close(r)
    return a @ b
