"""`solbench sol` over the dev problems as a user runs it: once cold (an empty counts cache),
then warm (every count cached), each in a fresh process. Issue 29's targets on this project's
2-core CPU host: at most 75 s cold, at most 3 s warm.

    python bench/sol_cli_cold_warm.py [--data DIR] [--warm-runs 3]
        [--out bench/results/sol_cli_cold_warm.json]

Per run: wall seconds, the CPU seconds of the process and its counting children
(``RUSAGE_CHILDREN`` deltas), the load average before, the exit status, and whether the run
imported torch (a warm run should not: pricing a cached count needs no torch). The warm runs'
stdout must equal the cold run's byte for byte (the same bounds, read back).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from sol_speed import DEFAULT_DATA  # noqa: E402

#: runs the CLI, then says on stderr whether torch was ever imported in this process
_RUNNER = ("import sys, runpy\n"
           "try:\n"
           "    runpy.run_module('solbench.cli', run_name='__main__')\n"
           "except SystemExit as e:\n"
           "    code = e.code\n"
           "else:\n"
           "    code = 0\n"
           "sys.stderr.write('TORCH_IMPORTED=%d\\n' % ('torch' in sys.modules))\n"
           "sys.exit(code)\n")


def _run(data: Path, cache: Path) -> tuple[dict, bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load = os.getloadavg()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _RUNNER, "sol", str(data), "--json", "--cache", str(cache)],
                       capture_output=True, env=env, timeout=1800)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    err = p.stderr.decode(errors="replace")
    return {"wall_s": round(wall, 2),
            "cpu_s": round((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), 2),
            "load_average_before": [round(x, 2) for x in load], "rc": p.returncode,
            "torch_imported": "TORCH_IMPORTED=1" in err,
            "problems": len(p.stdout.splitlines())}, p.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--warm-runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "sol_cli_cold_warm.json")
    a = ap.parse_args()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="solbench-sol-cache-") as d:
        cold, out0 = _run(a.data, Path(d))
        print(f"cold: {cold}", flush=True)
        warm = []
        for _ in range(a.warm_runs):
            w, out = _run(a.data, Path(d))
            w["stdout_equal_to_cold"] = out == out0
            print(f"warm: {w}", flush=True)
            warm.append(w)
    res = {"command": f"python bench/sol_cli_cold_warm.py --data {a.data} --warm-runs {a.warm_runs}",
           "code": head, "cpus": os.cpu_count(), "cold": cold, "warm": warm,
           "targets_s": {"cold": 75, "warm": 3}}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"cold {cold['wall_s']} s (target 75); warm {min(w['wall_s'] for w in warm)}-"
          f"{max(w['wall_s'] for w in warm)} s (target 3); torch in warm runs: "
          f"{any(w['torch_imported'] for w in warm)}; wrote {a.out}")


if __name__ == "__main__":
    main()
