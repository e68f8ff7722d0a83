"""``procfs.gone``: whether a process has stopped running, read from /proc, never from an
empty command line (a live process can blank it). A process whose main thread exited while
another runs reads Z in /proc/<pid>/stat and has an empty cmdline: it is not gone, running or
stopped (the CPU harness stops a candidate's processes between calls); a reaped-to-be zombie
with no thread left is."""

import os
import signal
import subprocess
import sys
import time

from solbench.proc import procfs

ZOMBIE_LEADER = ("import threading, ctypes, time\n"
                 "threading.Thread(target=lambda: time.sleep(60)).start()\n"
                 "ctypes.CDLL(None).pthread_exit(None)\n")


def _wait_state(pid: int, want: str, s: float = 10.0) -> None:
    t = time.monotonic() + s
    while time.monotonic() < t:
        if procfs.state(pid) == want:
            return
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} never reached state {want}: {procfs.state(pid)}")


def test_a_zombie_leader_with_a_live_thread_is_not_gone_running_or_stopped():
    p = subprocess.Popen([sys.executable, "-c", ZOMBIE_LEADER])
    try:
        _wait_state(p.pid, "Z")
        assert procfs.cmdline(p.pid) == ""  # what the old rule took for "exited"
        assert not procfs.gone(p.pid)
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(0.1)
        assert not procfs.gone(p.pid)
        os.kill(p.pid, signal.SIGCONT)
    finally:
        p.kill()
        p.wait()


def test_an_exited_child_not_yet_reaped_is_gone_and_a_live_one_is_not():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not procfs.gone(p.pid)
    finally:
        p.kill()
    _wait_state(p.pid, "Z")  # killed, not reaped yet
    assert procfs.gone(p.pid)
    p.wait()
    assert procfs.gone(p.pid)  # no longer listed
