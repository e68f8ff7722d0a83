"""bench/steady_paired.py: only the steady workloads both arms ran are compared (a pair's first
workload, with its worker start, and a workload one arm never reached are left out), each
arm's median over its runs, then the median of the paired differences; figures by hand."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _trace(uuid: str, worker_start: float, guards: float) -> dict:
    # only the guard read after timing differs between the traces: overhead steady is it plus
    # the same 0.1 s of correctness everywhere
    phases = {"worker_start": worker_start, "timing.calls": 0.0, "correctness": 0.1,
              "guards_after_timing": guards}
    return {"definition": "d", "workload": {"uuid": uuid}, "evaluation": {"phases_s": phases}}


def _write(path: Path, traces: list[dict]) -> None:
    path.write_text("".join(json.dumps(t) + "\n" for t in traces))


def test_paired_by_hand(tmp_path):
    # old: w0 is each run's first workload (left out), w1 in both runs (0.08, 0.10 -> median
    # 0.09), w2 only here (never paired); new: w1 0.05 and 0.07 (median 0.06)
    _write(tmp_path / "old_r1.jsonl", [_trace("w0", 2.0, 0.5), _trace("w1", 0.0, 0.08), _trace("w2", 0.0, 0.3)])
    _write(tmp_path / "old_r2.jsonl", [_trace("w0", 2.0, 0.5), _trace("w1", 0.0, 0.10)])
    _write(tmp_path / "new_r1.jsonl", [_trace("w0", 2.0, 0.1), _trace("w1", 0.0, 0.05)])
    _write(tmp_path / "new_r2.jsonl", [_trace("w1", 0.0, 0.07)])
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "steady_paired.py"),
                          "--old", str(tmp_path / "old_r*.jsonl"), "--new", str(tmp_path / "new_r*.jsonl")],
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == "1 steady workloads run by both arms (old 2, new 1)"
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:5]]
            for line in out.splitlines() if line.startswith("| ") and "---" not in line}
    assert rows["guard check after timing"] == ["0.0900", "0.0600", "-0.0300"]
    assert rows["overhead steady"] == ["0.1900", "0.1600", "-0.0300"]
    assert rows["correctness"] == ["0.1000", "0.1000", "+0.0000"]
