"""The three holes issue 30's closing red team left open, on the GPU: the value-keyed output
cache, the identity cache that recomputes one element, the rewritten flag readers (TF32 on
CUDA), beside the honest kernels the fixes must leave alone (a pure matmul, memoisation keyed
on every value, a workspace keyed on shape, a CUDA graph that copies its inputs in and
replays). One line per trace as it comes (status, speedup, the findings that decide). Run
from the repository root:

    timeout 1200 python bench/red30_holes_cuda.py [--out bench/results/red30_holes_cuda.jsonl]

Expected: the three hostile ones REWARD_HACK (``cached_output`` ``replayed``,
``cached_output`` ``mostly_unwritten``, ``precision_downgrade`` or ``backend_flags`` naming
``allow_tf32`` / ``float32_matmul_precision``); the flag-defaults one REWARD_HACK
``harness_patch``; every honest one PASSED with no hack finding."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "harness"))
sys.path.insert(0, str(ROOT / "src"))

from harness_helpers import matmul_problem, py_solution  # noqa: E402

from solbench.harness import EvalConfig, evaluate  # noqa: E402
from solbench.spec import load_solution  # noqa: E402

FULL_KEY = '''import hashlib
import torch

_cache = {}


def run(a, b):
    k = hashlib.sha256(a.cpu().numpy().tobytes() + b.cpu().numpy().tobytes()).hexdigest()
    if k not in _cache:
        _cache[k] = a @ b
    return _cache[k].clone()
'''

SHAPE_WORKSPACE = '''import torch

_ws = {}


def run(a, b):
    key = (tuple(a.shape), tuple(b.shape), a.dtype, a.device)
    out = _ws.get(key)
    if out is None:
        out = _ws[key] = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    torch.matmul(a, b, out=out)
    return out
'''

GRAPH = '''import torch

_g = {}


def run(a, b):
    key = (tuple(a.shape), tuple(b.shape))
    st = _g.get(key)
    if st is None:
        sa, sb = a.clone(), b.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                out = sa @ sb
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = sa @ sb
        st = _g[key] = (g, sa, sb, out)
    g, sa, sb, out = st
    sa.copy_(a)
    sb.copy_(b)
    g.replay()
    return out.clone()
'''

PURE = "import torch\n\ndef run(a, b):\n    return torch.matmul(a, b)\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--tmp", default="/tmp/red30_holes_cuda")
    a = ap.parse_args()
    tmp = Path(a.tmp)
    mm = matmul_problem(tmp / "mm", (1024, 4096))
    tight = matmul_problem(tmp / "tight", (2048,), tol=1e-4)
    h = ROOT / "tests" / "harness"
    cases = [
        ("value-keyed cache", mm, load_solution(h / "cand_value_cache.py", mm)),
        ("identity cache, one element recomputed", mm, load_solution(h / "cand_cache_one_element.py", mm)),
        ("flag readers rewritten", tight, load_solution(h / "cand_flag_readers.py", tight)),
        ("flag reader defaults replaced", tight, load_solution(h / "cand_flag_defaults.py", tight)),
        ("pure matmul (honest)", mm, py_solution("pure", PURE, "mm")),
        ("memoisation on every value (honest)", mm, py_solution("full_key", FULL_KEY, "mm")),
        ("workspace keyed on shape (honest)", mm, py_solution("ws", SHAPE_WORKSPACE, "mm")),
        ("CUDA graph, inputs copied in (honest)", mm, py_solution("graph", GRAPH, "mm")),
    ]
    out = open(a.out, "a") if a.out else None
    for label, p, s in cases:
        t0 = time.time()
        try:
            traces = evaluate(p, s, EvalConfig(device="cuda", rounds=3))
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"{label}: ERROR {type(e).__name__}: {e}", flush=True)
            continue
        for t in traces:
            ev = t.evaluation
            fs = [(f.check, f.severity, f.evidence.get("kind")) for f in ev.findings if f.severity != "advisory"]
            sp = ev.performance.speedup_factor if ev.performance else None
            print(f"{label}: {t.workload.uuid} {ev.status.value} speedup={sp} {fs} ({time.time() - t0:.0f} s)",
                  flush=True)
            if out:
                out.write(json.dumps({"case": label, "workload": t.workload.uuid, "status": ev.status.value,
                                      "speedup": sp, "findings": fs}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
