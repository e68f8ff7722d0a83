"""Bounded line reading from a pipe another process writes.

The writer is not trusted to behave: it may write a line without end, write faster than the
reader takes lines, or never write and never close (a process it forked may hold the pipe
open for as long as it likes). :class:`LineReader` reads the raw fd on a daemon thread,
polled, so that: a line is at most ``max_line`` bytes (a longer one is cut there or dropped,
the rest of it up to its newline discarded as it comes); at most ``max_queued`` lines wait
for the reader (memory stays bounded by their product); :meth:`LineReader.get` never waits
past its timeout; and :meth:`LineReader.stop` ends the thread within one poll interval
whatever the writer does (a blocked ``read`` could not be interrupted, and closing the
stream under it would wait for the writer).
"""

from __future__ import annotations

import os
import queue
import select
import threading
from typing import Any


class LineReader:
    """Lines of the pipe ``source`` (an fd, or a binary stream with ``fileno()``; a stream is
    closed by the reading thread when it ends), each ``bytes`` ending in ``b"\\n"`` (a cut
    line too; bytes after the last newline at end of input are no line and are dropped:
    a writer killed mid-line leaves half a reply, never a reply).

    Args:
        max_line: the longest line taken, in bytes, its newline included.
        max_queued: lines read ahead of :meth:`get` at most (the thread then waits).
        overlong: ``"cut"``: a longer line is returned as its first ``max_line - 1`` bytes
            and a newline; ``"drop"``: it is not returned at all.
        poll_s: how often the thread looks whether it was stopped while nothing comes.
    """

    def __init__(self, source: Any, max_line: int, max_queued: int = 64, overlong: str = "cut",
                 poll_s: float = 0.5, name: str = "solbench-lines"):
        if overlong not in ("cut", "drop"):
            raise ValueError(f"overlong must be 'cut' or 'drop', not {overlong!r}")
        if max_line < 2:
            raise ValueError("max_line must be at least 2 bytes (one byte and the newline)")
        self._stream = None if isinstance(source, int) else source
        self._fd = source if isinstance(source, int) else source.fileno()
        self.max_line = max_line
        self.overlong = overlong
        self.poll_s = poll_s
        self._q: queue.Queue = queue.Queue(maxsize=max_queued)
        self._stopped = threading.Event()
        self._eof = threading.Event()
        #: lines longer than max_line seen so far (cut or dropped)
        self.overlong_lines = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ reader side
    def get(self, timeout: float) -> bytes | None:
        """The next line; None at end of input (the writer closed the pipe, or it failed).
        Raises :class:`queue.Empty` when no line comes within ``timeout`` seconds."""
        if self._eof.is_set() and self._q.empty():
            return None
        item = self._q.get(timeout=max(0.0, timeout))
        if item is None:
            self._eof.set()
        return item

    def stop(self) -> None:
        """Stop reading (the thread ends within ``poll_s``, closing a stream source)."""
        self._stopped.set()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end; whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # ------------------------------------------------------------------ the thread
    def _put(self, item) -> bool:
        while not self._stopped.is_set():
            try:
                self._q.put(item, timeout=min(self.poll_s, 0.5))
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        fd, cap = self._fd, self.max_line
        buf = bytearray()
        skipping = False  # inside an overlong line: discard up to its newline
        try:
            while not self._stopped.is_set():
                if not select.select([fd], [], [], self.poll_s)[0]:
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                buf += chunk
                while True:
                    i = buf.find(b"\n")
                    if skipping:
                        if i < 0:
                            buf.clear()
                            break
                        del buf[:i + 1]
                        skipping = False
                        continue
                    if i < 0 and len(buf) < cap:
                        break
                    if 0 <= i < cap:
                        line = bytes(buf[:i + 1])
                        del buf[:i + 1]
                    else:  # no newline within cap bytes: an overlong line
                        self.overlong_lines += 1
                        line = bytes(buf[:cap - 1]) + b"\n" if self.overlong == "cut" else None
                        skipping = True
                    if line is not None and not self._put(line):
                        return
        except (OSError, ValueError):
            pass
        finally:
            self._put(None)
            if self._stream is not None:
                try:
                    self._stream.close()  # this thread's stream: closed by it, when it is done
                except OSError:
                    pass
