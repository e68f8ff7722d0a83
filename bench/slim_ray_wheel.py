"""Rewrite a Ray wheel without the parts `solbench run --executor ray` never loads, so the wheels
carried to the GPU machine (no package registry there) fit its 64 MiB transfer limit.

Dropped: ``ray/jars/`` (the Java worker runtime, 30 MiB of the 76 MiB ray 2.60.0 wheel) and
``ray/dashboard/client/build/`` (the dashboard's web front end; the executor starts Ray with
``include_dashboard=False``). RECORD is rewritten to match, so pip installs the result as a
normal wheel.

Usage: python bench/slim_ray_wheel.py .whl/ray-*.whl   (rewrites in place; prints the sizes)
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

DROP = ("ray/jars/", "ray/dashboard/client/build/")


def slim(path: Path) -> tuple[int, int]:
    """Rewrite ``path`` without DROP; returns (bytes before, bytes after)."""
    before = path.stat().st_size
    tmp = path.with_suffix(".slim")
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            name = info.filename
            if name.startswith(DROP):
                continue
            data = zin.read(info)
            if name.endswith(".dist-info/RECORD"):
                lines = [ln for ln in data.decode().splitlines() if not ln.startswith(DROP)]
                data = ("\n".join(lines) + "\n").encode()
            zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    tmp.replace(path)
    return before, path.stat().st_size


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    for a in argv:
        b, after = slim(Path(a))
        print(f"{a}: {b / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
