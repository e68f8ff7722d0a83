"""The parent reads each reply itself, from the worker's socket, never blocking past the
request's deadline (process.WorkerHandle._read_reply): whole frames in either of
multiprocessing's two framings, frames that arrive in pieces, and every malformed or
stalled frame ends as a status, never a hang."""
from __future__ import annotations

import json
import socket
import struct
import threading
import time
import types
from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate, process
from solbench.spec import Status, load_solution

from harness_helpers import matmul_problem

HERE = Path(__file__).resolve().parent


class _Proc:
    def poll(self):
        return None


def _reader():
    a, b = socket.socketpair()
    h = types.SimpleNamespace(_sock=a, proc=_Proc())
    h._dead = lambda during: (_ for _ in ()).throw(AssertionError("not dead"))
    return h, b


def _read(h, within_s=2.0):
    return process.WorkerHandle._read_reply(h, time.monotonic() + within_s, "test")


def _frame(obj, long_form=False) -> bytes:
    body = json.dumps(obj).encode()
    return (struct.pack("!iQ", -1, len(body)) if long_form else struct.pack("!i", len(body))) + body


@pytest.mark.parametrize("long_form", [False, True])
def test_a_whole_frame_is_one_reply(long_form):
    h, w = _reader()
    w.sendall(_frame([7, "ok", {"x": 1}], long_form))
    assert _read(h) == ("msg", [7, "ok", {"x": 1}])


def test_a_frame_in_slow_pieces_is_read_to_its_end():
    h, w = _reader()
    data = _frame([3, "ok", {"pad": "y" * 5000}])

    def drip():
        for i in range(0, len(data), 997):
            w.sendall(data[i:i + 997])
            time.sleep(0.01)

    threading.Thread(target=drip, daemon=True).start()
    assert _read(h) == ("msg", [3, "ok", {"pad": "y" * 5000}])


@pytest.mark.parametrize("partial", [b"", b"\x00\x00", struct.pack("!i", 100) + b"[1,"])
def test_a_stalled_frame_times_out_at_the_deadline(partial):
    h, w = _reader()
    w.sendall(partial)
    t = time.monotonic()
    assert _read(h, within_s=0.4) == ("timeout", None)
    assert 0.35 <= time.monotonic() - t < 1.5


@pytest.mark.parametrize("data, why", [
    (struct.pack("!i", process.MAX_REPLY_BYTES + 1), "bytes (at most"),
    (struct.pack("!iQ", -1, 1 << 40), "bytes (at most"),
    (struct.pack("!i", -7), "frame length of -7"),
    (struct.pack("!i", 5) + b"nope!", "JSONDecodeError"),
    (_frame({"seq": 1}), "not a [seq, status, payload] reply"),
    (_frame([1, "ok", [1]]), "not a [seq, status, payload] reply"),
])
def test_malformed_frames_are_garbage(data, why):
    h, w = _reader()
    w.sendall(data)
    kind, item = _read(h)
    assert kind == "garbage" and why in item, item


def test_a_closed_channel_is_eof():
    h, w = _reader()
    w.sendall(b"\x00\x00")
    w.close()
    assert _read(h)[0] == "eof"


def test_a_partial_frame_and_a_stalled_call_end_at_the_call_limit(tmp_path, solbench_cache):
    p = matmul_problem(tmp_path, (64,))
    cfg = EvalConfig(device="cpu", rounds=2, iters=4, reference_timing=False).with_timeout(3)
    t = time.monotonic()
    (tr,) = evaluate(p, load_solution(HERE / "cand_reply_partial_frame.py", p), cfg)
    took = time.monotonic() - t
    assert tr.evaluation.status == Status.TIMEOUT, (tr.evaluation.status, tr.evaluation.log[-500:])
    assert took < 40, took
