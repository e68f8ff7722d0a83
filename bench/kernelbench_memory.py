"""Peak memory (parent + workers) of ``solbench run-kernelbench`` over a folder holding
KernelBench-style 3D convolutions, against the harness's own estimate (``harness.memory_plan``).

    PYTHONPATH=src python bench/kernelbench_memory.py [--available 6G] [--big-cout 256]
        [--mid-cout 32] [--rounds 1] [--iters 3] [--out bench/results/kernelbench_memory.json]

The folder (written to a temporary directory): ``59_conv3d_big.py``, a 3D convolution whose
fp32 output is 2 GiB (batch 2, 1 -> ``--big-cout`` channels, 16 x 256 x 256, kernel 3,
padding 1; the size of KernelBench's own level-1 problem 59, which got the OOM killer to
end a whole run on a 24 GB host), ``60_conv3d_mid.py``, the same with ``--mid-cout``
channels (256 MiB of output at 32: small enough to run here), and ``61_relu.py``, a small
problem after them that must still get its trace. Each has an honest ``ModelNew``.

Memory: every 0.1 s the sum of the proportional set size (``Pss`` of
``/proc/<pid>/smaps_rollup``: resident pages, a shared page split among the processes that
map it, so the sum counts the slots' shared memory once) of the solbench process and of each
of its descendants (the candidate's and the reference's workers, the SOL child); the peak of
that sum, and of the parent's and the workers' parts. ``--available`` is handed to the run as
``$SOLBENCH_MEMORY_AVAILABLE``: the share of this shared machine the run may plan for (the
big convolution's estimate, 19.1 GB, must not be tried for real beside other jobs).

Prints one line per sample second and a summary; writes the JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv3d = nn.Conv3d(in_channels, out_channels, kernel_size, padding=1, bias=False)

    def forward(self, x):
        return self.conv3d(x)


def get_inputs():
    return [torch.randn(2, 1, 16, 256, 256)]


def get_init_inputs():
    return [1, {cout}, 3]
'''

#: the honest candidate: the problem's own model under KernelBench's candidate name
CANDIDATE = PROBLEM.split("\n\n\ndef get_inputs")[0].replace("class Model(", "class ModelNew(")

RELU = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 1024)]


def get_init_inputs():
    return []
'''

RELU_NEW = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''


def tree(pid: int) -> list[int]:
    out, todo = [pid], [pid]
    while todo:
        p = todo.pop()
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    for c in map(int, f.read().split()):
                        if c not in out:
                            out.append(c)
                            todo.append(c)
        except OSError:
            pass
    return out


def pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def sample(pid: int, stop: threading.Event, rec: dict) -> None:
    last_print = 0.0
    while not stop.is_set():
        pids = tree(pid)
        parent = pss(pid)
        kids = sum(pss(p) for p in pids[1:])
        total = parent + kids
        if total > rec["peak_total"]:
            rec.update(peak_total=total, peak_parent_at_total=parent, peak_workers_at_total=kids)
        rec["peak_parent"] = max(rec["peak_parent"], parent)
        rec["peak_workers"] = max(rec["peak_workers"], kids)
        now = time.monotonic()
        if now - last_print >= 1.0:
            print(f"  t={now - rec['t0']:.0f}s processes={len(pids)} parent={parent / 1e9:.2f} GB "
                  f"workers={kids / 1e9:.2f} GB total={total / 1e9:.2f} GB", flush=True)
            last_print = now
        stop.wait(0.1)


def estimates(folder: Path) -> dict:
    sys.path.insert(0, str(ROOT / "src"))
    from solbench import harness
    from solbench.harness import memory_plan
    from solbench.harness.evaluator import flush_bytes
    from solbench.spec import load_problem

    cfg = harness.EvalConfig(device="cpu")
    fb = flush_bytes(cfg)
    out = {}
    for f in sorted(folder.glob("*.py")):
        p = load_problem(f)
        terms, k = memory_plan.estimate(p, p.workloads[0], cfg, flush_bytes=fb)
        lean, _ = memory_plan.estimate(p, p.workloads[0], cfg, flush_bytes=fb, reference_timing=False)
        out[f.stem] = {"estimated_bytes": sum(terms.values()), "without_reference_timing_bytes": sum(lean.values()),
                       "slots": k, "terms": terms}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--available", default="6G")
    ap.add_argument("--big-cout", type=int, default=256)
    ap.add_argument("--mid-cout", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=1500)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/kernelbench_memory.json")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        probs, cands = td / "level1", td / "candidates"
        probs.mkdir()
        cands.mkdir()
        (probs / "59_conv3d_big.py").write_text(PROBLEM.format(cout=a.big_cout))
        (probs / "60_conv3d_mid.py").write_text(PROBLEM.format(cout=a.mid_cout))
        (probs / "61_relu.py").write_text(RELU)
        for n in ("59_conv3d_big", "60_conv3d_mid"):
            (cands / f"{n}.py").write_text(CANDIDATE)
        (cands / "61_relu.py").write_text(RELU_NEW)
        est = estimates(probs)
        for k, v in est.items():
            print(f"estimate {k}: {v['estimated_bytes'] / 1e9:.2f} GB "
                  f"({v['without_reference_timing_bytes'] / 1e9:.2f} GB without reference timing), "
                  f"{v['slots']} slot(s)", flush=True)
        results = td / "r.jsonl"
        env = {**os.environ, "SOLBENCH_MEMORY_AVAILABLE": a.available,
               "PYTHONPATH": os.pathsep.join([str(ROOT / "src")] + [x for x in [os.environ.get("PYTHONPATH")] if x])}
        cmd = [sys.executable, "-m", "solbench.cli", "run-kernelbench", str(probs), str(cands),
               "--device", "cpu", "--rounds", str(a.rounds), "--iters", str(a.iters), "-o", str(results), "--json"]
        print("$ SOLBENCH_MEMORY_AVAILABLE=" + a.available + " solbench " + " ".join(cmd[3:]), flush=True)
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rec = {"t0": t0, "peak_total": 0, "peak_parent": 0, "peak_workers": 0,
               "peak_parent_at_total": 0, "peak_workers_at_total": 0}
        stop = threading.Event()
        th = threading.Thread(target=sample, args=(proc.pid, stop, rec), daemon=True)
        th.start()
        try:
            out, err = proc.communicate(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        stop.set()
        th.join()
        wall = time.monotonic() - t0
        sys.path.insert(0, str(ROOT / "src"))
        from solbench.store import read_traces

        traces = []
        for t in (read_traces(results) if results.exists() else []):
            ev = t.evaluation
            f = next((x for x in ev.findings if x.check in ("not_runnable", "memory_plan")), None)
            traces.append({"problem": t.definition, "status": ev.status.value,
                           "log_first_line": (ev.log.strip().splitlines() or [""])[0][:300],
                           "finding": f.check if f else None,
                           "plan_estimated_bytes": f.evidence.get("estimated_bytes") if f else None,
                           "plan_available_bytes": f.evidence.get("available_bytes") if f else None,
                           "reference_timed": ev.reference_timing is not None})
    rec.pop("t0")
    res = {"command": "PYTHONPATH=src python bench/kernelbench_memory.py " + " ".join(sys.argv[1:]),
           "available": a.available, "exit_code": proc.returncode, "wall_s": round(wall, 1),
           "peak_bytes": rec, "estimates": est, "traces": traces,
           "stderr_tail": err[-2000:] if proc.returncode else ""}
    print(json.dumps({k: v for k, v in res.items() if k != "estimates"}, indent=1))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {a.out}")
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
