"""Cold `solbench eval` with solbench's bytecode cache off and on, on a torch without bytecode
(issue 29 item 1; src/solbench/bytecode.py).

    python bench/bytecode_ab.py [PROBLEM] [--reps 3] [--device cpu] --hide-torch-bytecode \
        [--out bench/results/bytecode_ab_cpu.json]

A host whose torch has bytecode beside its sources (a plain ``pip install``) never uses the
cache, so to measure it here ``--hide-torch-bytecode`` renames every ``__pycache__`` folder of
the installed torch to ``__pycache__.solbench-hidden`` for the run and renames them back when
it ends (also on an error or Ctrl-C): torch then looks as it does on a host installed with
``--no-compile``. Nothing else is touched; the bytecode cache lives in a temporary
``SOLBENCH_CACHE``. The script refuses to run without the flag, or when torch's folder is
not writable, or when hidden folders from an earlier interrupted run exist.

Order: one evaluation with the cache on fills it (its wall is reported as ``fill``); then
``--reps`` pairs, off and on alternated. Each figure is the wall of ``python -m solbench eval
PROBLEM -w 0`` from process start to exit, and the trace's ``worker_start`` phase (how long
the first workload waited for its worker). Prints a table and writes JSON."""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "src" / "solbench" / "suites" / "data" / "l1" / "tanh_fp32"
HIDDEN = "__pycache__.solbench-hidden"


def _torch_dir() -> Path:
    spec = importlib.util.find_spec("torch")
    return Path(spec.origin).parent


def _hide(tdir: Path) -> list[Path]:
    if any(tdir.rglob(HIDDEN)):
        raise SystemExit(f"{tdir}: folders named {HIDDEN} exist (an interrupted run?): rename them "
                         "back to __pycache__ first")
    if not os.access(tdir, os.W_OK):
        raise SystemExit(f"{tdir}: not writable, cannot hide its bytecode")
    moved = []
    for d in sorted(tdir.rglob("__pycache__"), key=lambda p: -len(p.parts)):
        d.rename(d.with_name(HIDDEN))
        moved.append(d)
    return moved


def _restore(moved: list[Path]) -> None:
    for d in moved:
        h = d.with_name(HIDDEN)
        if h.exists():
            if d.exists():  # written during the run (a process allowed to write bytecode)
                shutil.rmtree(d)
            h.rename(d)


def _eval(problem: Path, device: str, env: dict[str, str], out: Path) -> tuple[float, float | None, int]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "solbench", "eval", str(problem), "-w", "0", "--device", device,
                        "-o", str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, timeout=900)
    wall = time.perf_counter() - t
    ws = None
    try:
        last = out.read_text().strip().splitlines()[-1]
        ws = (json.loads(last)["evaluation"].get("phases_s") or {}).get("worker_start")
    except (OSError, IndexError, ValueError, KeyError):
        pass
    return wall, ws, p.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", nargs="?", default=str(DEFAULT))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--hide-torch-bytecode", action="store_true",
                    help="rename torch's __pycache__ folders for the run (restored at the end)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if not a.hide_torch_bytecode:
        raise SystemExit("--hide-torch-bytecode is required (read the module doc: it renames torch's "
                         "__pycache__ folders for the run)")
    tdir = _torch_dir()
    cache = Path(tempfile.mkdtemp(prefix="solbench-bytecode-ab-"))
    out = cache / "traces.jsonl"
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    base.update(SOLBENCH_CACHE=str(cache / "cache"), PYTHONPATH=str(REPO / "src"))
    rows: list[dict] = []
    moved: list[Path] = []
    try:
        moved = _hide(tdir)
        print(f"hid {len(moved)} __pycache__ folders of {tdir}", flush=True)
        for rep in range(a.reps + 1):
            for arm in (("on",) if rep == 0 else ("off", "on")):
                env = dict(base, SOLBENCH_BYTECODE_CACHE="1" if arm == "on" else "0")
                wall, ws, rc = _eval(Path(a.problem), a.device, env, out)
                label = "fill" if rep == 0 else arm
                rows.append({"rep": rep, "arm": label, "wall_s": round(wall, 2), "worker_start_s": ws, "rc": rc})
                print(f"rep {rep} {label:4s}: {wall:6.2f} s wall, worker_start {ws} s, rc {rc}", flush=True)
    finally:
        _restore(moved)
        print(f"restored {len(moved)} __pycache__ folders", flush=True)
    n_pyc = sum(1 for _ in (cache / "cache" / "pyc").rglob("*.pyc")) if (cache / "cache" / "pyc").is_dir() else 0
    shutil.rmtree(cache, ignore_errors=True)
    summary = {}
    for arm in ("off", "on"):
        xs = [r["wall_s"] for r in rows if r["arm"] == arm]
        if xs:
            summary[arm] = {"median_wall_s": statistics.median(xs), "walls_s": xs}
    print(f"median wall: off {summary.get('off', {}).get('median_wall_s')} s, "
          f"on {summary.get('on', {}).get('median_wall_s')} s; cache held {n_pyc} .pyc files")
    if a.out:
        Path(a.out).write_text(json.dumps({
            "command": " ".join(["python", "bench/bytecode_ab.py", *sys.argv[1:]]),
            "problem": a.problem, "device": a.device, "rows": rows, "summary": summary,
            "cache_pyc_files": n_pyc}, indent=1) + "\n")
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
