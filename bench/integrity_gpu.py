"""Device run of issue 4 (integrity): the adversarial corpus on CUDA, plus the static audit
and the screen of the corpus's tiny problems on the device.

Usage (on the GPU machine)::

    PYTHONPATH=src python bench/integrity_gpu.py --out $OUT/integrity [--jobs 6]

Writes under --out (3 files at most):

- ``corpus_<device>.json``: every candidate's status, verdict (caught / missed / ok /
  false_positive), the hack findings that decided it, static-audit rules, seconds;
- ``screen_<device>.json``: the trivial-candidate screen of tests/adversarial/problems on the
  device (the bf16/fp16 references run on tensor cores there);
- ``summary.json``: caught/missed, honest ok / false positives, per class.

Each part runs in its own try/except so one failure does not lose the rest; a table is
printed at the end. Without a GPU (``--device cpu``) it runs the CPU part, as CI does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--skip-slow", action="store_true")
    ap.add_argument("--wall-s", type=float, default=150.0,
                    help="per-candidate wall limit of the corpus driver (a harness hang costs this)")
    ap.add_argument("--only", action="append", default=None)
    ap.add_argument("--quick", action="store_true",
                    help="the CI setting (3 rounds, 6 timed iterations, no reference timing)")
    args = ap.parse_args()
    import torch

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    corpus_dir = ROOT / "tests" / "adversarial"
    summary: dict = {"device": device, "torch": torch.__version__,
                     "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}

    # 1. the corpus through the real harness
    report = None
    try:
        from solbench.integrity.corpus import _print_table, run_corpus

        t0 = time.perf_counter()

        def progress(r):
            print(f"{r.verdict:>14}  {r.status:<20} {r.file} ({r.seconds:.1f} s)", flush=True)

        report = run_corpus(corpus_dir, device, jobs=args.jobs, only=args.only,
                            skip_slow=args.skip_slow, progress=progress, wall_s=args.wall_s,
                            quick=args.quick)
        (args.out / f"corpus_{device}.json").write_text(json.dumps(report, indent=1, allow_nan=False))
        summary["corpus"] = report["summary"]
        summary["corpus_seconds"] = round(time.perf_counter() - t0, 1)
    except Exception:  # noqa: BLE001
        summary["corpus_error"] = traceback.format_exc()[-3000:]
        print(summary["corpus_error"], flush=True)

    # 2. the screen of the corpus problems on the device
    try:
        from solbench.integrity.screen import screen_problem
        from solbench.spec import load_problem

        screens = {}
        for p in sorted((corpus_dir / "problems").iterdir()):
            try:
                res = screen_problem(load_problem(p), device=device)
                screens[p.name] = res.to_json()
            except Exception as e:  # noqa: BLE001
                screens[p.name] = {"error": f"{type(e).__name__}: {e}"}
        (args.out / f"screen_{device}.json").write_text(json.dumps(screens, indent=1, allow_nan=False))
        summary["screen"] = {k: {"degenerate": v.get("degenerate"), "admits_downgrade": v.get("admits_downgrade"),
                                 "downgrade_dtypes": v.get("downgrade_dtypes"), "error": v.get("error")}
                             for k, v in screens.items()}
    except Exception:  # noqa: BLE001
        summary["screen_error"] = traceback.format_exc()[-3000:]

    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, allow_nan=False, default=str))
    if report is not None:
        _print_table(report)
    print(json.dumps({k: v for k, v in summary.items() if k != "screen"}, indent=1, default=str))
    for k, v in summary.get("screen", {}).items():
        print(f"screen {k:<20} degenerate={v['degenerate']} downgrade={v['downgrade_dtypes']} {v['error'] or ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
