"""What a process's first CUPTI session pays for (issue 29 item 1: 3.2-3.4 s of a 7.3 s worker
start on the H100, bench/results/device_s20_h100/cuptiwarm.log), by hypothesis, each variant in
a fresh process:

- ``kineto``: import torch, CUDA context, then a first ``torch.profiler`` session with CUDA
  activity and one kernel (the worker's warm-up today).
- ``kineto-pre``: the same session opened *before* the CUDA context exists (the context is
  made inside it). If CUPTI's start is a walk over a live context's loaded modules, this is
  cheaper in total.
- ``kineto-eager``: ``CUDA_MODULE_LOADING=EAGER``: every module loads with the context; if the
  first session then costs the same, loaded modules are not what it pays for.
- ``cupti``: no Kineto; cupti-python's activity API after the context, each activity kind
  enabled on its own and timed, then one kernel and a flush (CUPTI's own start, kind by kind).
- ``cupti-pre``: the same kinds enabled before the CUDA context.

    python bench/cupti_first.py [--reps 2] [--variants kineto,kineto-pre,...] [--out FILE.json]

Prints one JSON line per process (seconds per step, and ``ready``: process start to a state
where a timed session costs milliseconds) and a median table. CUDA only; needs cupti-python
for the ``cupti*`` variants."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
t0 = t = time.perf_counter(); stamps = {}
def mark(name):
    global t
    now = time.perf_counter(); stamps[name] = round(now - t, 3); t = now
variant = sys.argv[1]
import torch; mark("import torch")
kinds_done = []
def context():
    torch.zeros(1, device="cuda"); torch.cuda.synchronize()
def kernel():
    torch.ones(1, device="cuda").add_(1); torch.cuda.synchronize()
if variant.startswith("kineto"):
    from torch.profiler import ProfilerActivity, profile
    if variant == "kineto-pre":
        with profile(activities=[ProfilerActivity.CUDA]):
            context(); kernel()
        mark("first session, context inside")
    else:
        context(); mark("cuda context")
        with profile(activities=[ProfilerActivity.CUDA]):
            kernel()
        mark("first session")
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        kernel()
    mark("second session")
    n = len([e for e in p.events() if e.device_type.name == "CUDA"])
else:
    from cupti import cupti
    mark("import cupti")
    recs = []
    def requested():
        return 8 * 1024 * 1024, 0
    def completed(activities):
        recs.extend(a for a in activities)
    cupti.activity_register_callbacks(requested, completed); mark("register callbacks")
    if variant == "cupti":
        context(); mark("cuda context")
    K = cupti.ActivityKind
    for name in ("CONCURRENT_KERNEL", "RUNTIME", "DRIVER", "MEMCPY", "MEMSET", "SYNCHRONIZATION",
                 "EXTERNAL_CORRELATION"):
        kind = getattr(K, name, None)
        if kind is None:
            continue
        try:
            cupti.activity_enable(kind); mark("enable " + name)
        except Exception as e:
            stamps["enable " + name] = f"{type(e).__name__}: {e}"
    if variant == "cupti-pre":
        context(); mark("cuda context")
    kernel(); cupti.activity_flush_all(1); mark("kernel + flush")
    kernel(); cupti.activity_flush_all(1); mark("second kernel + flush")
    n = sum(1 for r in recs if getattr(r, "kind", None) == K.CONCURRENT_KERNEL)
stamps["ready"] = round(time.perf_counter() - t0, 3)
print(json.dumps({"variant": variant, "steps": stamps, "kernel_records": n}))
"""

VARIANTS = ("kineto", "kineto-pre", "kineto-eager", "cupti", "cupti-pre")


def run_variants(child: str, variants, reps: int, timeout_s: float = 120.0, env_of=None,
                 out: str | None = None) -> list[dict]:
    """Run ``child`` (Python source printing one JSON line) once per variant and repetition,
    each in a fresh process (``env_of(variant)``: its environment changes); print each row as
    it comes and then the median of every step per variant; write the rows to ``out`` (JSON)
    when given. Returns the rows."""
    rows = []
    for _ in range(reps):
        for v in variants:
            env = {**os.environ, **(env_of(v) if env_of else {})}
            try:
                r = subprocess.run([sys.executable, "-c", child, v], capture_output=True, text=True,
                                   timeout=timeout_s, env=env)
                line = (r.stdout.strip().splitlines() or [""])[-1]
                row = json.loads(line) if line.startswith("{") else {"variant": v, "error": r.stderr[-600:]}
            except subprocess.TimeoutExpired:
                row = {"variant": v, "error": f"timed out after {timeout_s:.0f} s"}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("| variant | step | median s |\n|---|---|---|")
    for v in variants:
        steps = [r["steps"] for r in rows if r.get("variant") == v and "steps" in r]
        for k in (steps[0] if steps else {}):
            vals = [x[k] for x in steps if isinstance(x.get(k), (int, float))]
            if vals:
                print(f"| {v} | {k} | {statistics.median(vals):.3f} |")
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    variants = [v for v in a.variants.split(",") if v]
    run_variants(CHILD, variants, a.reps, out=a.out,
                 env_of=lambda v: {"CUDA_MODULE_LOADING": "EAGER"} if v == "kineto-eager" else {})
    return 0


if __name__ == "__main__":
    sys.exit(main())
