"""The parent-death watchdog of :mod:`solbench.cli.lifetime` (run as a script, ``python -I
-S _watchdog.py VAR TOKEN``; imports nothing of solbench so it starts in milliseconds).

It reads its stdin, a pipe whose only writer is the solbench process, until end-of-file:
that process has exited or died, SIGKILL included. It then SIGKILLs every process whose
environment holds ``VAR=TOKEN`` (the run's workers and whatever they started), sweeping
again while a sweep still finds one (a process may fork while it is being killed)."""

import os
import signal
import sys


def main() -> None:
    marker = f"{sys.argv[1]}={sys.argv[2]}".encode()
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    me = os.getpid()
    for _ in range(5):
        hit = False
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == me:
                continue
            try:
                with open(f"/proc/{d}/environ", "rb") as f:
                    env = f.read()
            except OSError:
                continue
            if marker in env.split(b"\0"):
                try:
                    os.kill(int(d), signal.SIGKILL)
                    hit = True
                except OSError:
                    pass
        if not hit:
            break


if __name__ == "__main__":
    main()
