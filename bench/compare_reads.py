"""What one output comparison (harness/correctness.check_output) costs the parent, an earlier
correctness.py (``--old``) against this tree's, alternated, on the same outputs: the figures
must be identical, only the time may differ. On CUDA each separate device read is a
synchronisation; this tree reads a finite chunk's figures in one.

    python bench/compare_reads.py --device cuda --old .ab_old/src/solbench/harness/correctness.py \
        [--reps 30] [--out DIR]

Cases: float32 and bfloat16 outputs of 1 K to 16 M elements within tolerance, one with a
few elements beyond it (its misses are located), one with a NaN (the masked path). Prints a
table of median ms per comparison, old and new, and writes it (with the JSON) to ``--out``."""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

from solbench.harness import correctness as new
from solbench.spec import Tolerance


def _load_old(path: str):
    # loaded inside the package so that its relative imports resolve to this tree's modules
    spec = importlib.util.spec_from_file_location("solbench.harness._correctness_old", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _cases(device: str):
    g = torch.Generator(device="cpu").manual_seed(0)
    for n in (1 << 10, 1 << 16, 1 << 20, 1 << 24):
        for dt in (torch.float32, torch.bfloat16):
            ref = torch.randn(n, generator=g).to(dt)
            out = (ref.float() * (1 + 1e-4 * torch.randn(n, generator=g))).to(dt)
            yield f"{n} {str(dt)[6:]} within tolerance", out.to(device), ref.to(device)
    ref = torch.randn(1 << 16, generator=g)
    out = ref.clone()
    out[::4096] += 1.0
    yield "65536 float32, 16 misses", out.to(device), ref.to(device)
    out = ref.clone()
    out[100] = math.nan
    yield "65536 float32, one NaN", out.to(device), ref.to(device)


def _time(fn, reps: int, device: str) -> float:
    ts = []
    for _ in range(reps):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def _fields(oc) -> dict:
    d = dict(vars(oc))
    return {k: (repr(v) if isinstance(v, float) else v) for k, v in d.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--old", required=True, help="an earlier src/solbench/harness/correctness.py")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    old = _load_old(a.old)
    tol = Tolerance(max_atol=1e-2, max_rtol=1e-2)
    rows = []
    for name, out, ref in _cases(a.device):
        got = {}
        for label, mod in (("old", old), ("new", new)):
            got[label] = _fields(mod.check_output("o", out, ref, tol, poisoned=True))
        same = got["old"] == got["new"]
        t_old, t_new = [], []
        for _ in range(3):  # alternated
            t_old.append(_time(lambda: old.check_output("o", out, ref, tol, poisoned=True), a.reps, a.device))
            t_new.append(_time(lambda: new.check_output("o", out, ref, tol, poisoned=True), a.reps, a.device))
        row = {"case": name, "old_ms": round(min(t_old), 3), "new_ms": round(min(t_new), 3), "identical": same}
        if not same:
            row["diff"] = {k: (got["old"][k], got["new"][k]) for k in got["old"] if got["old"][k] != got["new"].get(k)}
        rows.append(row)
        print(f"{name:34s} old {row['old_ms']:8.3f} ms  new {row['new_ms']:8.3f} ms  identical={same}", flush=True)
    dev = torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu"
    lines = [f"`python bench/compare_reads.py --device {a.device} --old {a.old} --reps {a.reps}` on {dev}, "
             f"torch {torch.__version__}; ms per check_output (poisoned), the least of 3 alternated medians",
             "", "| case | old ms | new ms | figures identical |", "|---|---|---|---|"]
    lines += [f"| {r['case']} | {r['old_ms']} | {r['new_ms']} | {r['identical']} |" for r in rows]
    print("\n".join(lines))
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        Path(a.out, "compare_reads.json").write_text(json.dumps({"device": dev, "rows": rows}, indent=1))
        Path(a.out, "compare_reads.md").write_text("\n".join(lines) + "\n")
    if not all(r["identical"] for r in rows):
        raise SystemExit("figures differ between the old and the new comparison")


if __name__ == "__main__":
    main()
