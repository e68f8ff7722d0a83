"""Reads of the worker's memory by the parent: ``/proc/<pid>/mem``, under the same ptrace
access check as a debugger's (proc(5)).

The worker is the candidate's process and everything it says is untrusted; what is read here
is read by the parent itself, where no code of the candidate's runs:

- :func:`open_worker_memory`: a read-only fd on the worker's memory, once a first read
  succeeded (None otherwise: the caller falls back to the worker's own word and says so).
  The guarded-name read of :mod:`.memguard` (:mod:`.evidence`) opens it here too.
- :func:`parent_copy_out` (the CPU's held path): a non-DPS call's returned outputs copied
  into the parent's own slot outputs while every process of the worker is stopped
  (:class:`~.freeze.Hold`), outside the timed window (docs/harness.md, "DPS and non-DPS
  alike"): no side's sample holds a copy the harness makes, and none can skip one to read
  faster. Only the address is the worker's word; the byte count is the parent's.
"""

from __future__ import annotations

import os

import torch

from .evidence import CandidateError
from .shm import max_span, strided_span


def open_worker_memory(pid: int) -> int | None:
    """A read-only fd on ``/proc/<pid>/mem`` once one read of the worker's first mapping
    succeeded (the parent may read the worker's memory: the same ptrace access check as a
    debugger's), else None."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            first = f.readline().split()
        lo = int(first[0].split("-")[0], 16)
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except (OSError, ValueError, IndexError):
        return None
    try:
        if len(os.pread(fd, 1, lo)) == 1:
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def parent_copy_out(mem_fd: int, returned: list | None, outs: list[torch.Tensor]) -> None:
    """Copy a non-DPS call's returned outputs from the stopped worker's memory into the
    parent's slot outputs ``outs`` (CPU, outside the timed window; every process of the
    worker is stopped, so the bytes are those the call left). Only the address comes from
    the worker (``returned[j].addr``, untrusted): the byte count is the parent's own slot's,
    and an output whose reported shape or dtype differs from the slot's, or that has no
    address, is left poisoned (the worker copied it itself, or it is wrong, which
    verification judges). Whatever address the worker names, the parent only reads
    ``nbytes`` from it: a worker that wrote its result straight into the slot and names the
    slot's own mapping gains nothing (it is a DPS call), one that names a buffer it never
    filled is judged wrong. Raises :class:`CandidateError` when a named address cannot be
    read (an honest worker's returned tensor is mapped until its next request)."""
    if not returned or len(returned) != len(outs):
        return
    for r, dst in zip(returned, outs):
        if r.addr is None or not r.plain or list(dst.shape) != list(r.shape or []) \
                or str(dst.dtype).replace("torch.", "") != r.dtype:
            continue
        strided = None
        if r.strides is not None:
            # a strided output (a transpose): read the span its strides cover, copy it here
            if len(r.strides) != dst.dim():
                raise CandidateError(f"the returned output's strides {r.strides[:8]} do not fit its "
                                     f"shape {list(dst.shape)}")
            span = strided_span(list(dst.shape), list(r.strides))
            if span > max_span(dst.numel()):
                raise CandidateError(f"the returned output's strides {r.strides[:8]} span {span} elements "
                                     f"for {dst.numel()}: more than the parent reads")
            strided = torch.empty(span * dst.element_size(), dtype=torch.uint8)
            view = memoryview(strided.numpy())
        else:
            view = memoryview(dst.detach().reshape(-1).view(torch.uint8).numpy())
        try:
            got = os.preadv(mem_fd, [view], r.addr)
        except (OSError, OverflowError, ValueError) as e:  # the address is the worker's word
            raise CandidateError(f"the returned output at the address the worker reported could not be "
                                 f"read: {e}") from None
        if got != view.nbytes:
            raise CandidateError(f"the returned output at the address the worker reported: {got} of "
                                 f"{view.nbytes} bytes readable")
        if strided is not None and dst.numel():
            dst.copy_(torch.as_strided(strided.view(dst.dtype), tuple(dst.shape), tuple(r.strides)))
