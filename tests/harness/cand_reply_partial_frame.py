"""Hostile (reply channel): in its second call it writes the first bytes of a reply frame
onto the worker's reply socket (a length that promises 64 KiB, then 10 bytes of it) and
then sleeps for a minute inside the call. A parent that read a reply to its end with a
blocking read would wait for the rest of that frame for ever; it must end the call at its
limit instead (TIMEOUT), with the worker killed."""
import os
import struct
import sys
import time

_calls = {"n": 0}


def _fd():
    return next((int(a[3:]) for a in sys.argv if a.startswith("fd:")), None)


def run(a, b):
    _calls["n"] += 1
    if _calls["n"] == 2 and _fd() is not None:
        os.write(_fd(), struct.pack("!i", 65536) + b'[1, "ok", ')
        time.sleep(60)
    return a @ b
