"""The parent-death watchdog: a tiny process that outlives its parent by a moment and then
SIGKILLs every process carrying the parent's run token.

:func:`start` launches this file as a script (``python -I -S watchdog.py VAR TOKEN``: no
site, no user paths; it imports only :mod:`solbench.proc`, so it starts in milliseconds)
with its stdin a pipe whose only writer is the parent, registered as a ``survive`` helper of
:data:`~.registry.OWN`. The script reads its stdin until end-of-file, which comes when the
parent has exited or died (SIGKILL included), then kills every process whose environment
holds ``VAR=TOKEN`` (:func:`~.signals.kill_marked`, up to 5 sweeps while one still finds a
process: a process may fork while it is being killed)."""

from __future__ import annotations

import os
import sys

#: sweeps of the marked processes after the parent's death
SWEEPS = 5


def start(var: str, token: str):
    """Launch the watchdog for processes marked ``var=token`` (in its own session, so a
    signal to the caller's group does not take it) and register it as a surviving helper.
    The caller keeps the returned process (its stdin pipe) for as long as it lives; it
    should then put ``var=token`` in its own environment, so every process it starts carries
    the mark. Returns the :class:`subprocess.Popen`; raises OSError when it cannot be
    started."""
    import subprocess

    from .registry import OWN

    env = {k: v for k, v in os.environ.items() if k != var}
    with OWN.lock:
        proc = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__), var, token],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env, close_fds=True,
                                start_new_session=True)
        OWN.add(proc.pid, survive=True)
    return proc


def main(argv: list[str]) -> None:
    # imported before the wait: the sweep starts the moment the parent is gone
    from solbench.proc.signals import kill_marked

    var, token = argv[1], argv[2]
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    kill_marked(var, token, sweeps=SWEEPS)


if __name__ == "__main__":
    # -I leaves this file's folder off the path: the package root is added last, after the
    # standard library, so nothing there can stand in for a standard module
    sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    main(sys.argv)
