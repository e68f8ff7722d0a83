"""The slot pool: the parent's shared input/output buffers of one workload."""

from __future__ import annotations

import secrets
from typing import Any

import torch

from ..spec.dtypes import to_torch
from ..spec.problem import Problem
from ..spec.workload import Workload
from .correctness import bits_equal, poison_
from .shm import ShmArena


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


#: cached-but-unused device memory (bytes) of the parent above which :func:`release_cached`
#: hands it back to the driver
RELEASE_ABOVE = 1 << 30


def release_cached(device: str) -> int:
    """Return the parent's cached, unused CUDA memory to the driver when it exceeds
    :data:`RELEASE_ABOVE` (bytes); returns the bytes released (0 on the CPU, or below it).

    Why: the parent runs the reference, its float64 truth and the comparisons on the device
    (docs/harness.md, Correctness); PyTorch's caching allocator keeps what they freed reserved
    for this process, where the candidate's and the reference's workers, other processes,
    cannot use it. On a large workload that reserve (tens of GB after a float64 truth) left an
    honest candidate out of memory. Called before every candidate call of the correctness
    rounds and before every timed block, never inside a timed window."""
    if torch.device(device).type != "cuda" or not torch.cuda.is_available():
        return 0
    idle = cached_idle_bytes(device)
    if idle <= RELEASE_ABOVE:
        return 0
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    return max(0, idle - cached_idle_bytes(device))


def cached_idle_bytes(device: "str | torch.device") -> int:
    """Bytes the parent's CUDA caching allocator holds reserved on ``device`` but not
    allocated (``torch.cuda.memory_reserved - memory_allocated``), from one read of its
    nested statistics: each of those two calls flattens the whole statistics tree in
    Python, and this runs before every candidate call of the rounds and every timed block."""
    st = torch.cuda.memory_stats_as_nested_dict(device)
    if not st:  # CUDA not initialised in this process: nothing is cached
        return 0
    return int(st["reserved_bytes"]["all"]["current"]) - int(st["allocated_bytes"]["all"]["current"])


class SlotPool:
    """K slots of shared input/output tensors plus the parent's pristine copy of each, and
    the cache-flush buffer the worker writes before every timed call.

    Every buffer is the parent's (CPU: sealed memfds of an :class:`ShmArena`; CUDA: tensors
    shared by CUDA IPC), so what the parent reads back from one is what is there, not what
    the worker says is there.

    On CUDA the buffers come from a memory pool of their own (:func:`_cuda_pool`): legacy
    CUDA IPC maps the whole allocator segment that holds a shared tensor into the worker, and
    a segment of the default pool also holds the parent's other tensors (the pristine inputs
    the reference is later run on, reference outputs). In a private pool a segment holds
    only this pool's slot and flush buffers, which the worker is handed anyway; a block freed
    here is reused only by this pool, so a mapping the worker keeps can never alias a later
    tensor of the parent."""

    def __init__(self, problem: Problem, w: Workload, k: int, device: str, first: dict):
        d = problem.definition
        env = d.resolve_axes(w.axes)
        self.names_in = list(d.inputs)
        self.names_out = list(d.outputs)
        self.out_specs = [(d.shape_of(s, env), to_torch(s.dtype)) for s in d.outputs.values()]
        self.k = k
        self.device = device
        # what twin() needs: shapes, strides and dtypes only (meta tensors hold no memory)
        self._make = (problem, w, k, device, {
            n: torch.empty_strided(tuple(v.shape), tuple(v.stride()), dtype=v.dtype, device="meta")
            if isinstance(v, torch.Tensor) else v for n, v in first.items()})
        self.slots: list[dict] = []
        self.wire: list[dict] = []  # what the worker receives: CUDA tensors or /dev/shm descriptors
        self.pristine: list[dict | None] = [None] * k
        self.arena = ShmArena() if torch.device(device).type == "cpu" else None

        self._alloc = None

        self._pool = _cuda_pool() if self.arena is None else None

        def alloc(shape, stride, dt):
            if self.arena is not None:
                return self.arena.tensor(shape, stride, dt)
            with _in_pool(self._pool):
                t = (torch.empty_strided(shape, stride, dtype=dt, device=device)
                     if stride is not None else torch.empty(shape, dtype=dt, device=device))
            return t, t

        try:
            self._alloc_all(first, alloc)
        except BaseException:  # a failed allocation leaves no /dev/shm file behind
            self.close()
            raise
        self._alloc = alloc
        self.flush = None
        self.flush_wire = None
        #: the FlushBuffer the flush belongs to when it is kept beyond this pool (use_flush)
        self._flush_owner = None

    def _alloc_all(self, first: dict, alloc) -> None:
        for _ in range(self.k):
            ins, wins = [], []
            for name in self.names_in:
                v = first[name]
                if isinstance(v, torch.Tensor):
                    t, wt = alloc(tuple(v.shape), tuple(v.stride()) if _dense(v) else None, v.dtype)
                    ins.append(t)
                    wins.append(wt)
                else:
                    ins.append(None)
                    wins.append(None)
            outs, wouts = [], []
            for shape, dt in self.out_specs:
                t, wt = alloc(tuple(shape or ()), None, dt)
                outs.append(t)
                wouts.append(wt)
            self.slots.append({"inputs": ins, "outputs": outs})
            self.wire.append({"inputs": wins, "outputs": wouts})

    def twin(self, flush: "FlushBuffer | None" = None) -> "SlotPool":
        """A pool of the same K slots and shapes in buffers of its own (new memfds / device
        tensors), holding copies of this pool's pristine inputs, with a flush buffer of the
        same size (``flush``, the reference worker's own kept :class:`FlushBuffer`, else a
        new one): the trusted reference's worker is handed these, never the buffers the
        candidate's worker mapped (a mapping it keeps could rewrite the reference's inputs
        between the parent's fill and the reference's read). The caller closes it."""
        if self._make is None:
            raise RuntimeError("twin() of a closed SlotPool")
        problem, w, k, device, first = self._make
        t = SlotPool(problem, w, k, device, first)
        try:
            for i, values in enumerate(self.pristine):
                if values is not None:
                    t.fill(i, values)
            if self.flush is not None:
                if flush is not None:
                    if flush is self._flush_owner:
                        raise ValueError("twin(): the reference's flush buffer must not be the candidate's")
                    t.use_flush(flush)
                else:
                    t.ensure_flush(self.flush.numel() * 4)
        except BaseException:
            t.close()
            raise
        return t

    def ensure_flush(self, nbytes: int) -> None:
        """Allocate the flush buffer (int32, ``nbytes`` rounded down to 4) once."""
        if self.flush is None and nbytes >= 4:
            self.flush, self.flush_wire = self._alloc((nbytes // 4,), None, torch.int32)

    def use_flush(self, buf: "FlushBuffer") -> None:
        """Use ``buf`` (kept by the caller across one worker's workloads) as this pool's flush
        buffer; :meth:`close` leaves it open."""
        if self.flush is not None:
            raise RuntimeError("use_flush(): this pool already has a flush buffer")
        self.flush, self.flush_wire = buf.tensor, buf.wire
        self._flush_owner = buf

    def flush_written(self, value: int, n: int = 64) -> list[int]:
        """Positions, among ``n`` drawn from the OS's secure random source now, where the
        flush buffer does not hold ``value`` (empty: the whole buffer was very likely written
        with it; a flush that skipped a fraction f of the buffer survives with (1-f)^n)."""
        if self.flush is None:
            return []
        # one read of the OS's source for all n positions (n reads otherwise, one a position,
        # after every timed call): 64 bits each, reduced modulo the buffer's words, whose bias
        # (under numel / 2**64) no flush can aim at
        size = self.flush.numel()
        pos = [x % size for x in memoryview(secrets.token_bytes(8 * n)).cast("Q")]
        got = self.flush[torch.tensor(pos, device=self.flush.device)].tolist()
        return [p for p, g in zip(pos, got) if g != value]

    def close(self) -> None:
        """Release the buffers and the pristine inputs (the SlotPool may stay referenced by
        the workload's evidence; its memory must not)."""
        self.pristine = [None] * self.k
        self._make = None
        if self.arena is not None:
            self.arena.close()
        if self._pool is not None:
            # the pool's segments go back to the driver once nothing holds its tensors
            self.slots, self.wire, self.flush, self.flush_wire = [], [], None, None
            self._pool = None
            torch.cuda.empty_cache()

    def fill(self, i: int, values: dict) -> dict[str, Any]:
        """Copy an input set into slot i, poison its outputs; return the per-call scalars."""
        slot = self.slots[i]
        for j, name in enumerate(self.names_in):
            v = values[name]
            if isinstance(v, torch.Tensor):
                slot["inputs"][j].copy_(v)
        for o in slot["outputs"]:
            poison_(o)
        _sync(self.device)
        self.pristine[i] = values
        return self.scalars(i)

    def scalars(self, i: int) -> dict[str, Any]:
        """The per-call scalars of slot i's pristine input set, as :meth:`fill` returned them
        (empty when the slot holds no set)."""
        values = self.pristine[i]
        if values is None:
            return {}
        return {str(j): values[name] for j, name in enumerate(self.names_in)
                if not isinstance(values[name], torch.Tensor)}

    def forget(self, i: int) -> None:
        """Drop slot i's pristine input set (the parent's copy of the last set filled): before
        the next set is made, so two sets are never held at once. The next :meth:`fill`
        sets it again; :meth:`inputs_intact` and :meth:`restore` need one filled."""
        self.pristine[i] = None

    def inputs_intact(self, i: int, allowed: tuple[str, ...] | list[str] = ()) -> list[str]:
        """Names of inputs of slot i whose bits differ from the parent's pristine copy,
        leaving out ``allowed`` (the inputs the reference itself writes in place, whose
        contents are judged against the reference's instead: ``WorkloadRun.inplace_inputs``)."""
        bad = []
        for j, name in enumerate(self.names_in):
            t = self.slots[i]["inputs"][j]
            if t is None or name in allowed:
                continue
            ref = self.pristine[i][name]
            if not bits_equal(t, ref):
                bad.append(name)
        return bad

    def input_tensors(self, i: int, names: list[str]) -> list[torch.Tensor]:
        """Copies of slot i's input buffers ``names`` as they are now (what a candidate left
        in the inputs it may write in place), taken at once so later writes do not count."""
        return [self.slots[i]["inputs"][self.names_in.index(n)].clone() for n in names]

    def restore(self, i: int, names: list[str]) -> None:
        """Copy the pristine values of inputs ``names`` back into slot i (a call that wrote
        them in place leaves the next call on the same slot its original inputs)."""
        if not names or self.pristine[i] is None:
            return
        for n in names:
            self.slots[i]["inputs"][self.names_in.index(n)].copy_(self.pristine[i][n])
        _sync(self.device)

    def outputs(self, i: int) -> list[torch.Tensor]:
        return self.slots[i]["outputs"]


class FlushBuffer:
    """The cache-flush buffer of one worker (int32, ``nbytes`` rounded down to 4), kept for
    all of that worker's workloads instead of one per workload's :class:`SlotPool`.

    Why: a new buffer per workload is a new memfd (CPU) or a new pool allocation and CUDA IPC
    mapping (GPU), which the worker maps again and, on the CPU, populates page by page
    (:mod:`.pages`: 2x the last-level cache, 64 MiB on the CI box) and the parent faults in
    again at its first flush, twice a workload (the candidate's and the reference's). What a
    flush is does not change: the buffer is the parent's, every element is written before
    every timed call (CPU: by the parent, with the worker stopped; CUDA: by the worker, read
    back by the parent at random positions), and its size is the same for every workload of
    a device. Each worker gets its own (the reference's is never one the candidate's worker
    mapped: :meth:`SlotPool.twin`); the owner closes it when that worker is replaced."""

    def __init__(self, nbytes: int, device: str):
        self.nbytes = int(nbytes) // 4 * 4
        self.device = device
        if self.nbytes < 4:
            raise ValueError(f"FlushBuffer: {nbytes} bytes")
        cpu = torch.device(device).type == "cpu"
        self.arena = ShmArena() if cpu else None
        self._pool = None if cpu else _cuda_pool()
        try:
            if self.arena is not None:
                self.tensor, self.wire = self.arena.tensor((self.nbytes // 4,), None, torch.int32)
            else:
                with _in_pool(self._pool):
                    self.tensor = torch.empty((self.nbytes // 4,), dtype=torch.int32, device=device)
                self.wire = self.tensor
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.tensor = self.wire = None
        if self.arena is not None:
            self.arena.close()
            self.arena = None
        if self._pool is not None:
            self._pool = None
            torch.cuda.empty_cache()


class FlushBuffers:
    """The kept :class:`FlushBuffer` of each role ("candidate", "reference"): one per worker,
    replaced (the old one closed) when the role's worker or the flush size changes."""

    def __init__(self):
        self._by_role: dict[str, tuple[Any, FlushBuffer]] = {}

    def get(self, role: str, worker: Any, nbytes: int, device: str) -> FlushBuffer:
        """The flush buffer of ``worker`` (compared by identity) in ``role``."""
        cur = self._by_role.get(role)
        if cur is not None and cur[0] is worker and cur[1].nbytes == int(nbytes) // 4 * 4 \
                and cur[1].device == device and cur[1].tensor is not None:
            return cur[1]
        other = [r for r, (w, _) in self._by_role.items() if w is worker and r != role]
        if other:  # one worker in two roles: never the case in the harness, refused
            raise ValueError(f"FlushBuffers: this worker already holds the {other[0]!r} flush buffer, "
                             f"asked for the {role!r} one")
        self.drop(role)
        buf = FlushBuffer(nbytes, device)
        self._by_role[role] = (worker, buf)
        return buf

    def drop(self, role: str) -> None:
        cur = self._by_role.pop(role, None)
        if cur is not None:
            cur[1].close()

    def close(self) -> None:
        for role in list(self._by_role):
            self.drop(role)


def _cuda_pool():
    """A fresh ``torch.cuda.MemPool`` for one SlotPool's shared buffers, or None where this
    torch has none (then the default pool is used and the segment sharing described in
    :class:`SlotPool` remains) or ``SOLBENCH_CUDA_SLOT_POOL=0``."""
    from .. import paths

    if not paths.cuda_slot_pool():
        return None
    pool_cls = getattr(torch.cuda, "MemPool", None)
    if pool_cls is None or not hasattr(torch.cuda, "use_mem_pool"):
        return None
    return pool_cls()


class _in_pool:
    """``torch.cuda.use_mem_pool(pool)`` when ``pool`` is set, else nothing."""

    def __init__(self, pool):
        self._cm = torch.cuda.use_mem_pool(pool) if pool is not None else None

    def __enter__(self):
        if self._cm is not None:
            self._cm.__enter__()

    def __exit__(self, *exc):
        if self._cm is not None:
            return self._cm.__exit__(*exc)
        return False


def _dense(t: torch.Tensor) -> bool:
    try:
        return t.is_contiguous() or t.is_non_overlapping_and_dense()
    except Exception:  # noqa: BLE001
        return False
