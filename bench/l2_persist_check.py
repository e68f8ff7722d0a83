"""Device check of the persisting-L2 reset (src/solbench/harness/l2.py): a candidate that
keeps its inputs in a persisting L2 window must read no faster than the same kernel without.

Two parts, about 40 s on one H200:

1. **micro** (this process, no harness): the harness's loop by hand (flush of 2x L2, then
   the timed read of x, CUDA events, --iters iterations) under three conditions:
   ``plain`` (no window), ``window`` (limit at the device's maximum, a persisting window over
   x on the stream, no reset: what a candidate would get without the defence) and
   ``window+reset`` (the same, with :class:`PersistingL2Reset` run before each flush, as the
   worker does). The mechanism is shown when ``window`` is faster than ``plain``; the reset
   works when ``window+reset`` is not faster than ``plain``.
2. **harness** (``solbench.harness.evaluate`` on CUDA): the reference ``x.sum(-1)`` and a
   candidate that sets the limit and a persisting window over its input in every call;
   its speedup against the reference must hold 1.0 within the run's noise interval (and
   stay below 1.1).

Usage (lead, one GPU):
    python bench/l2_persist_check.py --out $OUT/l2
CPU plumbing check (the micro part is skipped; the harness part runs on the CPU, where the
candidate's driver calls fail and it reads as the reference):
    PYTHONPATH=src python bench/l2_persist_check.py --device cpu --out /tmp/l2 --iters 10

Writes OUT/l2_persist.json (incrementally, after each part) and prints a table. Exit 0 when
every check that ran passed, 1 when one failed, 3 when the mechanism was not observed (the
check then proves nothing either way).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

#: CUdevice_attribute values (cuda.h)
CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38
CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE = 108

#: the candidate of part 2: sets the persisting limit to the device's maximum and a
#: persisting window over its input on its stream, in every call (before its kernel)
CANDIDATE = '''import ctypes

import torch

try:
    _cu = ctypes.CDLL("libcuda.so.1")
except OSError:
    _cu = None


class _W(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class _V(ctypes.Union):
    _fields_ = [("pad", ctypes.c_char * 64), ("w", _W)]


def _persist(x):
    if _cu is None or not x.is_cuda:
        return
    dev = ctypes.c_int(0)
    _cu.cuCtxGetDevice(ctypes.byref(dev))
    mx = ctypes.c_int(0)
    _cu.cuDeviceGetAttribute(ctypes.byref(mx), 108, dev)  # MAX_PERSISTING_L2_CACHE_SIZE
    _cu.cuCtxSetLimit(6, ctypes.c_size_t(mx.value))
    v = _V()
    v.w.base_ptr, v.w.num_bytes, v.w.hitRatio = x.data_ptr(), min(x.nbytes, mx.value), 1.0
    v.w.hitProp, v.w.missProp = 2, 1  # persisting on hit, streaming on miss
    _cu.cuStreamSetAttribute(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), 1, ctypes.byref(v))


def run(x):
    _persist(x)
    return x.sum(dim=-1)
'''


def _drv():
    lib = ctypes.CDLL("libcuda.so.1")
    for f in ("cuDeviceGetAttribute", "cuCtxSetLimit", "cuStreamSetAttribute"):
        getattr(lib, f).restype = ctypes.c_int
    return lib


def device_sizes() -> tuple[int, int]:
    import torch

    lib = _drv()
    dev = torch.cuda.current_device()
    l2, mx = ctypes.c_int(0), ctypes.c_int(0)
    lib.cuDeviceGetAttribute(ctypes.byref(l2), CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev)
    lib.cuDeviceGetAttribute(ctypes.byref(mx), CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, dev)
    return l2.value, mx.value


def micro(iters: int) -> dict:
    """Part 1 (module doc). Returns per condition the median and p25/p75 (us)."""
    import torch

    from solbench.harness.l2 import CU_ACCESS_PROPERTY_PERSISTING, PersistingL2Reset, window

    l2, mx = device_sizes()
    lib = _drv()
    nbytes = max(1 << 20, min(int(0.75 * mx), 32 << 20))
    x = torch.randn(nbytes // 4, device="cuda").view(-1, 1024)
    flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    reset = PersistingL2Reset()
    out: dict = {"l2_bytes": l2, "max_persisting_bytes": mx, "x_bytes": nbytes, "reset_available": reset.available}

    def set_window():
        lib.cuCtxSetLimit(6, ctypes.c_size_t(mx))
        v = window(x.data_ptr(), min(nbytes, mx), 1.0, CU_ACCESS_PROPERTY_PERSISTING)
        lib.cuStreamSetAttribute(ctypes.c_void_p(stream), 1, ctypes.byref(v))

    for cond in ("plain", "window", "window+reset", "plain"):
        ts = []
        for i in range(iters + 5):
            if cond != "plain":
                set_window()  # the candidate's own call sets it (again) each time
            x.sum(dim=-1)  # the candidate's call: its accesses go through the window
            torch.cuda.synchronize()
            if cond == "window+reset":
                reset(stream)  # the worker, after the call, before the flush
            elif cond == "plain":
                reset(stream)
            flush.fill_(i)
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if cond != "plain":
                set_window()
            a.record()
            x.sum(dim=-1)
            b.record()
            torch.cuda.synchronize()
            if i >= 5:
                ts.append(a.elapsed_time(b) * 1e3)
        q = statistics.quantiles(ts, n=4)
        key = cond if cond not in out else "plain_again"
        out[key] = {"median_us": statistics.median(ts), "p25_us": q[0], "p75_us": q[2]}
    reset(stream)
    out["reset_errors"] = dict(reset.errors)
    return out


def harness(device: str, iters: int) -> dict:
    """Part 2 (module doc): the trace figures of the window candidate against the reference."""
    from solbench.harness import EvalConfig, evaluate
    from solbench.report.tables import speedup_interval
    from solbench.spec import Solution, load_problem

    rows = 8192 if device.startswith("cuda") else 256
    d = {"name": "rowsum_l2", "description": "row sums of [rows, 1024] float32",
         "axes": {"rows": {"type": "const", "value": rows}, "cols": {"type": "const", "value": 1024}},
         "inputs": {"x": {"shape": ["rows", "cols"], "dtype": "float32"}},
         "outputs": {"y": {"shape": ["rows"], "dtype": "float32"}},
         "reference": "import torch\n\ndef run(x):\n    return x.sum(dim=-1)\n"}
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "rowsum_l2"
        p.mkdir()
        (p / "definition.json").write_text(json.dumps(d))
        (p / "workload.jsonl").write_text(json.dumps({"uuid": "w", "axes": {}, "inputs": {"x": {"type": "random"}}}) + "\n")
        prob = load_problem(p)
        sol = Solution.model_validate({
            "name": "persist_window", "definition": prob.name, "author": "bench",
            "spec": {"languages": ["pytorch"], "entry_point": "cand.py::run", "destination_passing_style": False},
            "sources": [{"path": "cand.py", "content": CANDIDATE}]})
        (t,) = evaluate(prob, sol, EvalConfig(device=device, rounds=2, iters=iters))
    e = t.evaluation
    iv = speedup_interval(t)
    perf = e.performance
    return {"status": e.status.value, "speedup": perf.speedup_factor if perf else None,
            "interval": list(iv) if iv else None,
            "median_ms": e.timing.median_ms if e.timing else None,
            "reference_median_ms": e.reference_timing.median_ms if e.reference_timing else None,
            "notes": list(e.timing.notes) if e.timing else [],
            "findings": [f.check for f in e.findings]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--iters", type=int, default=200, help="micro iterations per condition")
    ap.add_argument("--harness-iters", type=int, default=50)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    res: dict = {"device": a.device, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    path = a.out / "l2_persist.json"

    def save():
        path.write_text(json.dumps(res, indent=1) + "\n")

    code = 0
    if a.device.startswith("cuda"):
        t0 = time.perf_counter()
        m = micro(a.iters)
        m["seconds"] = time.perf_counter() - t0
        plain = min(m["plain"]["median_us"], m["plain_again"]["median_us"])
        m["mechanism_seen"] = m["window"]["median_us"] < 0.9 * plain
        # the reset holds when the window with it is within the plain runs' own spread
        m["reset_holds"] = m["window+reset"]["median_us"] >= 0.95 * plain
        res["micro"] = m
        save()
        if not m["reset_holds"]:
            code = 1
        elif not m["mechanism_seen"]:
            code = 3
    t0 = time.perf_counter()
    h = harness(a.device, a.harness_iters if a.device.startswith("cuda") else 10)
    h["seconds"] = time.perf_counter() - t0
    iv = h["interval"]
    h["holds"] = h["status"] == "PASSED" and iv is not None and iv[0] <= 1.0 <= iv[1] * 1.0 \
        and (h["speedup"] or 0) < 1.1
    res["harness"] = h
    save()
    if not h["holds"]:
        code = 1
    print(f"| part | condition | median | p25-p75 | result |\n|---|---|---|---|---|")
    if "micro" in res:
        m = res["micro"]
        for c in ("plain", "window", "window+reset", "plain_again"):
            print(f"| micro | {c} | {m[c]['median_us']:.2f} us | {m[c]['p25_us']:.2f}-{m[c]['p75_us']:.2f} | |")
        print(f"| micro | x {m['x_bytes'] >> 20} MiB, L2 {m['l2_bytes'] >> 20} MiB, max persisting "
              f"{m['max_persisting_bytes'] >> 20} MiB | | | mechanism {'seen' if m['mechanism_seen'] else 'NOT seen'}, "
              f"reset {'holds' if m['reset_holds'] else 'FAILS'} |")
    print(f"| harness | window candidate vs reference | {h['median_ms']} ms vs {h['reference_median_ms']} ms | "
          f"speedup {h['speedup']} {h['interval']} | {h['status']}, {'holds' if h['holds'] else 'FAILS'} "
          f"{h['notes']} {h['findings']} |")
    print(f"wrote {path}; exit {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
