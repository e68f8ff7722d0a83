"""Per-workload parent-side step costs merged over several instrumented live runs.

Each run is a ``bench/throughput.py --live ... --instrument`` run dir holding ``probes.json``
(wall-clock probes around the harness's parent-side steps and every request to a worker, by
operation). The seconds and calls of every probe are summed over the runs and divided by the
runs' workloads: ms per workload, calls per workload, ms per call. Probes are inclusive (a
request inside a reference block counts in both), so the rows do not add up to a total.

Usage:
    python bench/probes_merge.py RUN_DIR [RUN_DIR ...] [--top 40] [--out OUT.md]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def merge(dirs: list[Path]) -> tuple[int, float, dict[str, list[float]]]:
    """(workloads, wall s, probe -> [s, calls]) summed over the runs."""
    acc: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    n, wall = 0, 0.0
    for d in dirs:
        got = json.loads((d / "probes.json").read_text())
        n += got["workloads"]
        wall += got["wall_s"]
        for k, v in got["probes"].items():
            if k == "missing":
                continue
            acc[k][0] += v[0]
            acc[k][1] += v[1]
    return n, wall, acc


def table(n: int, wall: float, acc: dict[str, list[float]], top: int) -> str:
    lines = [f"{n} workloads, {wall:.1f} s wall in all; inclusive parent-side wall time "
             "(main thread unless bg:)", "",
             "| probe | ms per workload | calls per workload | ms per call |", "|---|---|---|---|"]
    for k, (s, c) in sorted(acc.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"| {k} | {1e3 * s / max(n, 1):.1f} | {c / max(n, 1):.1f} | {1e3 * s / max(c, 1):.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    md = table(*merge(a.dirs), a.top)
    if a.out:
        a.out.write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
