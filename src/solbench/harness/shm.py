"""CPU shared buffers the parent owns: files in a private /dev/shm folder, mapped by both
processes with ``torch.from_file(shared=True)``. No shared-memory manager daemon is involved,
so a worker cannot disturb the parent's other buffers; CUDA buffers cross as CUDA IPC
handles instead (torch's own reductions, parent -> worker only)."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from typing import Any

import torch


def _storage_bytes(shape, stride, elem: int) -> int:
    if any(s == 0 for s in shape):
        return elem
    return (sum((s - 1) * st for s, st in zip(shape, stride)) + 1) * elem


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
            path = f"/proc/{os.getpid()}/fd/{fd}"
        else:
            path = os.path.join(self.dir, f"b{self.n}")
            with open(path, "wb") as f:
                f.truncate(nbytes)
        desc = {"path": path, "dtype": str(dtype).replace("torch.", ""), "shape": list(shape),
                "stride": list(stride), "nbytes": nbytes}
        return open_desc(desc), desc

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def open_desc(desc: dict[str, Any]) -> torch.Tensor:
    """Map a buffer described by :meth:`ShmArena.tensor` (either process)."""
    raw = torch.from_file(desc["path"], shared=True, size=desc["nbytes"], dtype=torch.uint8)
    dtype = getattr(torch, desc["dtype"])
    typed = raw.view(dtype) if dtype != torch.uint8 else raw
    return typed.as_strided(tuple(desc["shape"]), tuple(desc["stride"]))
