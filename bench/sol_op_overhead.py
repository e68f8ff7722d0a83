"""What a real-tensor SOL count costs per aten op, against the floor any dispatch-mode count
pays: one workload of a reference run plainly, under an empty TorchDispatchMode, under an
empty TorchFunctionMode and both, and counted (``count_workload``). The figures say how much
of a count is solbench's own work per op and how much a mode-based count cannot avoid.

    PYTHONPATH=src python bench/sol_op_overhead.py [--problem DIR] [--workload INDEX]
        [--out bench/results/sol_op_overhead.json]

Default: FlashInfer-Bench/012 (a loop over batch x heads of small ops, the slowest dev problem
to count), its middle workload by batch size. Its inputs are made as the real-tensor count
makes them (``counting._declared_inputs``, seed 0).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DEFAULT = ROOT.parent / "shared" / "datasets" / "sol-execbench-dev" / "FlashInfer-Bench" / \
    "012_gqa_paged_decode_h32_kv4_d128_ps1"


def main() -> None:
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    from solbench.sol import counting as C
    from solbench.sol.batch import _freeze_heap_once, _reuse_freed_memory_once
    from solbench.spec import load_problem

    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", default=str(DEFAULT))
    ap.add_argument("--workload", type=int, default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "sol_op_overhead.json"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    _freeze_heap_once()
    _reuse_freed_memory_once()
    p = load_problem(a.problem)
    ws = p.workloads
    if a.workload is None:
        key = next(iter(ws[0].axes), None)
        w = sorted(ws, key=lambda x: x.axes.get(key, 0))[len(ws) // 2]
    else:
        w = ws[a.workload]

    class Dispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class Function(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    n_ops = [0]

    class CountOps(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            n_ops[0] += 1
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    vals = C._declared_inputs(p, w, real=True, counts=C.Counts(mode="real", real_tensors=True))
    ref = p.make_reference("cpu")
    args = [vals[k] for k in p.definition.inputs]
    with torch.no_grad(), CountOps():
        ref(*args)

    def best(modes) -> float:
        times = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            with contextlib.ExitStack() as st, torch.no_grad():
                for m in modes:
                    st.enter_context(m())
                ref(*args)
            times.append(time.perf_counter() - t0)
        return min(times)

    rows = {"plain": best([]), "empty dispatch mode": best([Dispatch]),
            "empty function mode": best([Function]), "both empty modes": best([Function, Dispatch])}
    C.count_workload(p, w)  # the first count pays the failed meta/fake runs and imports
    cs = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        c = C.count_workload(p, w, fake_failed="counted on real tensors before")
        cs.append(time.perf_counter() - t0)
    rows[f"count_workload ({c.mode})"] = min(cs)
    n = n_ops[0]
    print(f"{p.name}, workload {w.uuid} {w.axes}: {n:,} aten ops (best of {a.reps})")
    print("| run | ms | us per aten op |")
    print("|---|---|---|")
    for k, v in rows.items():
        print(f"| {k} | {v * 1e3:.1f} | {v / n * 1e6:.1f} |")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"problem": p.name, "workload": w.uuid, "axes": w.axes, "aten_ops": n,
                                       "seconds": rows}, indent=1))


if __name__ == "__main__":
    main()
