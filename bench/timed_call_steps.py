"""Where one timed call's host time goes, step by step (issue 29 item 3). On an H100 the timed
calls are the largest piece of a steady workload: 2.7 ms a candidate call and 1.5 ms a
reference call beyond their kernels, plus 0.6 ms of fresh inputs each and 1.0 ms of the
parent's checks a candidate call, at 50 + 50 calls a workload at the median
(bench/results/device_s29_h100, steadyab_new_r*_call1.jsonl).

    python bench/timed_call_steps.py --device cuda [--problem DIR] [--n 200] [--out FILE]

Part 1, the worker's side, in this process: a ``harness.worker.Worker`` whose connection
discards what it is sent, one slot holding an input set of the problem's smallest workload,
the problem's reference as its function (not destination-passing), a flush buffer of the
harness's size, and on CUDA the block's CUPTI session open as in a timed block. Each step of
``Worker._timed_iter`` is timed over N calls, for the reference's path (on CUDA: no
interposition check, no copy-out) and the candidate's (both): the flush (persisting-L2 reset,
fill, sync), the call (its host time), the end marker, the interposition check, the copy-out,
the rest of the iteration, and the reply's JSON encoding.

Part 2, the parent's side: a request with no work (``Ping``) to a real worker started as the
harness starts one (sandboxed where the host allows), which is the messaging floor of every
request; a fresh input set (``make_inputs``) and its fill into a slot (``SlotPool.fill``); the
parent's walks of the process check (``procfs.descendants`` of that worker,
``process.stray_children``) and the pid cursor read that replaces them when nothing was started
(``procfs.pid_cursor``).

Prints one table (ms a call: median and p90) and writes it as JSON with ``--out``."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from solbench.harness import protocol
from solbench.harness import worker as W
from solbench.harness.correctness import poison_
from solbench.harness.evaluator import flush_bytes
from solbench.harness.config import EvalConfig
from solbench.inputs import make_inputs
from solbench.spec import load_problem

DEFAULT_PROBLEM = "../shared/datasets/sol-execbench-dev/L1/069_rms_norm"


class _Discard:
    """A connection that drops what the worker sends (part 1 times the encoding itself)."""

    def send_bytes(self, *a) -> None:
        pass


def _q(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(0.9 * len(xs)))]


def _wrap(obj, name: str, acc: dict[str, list[float]], key: str):
    """Replace method ``name`` of ``obj``'s class by a timed one adding ms to ``acc[key]``."""
    cls = type(obj)
    fn = getattr(cls, name)

    def timed(self, *a, **k):
        t = time.perf_counter()
        try:
            return fn(self, *a, **k)
        finally:
            acc[key][-1] += (time.perf_counter() - t) * 1e3

    setattr(cls, name, timed)
    return fn


def worker_side(problem, w, device: str, n: int) -> dict[str, dict[str, tuple[float, float]]]:
    cfg = EvalConfig(device=device)
    vals = make_inputs(problem, w, 1, device)
    d = problem.definition
    env = d.resolve_axes(w.axes)
    from solbench.spec.dtypes import to_torch

    outs = [poison_(torch.empty(d.shape_of(s, env) or (), dtype=to_torch(s.dtype), device=device))
            for s in d.outputs.values()]
    wk = W.Worker(_Discard(), device)
    wk.slots = [{"inputs": [v if isinstance(v, torch.Tensor) else None for v in vals.values()],
                 "outputs": outs}]
    scalars = {str(j): v for j, v in enumerate(vals.values()) if not isinstance(v, torch.Tensor)}
    wk.fn, wk.dps = getattr(problem.reference_module(), "run"), False
    fb = flush_bytes(cfg)
    wk.flush_buf = torch.empty(fb // 4, dtype=torch.int32, device=device)
    wk.flush_bytes = fb
    wk._flush_sig = wk._flush_signature()
    keys = ["flush", "end_marker", "interposition", "copy_out", "iteration", "call_host", "reply_json"]
    results = {}
    saved = {}
    for path, check, copy_out in (("reference", False, False), ("candidate", True, True)):
        if device == "cpu":  # on the CPU both sides check and copy out
            check, copy_out = path == "candidate", True
        acc: dict[str, list[float]] = {k: [] for k in keys}
        for name, key in (("_flush", "flush"), ("_end_marker", "end_marker"),
                          ("_interposition", "interposition"), ("_copy_out", "copy_out")):
            saved[name] = _wrap(wk, name, acc, key)
        try:
            if device != "cpu":
                wk._on_time_begin(protocol.TimeBegin(cupti=True, markers="streams"))
            for i in range(n + 5):
                for k in keys:
                    acc[k].append(0.0)
                t = time.perf_counter()
                meta = W.Worker._timed_iter(wk, wk._slot(0), scalars, i, flush=True, check=check,
                                            copy_out=copy_out)
                acc["iteration"][-1] = (time.perf_counter() - t) * 1e3
                acc["call_host"][-1] = meta["host_ms"]
                t = time.perf_counter()
                json.dumps([i, "ok", meta], default=str).encode("utf-8")
                acc["reply_json"][-1] = (time.perf_counter() - t) * 1e3
                if device != "cpu" and i % 50 == 49:  # a block's length: the session's records
                    wk._on_time_end(protocol.TimeEnd())
                    wk._on_time_begin(protocol.TimeBegin(cupti=True, markers="streams"))
            if device != "cpu":
                wk._on_time_end(protocol.TimeEnd())
        finally:
            for name, fn in saved.items():
                setattr(W.Worker, name, fn)
        acc["rest"] = [it - f - e - ip - co - ch for it, f, e, ip, co, ch in
                       zip(acc["iteration"], acc["flush"], acc["end_marker"], acc["interposition"],
                           acc["copy_out"], acc["call_host"])]
        results[path] = {k: _q(v[5:]) for k, v in acc.items()}
    return results


def parent_side(problem, w, device: str, n: int) -> dict[str, tuple[float, float]]:
    from solbench.harness.process import WorkerHandle, stray_children
    from solbench.harness.slots import SlotPool
    from solbench.proc import procfs

    out: dict[str, tuple[float, float]] = {}
    first = make_inputs(problem, w, 1, device)
    pool = SlotPool(problem, w, 2, device, first)
    try:
        gen, fill = [], []
        for i in range(n):
            t = time.perf_counter()
            v = make_inputs(problem, w, 100 + i, device)
            t1 = time.perf_counter()
            pool.fill(i % 2, v)
            t2 = time.perf_counter()
            gen.append((t1 - t) * 1e3)
            fill.append((t2 - t1) * 1e3)
        out["fresh set: make_inputs"] = _q(gen)
        out["fresh set: SlotPool.fill"] = _q(fill)
    finally:
        pool.close()
    h = WorkerHandle(device)
    try:
        rt = []
        for _ in range(n + 5):
            t = time.perf_counter()
            protocol.request(h, protocol.Ping(), timeout_s=30)
            rt.append((time.perf_counter() - t) * 1e3)
        out["Ping round trip (a request with no work)"] = _q(rt[5:])
        for name, fn in (("process check: descendants walk", lambda: procfs.descendants(h.pid)),
                         ("process check: stray children", stray_children),
                         ("process check: sandbox outside the tree", h.outside_worker_tree),
                         ("pid cursor read", procfs.pid_cursor)):
            xs = []
            for _ in range(n):
                t = time.perf_counter()
                fn()
                xs.append((time.perf_counter() - t) * 1e3)
            out[name] = _q(xs)
        out["worker threads"] = (float(len(procfs.thread_ids(h.pid))),) * 2
        out["parent threads"] = (float(len(procfs.thread_ids(procfs.os.getpid()))),) * 2
    finally:
        h.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--problem", default=DEFAULT_PROBLEM)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    p = load_problem(a.problem)
    w = min(p.workloads, key=p.workload_bytes)
    print(f"problem {p.name}, workload {w.uuid} ({p.workload_bytes(w):,} bytes), device {a.device}"
          + (f" ({torch.cuda.get_device_name()})" if a.device != "cpu" else ""), flush=True)
    ws = worker_side(p, w, a.device, a.n)
    print("\n| worker step, ms a call (median / p90) | reference's path | candidate's path |\n|---|---|---|")
    for k in ("flush", "call_host", "end_marker", "interposition", "copy_out", "rest", "iteration", "reply_json"):
        r, c = ws["reference"][k], ws["candidate"][k]
        print(f"| {k} | {r[0]:.3f} / {r[1]:.3f} | {c[0]:.3f} / {c[1]:.3f} |", flush=True)
    ps = parent_side(p, w, a.device, a.n)
    print("\n| parent step | ms (median / p90) |\n|---|---|")
    for k, (m, p90) in ps.items():
        print(f"| {k} | {m:.3f} / {p90:.3f} |", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"problem": p.name, "workload": w.uuid, "device": a.device,
                                           "worker": ws, "parent": ps}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
