"""Cost of the fresh input sets of a large CPU evaluation, drawn in one thread and on the
thread pool (``inputs.generate._iid``), and, given its source, by the code before the change.

    PYTHONPATH=src python bench/input_sets.py [--before-src /tmp/sb-before/src] \
        [--problem ../shared/datasets/sol-execbench-dev/L2/063_encoder_layer_dual_residual_norm_chain] \
        [--repeats 2] [--sets 10] [--no-eval] [--out bench/results/input_sets_cpu.json]

Variants, run alternately ``--repeats`` times: ``one_thread`` (this tree with
``SOLBENCH_INPUT_THREADS=1``: every chunk drawn in the calling thread; the same values),
``pool`` (this tree, the default pool: one thread per core this process may use, at most 16)
and, with ``--before-src`` (the ``src`` folder of the commit before the change, e.g.
``git archive 9e21f69 src | tar -x -C /tmp/sb-before``), ``before``. For each:

1. ``make_inputs`` of the problem's smallest workload (``--limit 1``), ``--sets`` times in a
   fresh process with ``torch.set_num_threads(1)`` (the parent's setting while candidates are
   timed): wall and CPU seconds per set (medians). On a host busy with other jobs only the
   CPU seconds compare; the wall gain of the pool needs idle cores.
2. ``solbench eval PROBLEM --limit 1 --device cpu`` (the reference as its own candidate): wall
   seconds and ``phases_s`` of the trace, the input phases summed (``inputs``,
   ``correctness.inputs``, ``timing.inputs``, ``ref_timing.inputs``: each includes copying the
   set into its slot).

Prints each figure as it comes; writes the JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared/datasets/sol-execbench-dev/L2/063_encoder_layer_dual_residual_norm_chain"
INPUT_PHASES = ("inputs", "correctness.inputs", "timing.inputs", "ref_timing.inputs")

MICRO = r"""
import json, statistics, sys, time, torch
from solbench.spec import load_problem
from solbench.inputs import make_inputs
p = load_problem(sys.argv[1]); w = p.smallest_workloads(1)[0]; n = int(sys.argv[2])
torch.set_num_threads(1)
make_inputs(p, w, 0, "cpu")
ts, cs = [], []
for i in range(n):
    t, c = time.perf_counter(), time.process_time()
    x = make_inputs(p, w, i + 1, "cpu")
    ts.append(time.perf_counter() - t); cs.append(time.process_time() - c)
nbytes = sum(v.nbytes for v in x.values() if isinstance(v, torch.Tensor))
print(json.dumps({"set_s_median": statistics.median(ts), "set_cpu_s_median": statistics.median(cs),
                  "set_s": ts, "set_cpu_s": cs, "set_bytes": nbytes, "axes": w.axes}))
"""


def _env(src: Path, threads: str | None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    env.pop("SOLBENCH_INPUT_THREADS", None)
    if threads:
        env["SOLBENCH_INPUT_THREADS"] = threads
    return env


def run_micro(src: Path, threads: str | None, problem: Path, sets: int) -> dict:
    env = _env(src, threads)
    r = subprocess.run([sys.executable, "-c", MICRO, str(problem), str(sets)], env=env,
                       capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_eval(src: Path, threads: str | None, problem: Path) -> dict:
    env = _env(src, threads)
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "t.jsonl"
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "solbench.cli", "eval", str(problem), "--limit", "1",
                            "--device", "cpu", "-o", str(out)], env=env, capture_output=True, text=True,
                           timeout=1800)
        wall = time.monotonic() - t0
        if r.returncode or not out.exists():
            raise RuntimeError(r.stderr[-2000:])
        ev = json.loads(out.read_text().splitlines()[0])["evaluation"]
    ph = ev.get("phases_s") or {}
    notice = [x for x in r.stderr.splitlines() if "input sets of" in x]
    return {"wall_s": round(wall, 1), "status": ev["status"], "input_sets": len(ev.get("input_seeds") or []),
            "inputs_s": round(sum(ph.get(k, 0.0) for k in INPUT_PHASES), 2),
            "timed_calls_s": round(ph.get("timing.calls", 0.0) + ph.get("ref_timing.calls", 0.0), 2),
            "phases_s": ph, "notice": notice[0] if notice else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before-src", type=Path, default=None)
    ap.add_argument("--problem", type=Path, default=DEFAULT)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--sets", type=int, default=10)
    ap.add_argument("--no-eval", action="store_true", help="only the make_inputs figures")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/input_sets_cpu.json")
    a = ap.parse_args()
    here = (ROOT / "src").resolve()
    trees = {"one_thread": (here, "1"), "pool": (here, None)}
    if a.before_src is not None:
        trees = {"before": (a.before_src.resolve(), None), **trees}
    res: dict = {"command": "PYTHONPATH=src python bench/input_sets.py " + " ".join(sys.argv[1:]),
                 "problem": str(a.problem), "cpus": len(os.sched_getaffinity(0)),
                 "variants": {k: {"src": str(v[0]), "SOLBENCH_INPUT_THREADS": v[1]} for k, v in trees.items()},
                 "loadavg_start": os.getloadavg(), "micro": {k: [] for k in trees}, "eval": {k: [] for k in trees}}
    for rep in range(a.repeats):
        for name, (src, threads) in trees.items():
            m = run_micro(src, threads, a.problem, a.sets)
            res["micro"][name].append(m)
            print(f"[{rep}] {name}: make_inputs {m['set_s_median']:.3f} s wall, {m['set_cpu_s_median']:.3f} s CPU "
                  f"a set of {m['set_bytes']:,} bytes (medians of {a.sets}, 1 torch thread)", flush=True)
        if a.no_eval:
            continue
        for name, (src, threads) in trees.items():
            e = run_eval(src, threads, a.problem)
            res["eval"][name].append(e)
            print(f"[{rep}] {name}: eval --limit 1 {e['status']} wall {e['wall_s']} s, input phases "
                  f"{e['inputs_s']} s over {e['input_sets']} sets, timed calls {e['timed_calls_s']} s", flush=True)
    res["loadavg_end"] = os.getloadavg()
    summary = {}
    for name in trees:
        s = {"set_s_median": round(statistics.median(m["set_s_median"] for m in res["micro"][name]), 3),
             "set_cpu_s_median": round(statistics.median(m["set_cpu_s_median"] for m in res["micro"][name]), 3)}
        if res["eval"][name]:
            s["eval_inputs_s_median"] = statistics.median(e["inputs_s"] for e in res["eval"][name])
            s["eval_wall_s_median"] = statistics.median(e["wall_s"] for e in res["eval"][name])
        summary[name] = s
    res["summary"] = summary
    print(json.dumps(summary, indent=1))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
