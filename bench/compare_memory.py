"""Peak memory and time of one output comparison (``harness.correctness.check_output``, then
``rel_l2`` and ``norm_max_error`` against a float64 truth, as ``rounds.Oracle.judge`` does),
chunked (``COMPARE_CHUNK``, the default) and in one piece (the chunk set to the whole output,
as before chunking), each in a fresh process.

    PYTHONPATH=src python bench/compare_memory.py [--elements 134217728] [--device cpu|cuda]
        [--out bench/results/compare_memory.json]

Peak: the process's maximum resident set on the CPU (``ru_maxrss``) above what it held after
making the tensors; ``torch.cuda.max_memory_allocated`` above the same point on a GPU. The
tensors: a bf16 output and reference of ``--elements`` elements and the reference's float64
truth.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time, torch
from solbench.harness import correctness as C
from solbench.spec import Tolerance
n, device, chunk = int(sys.argv[1]), sys.argv[2], sys.argv[3]
torch.manual_seed(0)
ref = torch.randn(n, device=device).to(torch.bfloat16)
out = (ref.float() + 1e-3 * torch.randn(n, device=device)).to(torch.bfloat16)
truth = ref.double()
if chunk == "whole":
    C.COMPARE_CHUNK = n
cuda = device.startswith("cuda")
if cuda:
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated()
else:
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = time.perf_counter()
oc = C.check_output("o", out, ref, Tolerance(max_atol=1e-2, max_rtol=1e-2), poisoned=True)
e = C.rel_l2(ref, truth); m = C.norm_max_error(ref, truth)
if cuda:
    torch.cuda.synchronize(); peak = torch.cuda.max_memory_allocated() - base
else:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
print(json.dumps({"chunk": C.COMPARE_CHUNK, "seconds": round(time.perf_counter() - t0, 3),
                  "peak_bytes_above_inputs": peak, "rel_l2": oc.rel_l2, "passed": oc.ok}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=1 << 27)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "compare_memory.json"))
    a = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    rows = []
    for chunk in ("default", "whole"):
        r = subprocess.run([sys.executable, "-c", CHILD, str(a.elements), a.device, chunk],
                           capture_output=True, text=True, env=env)
        if r.returncode:
            rows.append({"mode": chunk, "error": r.stderr.strip().splitlines()[-1:]})
        else:
            rows.append({"mode": chunk, **json.loads(r.stdout.strip().splitlines()[-1])})
    n = a.elements
    print(f"one bf16 output of {n:,} elements on {a.device}:")
    print("| comparison | chunk (elements) | peak above inputs | bytes per element | seconds | rel_l2 |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['mode']} | - | failed: {r['error']} | | | |")
            continue
        pk = r["peak_bytes_above_inputs"]
        print(f"| {r['mode']} | {r['chunk']:,} | {pk / 2**30:.2f} GiB | {pk / n:.1f} | {r['seconds']} | {r['rel_l2']:.6g} |")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"elements": n, "device": a.device, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
