"""CPU shared buffers the parent owns: sealed memfds (size fixed), mapped by both processes
with ``torch.from_file(shared=True)``. The worker never finds them by name: the parent passes
each memfd over a private AF_UNIX SOCK_SEQPACKET channel (SCM_RIGHTS), tagged with the
buffer's id, before the request that uses it; the worker maps ``/proc/self/fd/N``. This
works across the sandbox's pid namespace and uid (a path like /proc/<parent>/fd/N would need
the parent to be visible and readable, which the sandbox forbids). No shared-memory manager
daemon is involved, so a worker cannot disturb the parent's other buffers; CUDA buffers
cross as CUDA IPC handles instead (torch's own reductions, parent -> worker only).
Where memfds are missing (not Linux), buffer files in a private /dev/shm folder are used
(unsandboxed only)."""

from __future__ import annotations

import fcntl
import itertools
import os
import select
import shutil
import socket
import tempfile
import threading
from typing import Any

import torch


def strided_span(shape: list[int], strides: list[int]) -> int:
    """Elements from the first to the last of a strided view of ``shape`` and ``strides``
    (non-negative, as torch's), i.e. what must be read to copy it; 0 for an empty view."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(shape, strides))


def max_span(numel: int) -> int:
    """The largest span (elements) of a strided output the parent reads to copy it itself:
    4x its elements plus 4096 (a transpose, a permute or a broadcast needs 1x; a slice of a
    much larger buffer is copied by the worker instead)."""
    return 4 * numel + 4096


def _storage_bytes(shape, stride, elem: int) -> int:
    return max(strided_span(list(shape), list(stride)), 1) * elem


#: parent side: memfd of every live buffer by id (what WorkerHandle sends a worker)
MEMFDS: dict[str, int] = {}
#: inodes of the memfds this process made for buffers (:class:`ShmArena`): the harness's own
#: memory, which the memory watchdog leaves out of a worker's share (``memcap.MemCap.held``)
OWN_INODES: set[int] = set()
_ids = itertools.count(1)
_ids_lock = threading.Lock()

#: worker side: the channel the parent sends memfds on, and the fds received so far by id
FD_CHANNEL: socket.socket | None = None
_RECEIVED: dict[str, int] = {}
#: seconds the worker waits for a memfd the parent announced
FD_WAIT_S = 30.0


def memfd_ids(payload: Any) -> list[str]:
    """Ids of the memfd buffers a request payload refers to (descriptors anywhere in it)."""
    out: list[str] = []
    stack = [payload]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            p = x.get("path")
            if isinstance(p, str) and p.startswith("memfd:"):
                out.append(p[6:])
            else:
                stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return out


#: most memfds in one message (ids joined by commas, fds in the same order); the kernel
#: allows 253 per SCM_RIGHTS message
FDS_PER_MESSAGE = 128


def memfd_batches(ids: list[str]) -> list[tuple[bytes, list[int]]]:
    """Parent: (tag, fds) messages for ``ids``, at most :data:`FDS_PER_MESSAGE` each (one
    message per buffer filled a socket's queue after about 270, before the worker reads any:
    it reads them while it handles the request that follows). Raises KeyError for a closed
    buffer."""
    out = []
    for j in range(0, len(ids), FDS_PER_MESSAGE):
        part = ids[j:j + FDS_PER_MESSAGE]
        fds = []
        for i in part:
            fd = MEMFDS.get(i)
            if fd is None:
                raise KeyError(f"buffer memfd:{i} is closed")
            fds.append(fd)
        out.append((",".join(part).encode(), fds))
    return out


def send_memfds(chan: socket.socket, ids: list[str]) -> None:
    """Parent: send the buffers' memfds, tagged with their ids (blocking; the harness uses
    :meth:`solbench.harness.process.WorkerHandle.request`, which sends with a deadline)."""
    for tag, fds in memfd_batches(ids):
        socket.send_fds(chan, [tag], fds)


def _received_fd(buf_id: str) -> int:
    """Worker: the fd of buffer ``buf_id``, reading the channel until it arrives."""
    while buf_id not in _RECEIVED:
        if FD_CHANNEL is None:
            raise OSError(f"no buffer channel for memfd:{buf_id}")
        r, _, _ = select.select([FD_CHANNEL], [], [], FD_WAIT_S)
        if not r:
            raise TimeoutError(f"buffer memfd:{buf_id} not received within {FD_WAIT_S:.0f} s")
        msg, fds, _flags, _addr = socket.recv_fds(FD_CHANNEL, 64 * FDS_PER_MESSAGE, FDS_PER_MESSAGE)
        if not msg and not fds:
            raise EOFError(f"buffer channel closed before memfd:{buf_id}")
        ids = msg.decode(errors="replace").split(",")
        for fd in fds[len(ids):]:  # one fd per id; anything more is not ours to keep
            os.close(fd)
        for i, fd in zip(ids, fds):
            old = _RECEIVED.pop(i, None)
            if old is not None:
                os.close(old)
            _RECEIVED[i] = fd
    return _RECEIVED[buf_id]


class ShmArena:
    """Owner of a private folder of shared buffer files; ``close()`` removes them."""

    def __init__(self):
        self.fds: list[int] = []
        self.n = 0
        self.sealed = hasattr(os, "memfd_create") and hasattr(fcntl, "F_ADD_SEALS")
        self.dir = None
        if not self.sealed:
            base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
            self.dir = tempfile.mkdtemp(prefix="solbench-", dir=base)

    def tensor(self, shape: tuple, stride: tuple | None, dtype: torch.dtype) -> tuple[torch.Tensor, dict]:
        """A zero-filled shared tensor of ``shape``/``stride``/``dtype`` and its descriptor."""
        shape = tuple(int(s) for s in shape)
        if stride is None:
            stride = torch.empty(shape, dtype=torch.uint8, device="meta").stride() if shape else ()
        elem = torch.empty((), dtype=dtype).element_size()
        nbytes = _storage_bytes(shape, stride, elem)
        self.n += 1
        if self.sealed:
            fd = os.memfd_create(f"solbench-b{self.n}", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
            os.ftruncate(fd, nbytes)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self.fds.append(fd)
            OWN_INODES.add(os.fstat(fd).st_ino)
            with _ids_lock:
                buf_id = f"{os.getpid()}-{next(_ids)}"
            MEMFDS[buf_id] = fd
            path = f"memfd:{buf_id}"
        else:
            path = os.path.join(self.dir, f"b{self.n}")
            with open(path, "wb") as f:
                f.truncate(nbytes)
        desc = {"path": path, "dtype": str(dtype).replace("torch.", ""), "shape": list(shape),
                "stride": list(stride), "nbytes": nbytes}
        return open_desc(desc), desc

    def close(self) -> None:
        for k in [k for k, v in MEMFDS.items() if v in self.fds]:
            MEMFDS.pop(k, None)
        for fd in self.fds:
            try:
                OWN_INODES.discard(os.fstat(fd).st_ino)
                os.close(fd)
            except OSError:
                pass
        self.fds = []
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def open_desc(desc: dict[str, Any]) -> torch.Tensor:
    """Map a buffer described by :meth:`ShmArena.tensor` (either process: the parent maps its
    own memfd, the worker the one it received for that id)."""
    path = desc["path"]
    if path.startswith("memfd:"):
        buf_id = path[6:]
        fd = MEMFDS.get(buf_id)
        if fd is None:
            fd = _received_fd(buf_id)
        path = f"/proc/self/fd/{fd}"
    raw = torch.from_file(path, shared=True, size=desc["nbytes"], dtype=torch.uint8)
    dtype = getattr(torch, desc["dtype"])
    typed = raw.view(dtype) if dtype != torch.uint8 else raw
    return typed.as_strided(tuple(desc["shape"]), tuple(desc["stride"]))
