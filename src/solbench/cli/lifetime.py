"""Every process a solbench command starts ends with it, on every exit path.

- SIGTERM and SIGHUP (a timeout, CI cancellation, a closed terminal): the harness's workers
  (the workers of :data:`solbench.proc.registry.OWN`, each the leader of its own process group),
  their process groups, everything they started, and any other child of this process are
  SIGKILLed (a stopped worker too: SIGKILL needs no SIGCONT), then the process exits with
  128 + the signal number, as a shell reports a death by that signal. A trace being written
  at that moment is finished first, so the results file never holds half a line.
- Ctrl-C (SIGINT): one line on stderr at once ("interrupted: stopping the workers"), every
  worker SIGKILLed as for SIGTERM, then KeyboardInterrupt as usual, so the evaluator's
  ``finally`` blocks unwind over dead workers instead of waiting for live ones to close
  (a user saw 7.5 s of silence before); the entry point exits 130. The interrupt is also
  recorded: one a library swallowed still ends the command (130), and no trace line is
  written after it (:func:`raise_if_interrupted`).
- SIGKILL of this process cannot be caught. :func:`arm_watchdog` starts a tiny watchdog
  process (its own session, no torch) holding the read end of a pipe whose write end only
  this process has; when this process dies, however it dies, the pipe reads end-of-file and
  the watchdog SIGKILLs every process whose environment carries this run's token
  (``SOLBENCH_RUN``, inherited by every worker and whatever a candidate starts; a process
  that rewrote its environment block escapes this backstop, not the sandbox's
  parent-death signal).
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
import threading
from contextlib import contextmanager

#: the environment variable that marks the processes of one solbench run
RUN_ENV = "SOLBENCH_RUN"

_state = {"watchdog": None, "writing": 0, "pending": None, "interrupted": False}
_lock = threading.Lock()


def kill_all() -> list[int]:
    """SIGKILL every worker of this process, its process group and descendants, and every
    other child of this process but the helpers registered to survive (the watchdog, the
    backstop). Returns the pids signalled. Safe to call at any time."""
    from .. import limits
    from ..proc import procfs, signals
    from ..proc.registry import OWN

    killed: list[int] = []
    proc_mod = sys.modules.get("solbench.harness.process")
    shutdown = getattr(proc_mod, "shutdown_all", None) if proc_mod is not None else None
    if shutdown is not None:  # the harness's own shutdown, where it has one
        try:
            shutdown()
        except Exception:  # noqa: BLE001 - the sweep below still runs
            pass
    # no worker is half-spawned (forked, not registered) while we sweep
    held = OWN.lock.acquire(timeout=limits.SPAWN_LOCK_S)
    try:
        pids = (set(OWN.workers) | procfs.child_pids(os.getpid())) - OWN.helpers(survive=True)
        for pid in sorted(pids):
            killed += signals.kill_tree(pid)
        for p in pids:
            try:
                os.waitpid(p, os.WNOHANG)
            except OSError:
                pass
    finally:
        if held:
            OWN.lock.release()
    return killed


def _say(text: str) -> None:
    """One line on stderr from a signal handler (os.write: no buffered stream is re-entered)."""
    try:
        os.write(2, f"solbench: {text}\n".encode())
    except OSError:
        pass


def _on_sigint(signum, frame) -> None:  # noqa: ARG001
    _say("interrupted: stopping the workers")
    _state["interrupted"] = True
    kill_all()
    raise KeyboardInterrupt


def interrupted() -> bool:
    """Whether a Ctrl-C (SIGINT) reached this process's handler."""
    return bool(_state["interrupted"])


def raise_if_interrupted() -> None:
    """KeyboardInterrupt again when a Ctrl-C came earlier: a library can swallow the first
    (``import torch`` clears one that lands in its NumPy initialisation), and the command
    must still end, with no trace written after it (the workers are dead by then: a trace
    would blame the candidate for the shutdown)."""
    if _state["interrupted"]:
        raise KeyboardInterrupt


def _on_signal(signum, frame) -> None:  # noqa: ARG001
    _say(f"{signal.Signals(signum).name}: stopping the workers")
    kill_all()
    with _lock:
        if _state["writing"]:
            _state["pending"] = signum  # the writer exits when its line is complete
            return
    os._exit(128 + signum)


@contextmanager
def critical():
    """A section a SIGTERM must not cut (writing one trace line): the signal's exit waits for
    its end (the workers are killed at once all the same). None starts after a Ctrl-C
    (:func:`raise_if_interrupted`)."""
    raise_if_interrupted()
    with _lock:
        _state["writing"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["writing"] -= 1
            pending = _state["pending"] if not _state["writing"] else None
        if pending is not None:
            os._exit(128 + pending)


def install() -> None:
    """Route SIGTERM and SIGHUP through :func:`kill_all`, and SIGINT through it before the
    usual KeyboardInterrupt (main thread only; a SIGINT the process was started ignoring, as
    a background job of a non-interactive shell is, stays ignored)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, handler in ((signal.SIGTERM, _on_signal), (signal.SIGHUP, _on_signal),
                         (signal.SIGINT, _on_sigint)):
        try:
            if sig == signal.SIGINT and signal.getsignal(sig) is signal.SIG_IGN:
                continue
            signal.signal(sig, handler)
        except (ValueError, OSError):  # pragma: no cover - not the main interpreter
            pass


def arm_watchdog() -> None:
    """Start the parent-death watchdog once per process (:mod:`solbench.proc.watchdog`; see
    the module docstring) and mark this process's environment, so every process started from
    now on carries the token."""
    if _state["watchdog"] is not None or not os.path.isdir("/proc"):
        return
    from ..proc import watchdog

    token = secrets.token_hex(16)
    try:
        proc = watchdog.start(RUN_ENV, token)
    except OSError:  # pragma: no cover - no watchdog: the signal handlers still work
        return
    _state["watchdog"] = proc
    os.environ[RUN_ENV] = token
