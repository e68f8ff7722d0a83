"""Probe (red team of issue 30, session 20): what the sandbox shows beyond the earlier red
team's list: the mount table (host paths of the binds), /usr/local, the solbench source
trees it can read (their folders beside ``src``), /proc/sys/kernel/hostname, the DMI ids,
abstract unix sockets of the host (a connect to one the harness's parent might own), and
the inherited file descriptors. It raises with what it saw, so the trace's log holds it."""
import os
import socket


def _ls(p, n=40):
    try:
        return sorted(os.listdir(p))[:n]
    except OSError as e:
        return f"{type(e).__name__}"


def _read(p, n=300):
    try:
        with open(p, "rb") as f:
            return f.read(n).decode(errors="replace").replace("\n", " | ")
    except OSError as e:
        return f"{type(e).__name__}"


def run(x):
    seen = {
        "mountinfo": _read("/proc/self/mountinfo", 4000),
        "usr_local": _ls("/usr/local"), "usr_local_bin": _ls("/usr/local/bin"),
        "work": {d: _ls(os.path.join("/work", d)) for d in (_ls("/work") if isinstance(_ls("/work"), list) else [])},
        "hostname": _read("/proc/sys/kernel/hostname"),
        "dmi": _read("/sys/devices/virtual/dmi/id/product_uuid"),
        "fds": {n: os.readlink(f"/proc/self/fd/{n}") for n in os.listdir("/proc/self/fd") if os.path.islink(f"/proc/self/fd/{n}")},
        "net_dev": _read("/proc/net/dev", 600),
        "home": os.path.expanduser("~"), "cwd": os.getcwd(), "cwd_ls": _ls("."),
    }
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect("\0/tmp/.X11-unix/X0")
        seen["abstract"] = "connected"
    except OSError as e:
        seen["abstract"] = type(e).__name__
    raise RuntimeError("SEEN " + repr(seen))
