"""One line per trace of a results.jsonl: workload, status, the candidate's and the eager
reference's median (ms), and the top-level ``phases_s`` (seconds) that split its wall time.

Usage: python bench/trace_phases.py RESULTS.jsonl [--last N]
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--last", type=int, default=None, help="only the last N traces")
    a = ap.parse_args()
    rows = [json.loads(x) for x in open(a.path) if x.strip()]
    for t in rows[-a.last:] if a.last else rows:
        e = t.get("evaluation") or {}
        wl = (t.get("workload") or {}).get("uuid", "?")
        tm = (e.get("timing") or {}).get("median_ms")
        rt = (e.get("reference_timing") or {}).get("median_ms")
        ph = {k: round(v, 2) for k, v in (e.get("phases_s") or {}).items() if "." not in k}
        print(f"{t.get('solution', '?')} {wl[:8]} {e.get('status')} cand={tm} ref={rt} phases_s={ph}")


if __name__ == "__main__":
    main()
