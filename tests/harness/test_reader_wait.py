"""The parent's reply reader thread waits for a CPU on a loaded host before the calling thread
sees a timed call's reply; that wait is the host's load and is taken out of the round trip
with the calling thread's (harness/timed.py ``load_wait_mark``). Its reading: the thread's own
schedstat, None once the thread is gone (the wall gap is then judged as with no schedstat)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from solbench.harness.timed import load_wait_mark
from solbench.proc import procfs

needs_schedstat = pytest.mark.skipif(procfs.runqueue_wait_ms(None) is None, reason="no schedstat here")


@needs_schedstat
def test_a_threads_wait_is_read_from_its_own_schedstat():
    me = threading.get_native_id()
    a, b, c = procfs.runqueue_wait_ms(None), procfs.thread_wait_ms(me), procfs.runqueue_wait_ms(None)
    # the same counter read three times: it only grows, so the thread's reading lies between the
    # two process readings around it whatever the host's load adds between the reads
    assert a is not None and b is not None and c is not None and a <= b <= c
    box = {}
    th = threading.Thread(target=lambda: box.setdefault("tid", threading.get_native_id()))
    th.start()
    th.join()
    # join() returns once Python is done with the thread; the kernel's task ends a moment later
    deadline = time.monotonic() + 5.0
    while procfs.thread_wait_ms(box["tid"]) is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert procfs.thread_wait_ms(box["tid"]) is None  # gone


@needs_schedstat
def test_the_reader_thread_adds_to_the_parents_wait_and_a_gone_one_makes_it_unknown():
    stop = threading.Event()
    th = threading.Thread(target=stop.wait)
    th.start()
    try:
        w_plain = load_wait_mark(os.getpid())[0]
        w_reader = load_wait_mark(os.getpid(), reader_tid=th.native_id)[0]
        assert w_plain is not None and w_reader is not None
        # counters only grow: the later mark with one more thread's wait is at least the first
        assert w_reader >= w_plain - 1e-6
    finally:
        stop.set()
        th.join()
    # as above: the kernel's task ends a moment after join() returns (failed so under load)
    deadline = time.monotonic() + 5.0
    while load_wait_mark(os.getpid(), reader_tid=th.native_id)[0] is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert load_wait_mark(os.getpid(), reader_tid=th.native_id)[0] is None
