"""Which layer of solbench's CUDA sandbox stops legacy CUDA IPC? (device probe)

Builds the worker's real bubblewrap command line (harness/sandbox.py, ``userns`` mode) and
launches a child through it that receives a CUDA tensor from this process over a socket
(torch's IPC reduction: cudaIpcGetMemHandle / cudaIpcOpenMemHandle plus torch's shared-memory
ref counter), adds 1 in place and replies. Each variant removes one layer (or adds the
worker's own in-process layers: resource limits, seccomp), so the table names the culprit.

    python3 bench/sandbox_ipc_matrix.py [--out FILE.json]

Prints one row per variant: ``ok`` (the parent sees the child's write) or the child's error.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

CHILD = r"""
import os, sys, ctypes, resource
fd, flags = int(sys.argv[1]), sys.argv[2]
import torch, torch.multiprocessing  # registers the CUDA reductions
from multiprocessing.connection import Connection
from solbench.harness import sandbox
c = Connection(fd)
notes = []
if "lim" in flags:
    for name, (s, h) in sandbox.limits("cuda").items():
        resource.setrlimit(getattr(resource, name), (s, h))
    notes.append("rlimits")
if "sec" in flags:
    ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)
    notes.append("seccomp=%s" % sandbox.seccomp_filter())
if "init" in flags:
    torch.zeros(1, device="cuda"); notes.append("cuda-init-first")
try:
    t = c.recv()
    if isinstance(t, torch.Tensor):
        t.add_(1); torch.cuda.synchronize(); total = float(t.sum())
    else:  # plumbing check without a GPU
        total = float(t)
    c.send(("ok", total, os.getuid(), notes))
except BaseException as e:
    c.send(("fail", repr(e)[:240], os.getuid(), notes))
"""


def drop(args: list[str], *group: str) -> list[str]:
    """``args`` without the first occurrence of the contiguous ``group``."""
    n = len(group)
    for i in range(len(args) - n + 1):
        if tuple(args[i:i + n]) == group:
            return args[:i] + args[i + n:]
    raise ValueError(f"group {group} not in the bwrap command")


def swap(args: list[str], group: tuple[str, ...], new: list[str]) -> list[str]:
    """``args`` with the first occurrence of ``group`` replaced by ``new``."""
    n = len(group)
    for i in range(len(args) - n + 1):
        if tuple(args[i:i + n]) == group:
            return args[:i] + new + args[i + n:]
    raise ValueError(f"group {group} not in the bwrap command")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    a = ap.parse_args()
    import torch
    import torch.multiprocessing  # noqa: F401
    from multiprocessing.connection import Connection

    from solbench.harness import sandbox

    bw = sandbox.bwrap_path()
    base = sandbox._bwrap_args("userns", "cuda", bw)
    shm = ("--perms", "1777", "--size", str(1 << 30), "--tmpfs", "/dev/shm")
    scratch = ("--perms", "1777", "--size", str(sandbox.TMPFS_BYTES), "--tmpfs", sandbox.SCRATCH)
    minimal = [bw, "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc",
               "--bind", "/tmp", "/tmp", "--unshare-user", "--die-with-parent"]
    variants: dict[str, tuple[list[str] | None, str]] = {
        "plain (no bwrap)": (None, ""),
        "probe minimal (threats.md)": (minimal, ""),
        "solbench full + rlimits + seccomp": (base, "lim,sec"),
        "solbench full": (base, ""),
        "full - private /dev/shm": (drop(base, *shm), ""),
        "full - pid ns": (drop(base, "--unshare-pid"), ""),
        "full - ipc ns": (drop(base, "--unshare-ipc"), ""),
        "full - pid ns - ipc ns": (drop(drop(base, "--unshare-pid"), "--unshare-ipc"), ""),
        "full - private /tmp (host /tmp bound)": (swap(base, scratch, ["--bind", "/tmp", "/tmp"]), ""),
        "full - cap-drop/disable-userns": (drop(base, "--disable-userns", "--cap-drop", "ALL"), ""),
        "full - new-session": (drop(base, "--new-session"), ""),
        "full, CUDA initialised before recv": (base, "init"),
        "full + seccomp": (base, "sec"),
        "full + rlimits": (base, "lim"),
        "full - /dev/shm - pid ns": (drop(drop(base, *shm), "--unshare-pid"), ""),
        "full - /dev/shm + rlimits": (drop(base, *shm), "lim"),
        "full - /dev/shm + seccomp": (drop(base, *shm), "sec"),
        "minimal + pid ns": (minimal + ["--unshare-pid"], ""),
        "minimal + ipc ns": (minimal + ["--unshare-ipc"], ""),
        "minimal + private /dev/shm": (minimal + list(shm), ""),
        "minimal + uid 65534": (minimal + ["--uid", "65534", "--gid", "65534"], ""),
    }
    env = sandbox.sandbox_env(dict(os.environ), "userns", None)
    rows = []
    for name, (bargs, flags) in variants.items():
        ps, cs = socket.socketpair()
        conn = Connection(os.dup(ps.fileno()))
        ps.close()
        fd = cs.fileno()
        cmd = ([] if bargs is None else bargs + ["--"]) + [sys.executable, "-c", CHILD, str(fd),
                                                           flags or "-"]
        t0 = time.time()
        try:
            p = subprocess.Popen(cmd, pass_fds=[fd], env=env if bargs else dict(os.environ),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as e:
            rows.append({"variant": name, "result": f"launch failed: {e}"})
            continue
        cs.close()
        cuda = torch.cuda.is_available()
        x = torch.zeros(1 << 20, device="cuda") if cuda else torch.zeros(1)
        try:
            conn.send(x if cuda else 7.0)
            res = conn.recv() if conn.poll(90) else ("no reply",)
        except (EOFError, OSError) as e:
            res = ("child died", repr(e))
        if cuda:
            torch.cuda.synchronize()
        try:
            out, _ = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        conn.close()
        row = {"variant": name, "result": res[0], "detail": list(res[1:]),
               "parent_sum": float(x.sum()), "seconds": round(time.time() - t0, 1),
               "child_tail": out.decode(errors="replace")[-300:] if res[0] != "ok" else ""}
        rows.append(row)
        print(f"{name:38s} {res[0]:10s} parent_sum={row['parent_sum']:.0f} "
              f"{str(res[1:])[:150]}", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"bwrap": base, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
