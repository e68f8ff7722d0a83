"""Hostile: at import, inside its build, asks for a 64 MiB System V shared-memory segment
(``shmget``: one of the calls the sandbox's seccomp filter refuses; where no memory cgroup
exists such a segment is outside the worker's memory cap) and says whether it got one, then
fails its own import, so its evaluation ends in COMPILE_ERROR. What its import ran under is
in the trace all the same."""

import ctypes
import sys

_libc = ctypes.CDLL(None, use_errno=True)
_id = _libc.shmget(0, 64 << 20, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT | 0600
print("SHMGET", _id, ctypes.get_errno(), file=sys.stderr)
raise ImportError("a build that fails on purpose, after its import did what it came for")
