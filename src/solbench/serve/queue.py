"""The fair queue of one device's evaluations: FIFO per client, round-robin across clients.

An RL loop that submits 500 candidates at once does not starve an agent that submits one:
each turn takes the oldest job of the next client in turn order, so with clients A (3 jobs
queued) and B (1 job) the order is A1 B1 A2 A3. A client that empties its queue leaves the
turn order; one that comes back joins at its end.
"""

from __future__ import annotations

import collections
import threading
from typing import Generic, Hashable, TypeVar

T = TypeVar("T")


class FairQueue(Generic[T]):
    """Thread-safe. :meth:`put` appends to its client's FIFO; :meth:`get` blocks until a job
    is there (or ``timeout`` seconds pass: None) and returns the oldest job of the client
    whose turn it is; :meth:`remove` takes a queued job out (a cancel); :meth:`close` wakes
    every :meth:`get` with None."""

    def __init__(self) -> None:
        self._by_client: dict[Hashable, collections.deque] = {}
        self._turns: collections.deque = collections.deque()  # clients with jobs, next first
        self._cv = threading.Condition()
        self._closed = False

    def put(self, client: Hashable, job: T) -> None:
        with self._cv:
            if self._closed:
                raise RuntimeError("queue closed")
            q = self._by_client.get(client)
            if q is None:
                q = self._by_client[client] = collections.deque()
                self._turns.append(client)
            q.append(job)
            self._cv.notify()

    def get(self, timeout: float | None = None) -> T | None:
        with self._cv:
            if not self._cv.wait_for(lambda: self._closed or self._turns, timeout=timeout):
                return None
            if self._closed:
                return None
            client = self._turns.popleft()
            q = self._by_client[client]
            job = q.popleft()
            if q:
                self._turns.append(client)  # its next job waits for the others' turns
            else:
                del self._by_client[client]
            return job

    def remove(self, client: Hashable, job: T) -> bool:
        """Take ``job`` out of ``client``'s queue; False when it is not queued (running,
        finished or unknown)."""
        with self._cv:
            q = self._by_client.get(client)
            if q is None or job not in q:
                return False
            q.remove(job)
            if not q:
                del self._by_client[client]
                self._turns.remove(client)
            return True

    def position(self, client: Hashable, job: T) -> int | None:
        """How many jobs run before ``job`` if nothing else is queued meanwhile (0: next),
        by the round-robin order; None when it is not queued."""
        with self._cv:
            q = self._by_client.get(client)
            if q is None or job not in q:
                return None
            k = list(q).index(job)
            # k full rounds of every client ahead in turn, plus those ahead of it in round k
            turns = list(self._turns)
            me = turns.index(client)
            ahead = 0
            for i, c in enumerate(turns):
                n = len(self._by_client[c])
                ahead += min(n, k + (1 if i < me else 0))
            return ahead

    def __len__(self) -> int:
        with self._cv:
            return sum(len(q) for q in self._by_client.values())

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
