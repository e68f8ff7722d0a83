"""Where the samples of a ``py-spy record --subprocesses --format raw`` profile went, per process.

    python bench/spy_summary.py spy.txt [--top 25] [--match solbench]

Each line of the raw format is one collapsed stack, ``frame;frame;...;frame COUNT``, the first
frames naming the process and its ancestors (``process PID:"cmdline"``) when --subprocesses was
given. Prints,
for each process (the parent, each worker, the counting child), its sample count, then the
functions with the most samples inclusive (any frame of the stack) and exclusive (the last
frame), optionally only frames whose text contains ``--match``. Idle samples are left out by
py-spy unless --idle was given, so the counts are the process's busy time."""
from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict

_PROC = re.compile(r'^process (\d+):"?(.*?)"?$')


def _short(frame: str) -> str:
    """``fn (path/to/solbench/harness/timed.py:712)`` -> ``fn (harness/timed.py:712)``."""
    m = re.match(r"^(.*) \((.*):(\d+)\)$", frame)
    if not m:
        return frame
    fn, path, line = m.groups()
    for cut in ("/solbench/", "/site-packages/", "/lib/python3"):
        if cut in path:
            path = path.split(cut, 1)[1]
            break
    return f"{fn} ({path}:{line})"


def summarize(path: str, top: int, match: str | None) -> str:
    per: dict[str, Counter] = defaultdict(Counter)
    self_: dict[str, Counter] = defaultdict(Counter)
    totals: Counter = Counter()
    names: dict[str, str] = {}
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if not line or " " not in line:
            continue
        stack, _, n = line.rpartition(" ")
        try:
            n = int(n)
        except ValueError:
            continue
        frames = stack.split(";")
        proc = "?"
        # a child's stack is nested under its ancestors' process frames: the last one is its own
        while frames and (m := _PROC.match(frames[0])):
            proc = m.group(1)
            names[proc] = m.group(2)[:90]
            frames = frames[1:]
        frames = [f for f in frames if not f.startswith("thread ")]
        totals[proc] += n
        seen = set()
        for f in frames:
            s = _short(f)
            # inclusive counts by function (not line): one count per stack
            key = s.rsplit(":", 1)[0] + ")" if s.endswith(")") else s
            if key not in seen and (match is None or match in f):
                per[proc][key] += n
                seen.add(key)
        if frames:
            self_[proc][_short(frames[-1])] += n
    out = []
    for proc, tot in totals.most_common():
        out.append(f"\n## process {proc}: {names.get(proc, '?')}\n{tot} samples")
        out.append("inclusive:")
        out += [f"  {c:7d} {100 * c / tot:5.1f}%  {k}" for k, c in per[proc].most_common(top)]
        out.append("exclusive:")
        out += [f"  {c:7d} {100 * c / tot:5.1f}%  {k}" for k, c in self_[proc].most_common(top)]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--match", default=None, help="inclusive counts only for frames containing this")
    a = ap.parse_args()
    print(summarize(a.path, a.top, a.match))


if __name__ == "__main__":
    main()
