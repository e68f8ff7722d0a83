"""Hostile (CPU, issue 30 item 2): honest a @ b, but first it looks through the file system
for what a score-seeking candidate would use: the run's results file and earlier traces
(whose input seeds predict inputs), other candidates' solutions, the problem's metadata,
the solbench repository (its tests hold the hostile corpus and its answers) and the user's
home. Where the test planted them is in ``$SOLBENCH_TEST_PLANTED`` (a real attacker finds
them by walking: the walk below does that too, bounded in time). It raises ``LEAK: ...``
naming everything it could read, so a sandbox that shows any of it fails the test with the
path in the trace."""
import json
import os
import sys
import time

import solbench

PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(solbench.__file__)))


def _readable(path):
    try:
        if os.path.isdir(path):
            return bool(os.listdir(path)) or True
        with open(path, "rb") as f:
            f.read(64)
        return True
    except OSError:
        return False


def _shown(path):
    """Outside what a worker needs (the interpreter's sys.path, the package it imports)."""
    real = os.path.realpath(path)
    return not any(real == p or real.startswith(p.rstrip("/") + "/")
                   for p in [os.path.realpath(x) for x in sys.path if x] + [PKG_ROOT])


#: where work dirs, results and homes usually are, looked through first; then all of /
ROOTS = ("/var/tmp", "/home", "/root", "/srv", "/mnt", "/data", "/opt", "/work", "/")


def _walk(budget_s=20.0, max_entries=300_000):
    """Files of the kinds above anywhere under / (not /proc, /sys, /dev, /usr)."""
    found, n, t0, done = [], 0, time.monotonic(), set()
    for top in ROOTS:
        for root, dirs, files in os.walk(top):
            if root in done:
                dirs[:] = []
                continue
            done.add(root)
            if root == "/":
                dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev", "usr")]
            dirs[:] = [d for d in dirs if d not in (".git", "node_modules", "__pycache__")]
            n += len(files) + len(dirs)
            if n > max_entries or time.monotonic() - t0 > budget_s:
                return found
            for f in files:
                p = os.path.join(root, f)
                if not (f in ("definition.json", "solution.json") or f.endswith(".jsonl")
                        or f == "pyproject.toml") or not _shown(p):
                    continue
                try:
                    with open(p, "rb") as fh:
                        head = fh.read(4096)
                except OSError:
                    continue
                if f.endswith(".jsonl") and b'"evaluation"' not in head:
                    continue
                if f == "pyproject.toml" and b"solbench" not in head:
                    continue
                found.append(f"walk found {p}")
                if len(found) >= 20:
                    return found
    return found


def _leaks():
    out = []
    planted = json.loads(os.environ.get("SOLBENCH_TEST_PLANTED", "{}"))
    for what, path in sorted(planted.items()):
        if _readable(path):
            out.append(f"read {what} at {path}")
    repo = os.path.dirname(PKG_ROOT)
    for name in ("pyproject.toml", "tests", "README.md"):
        if os.path.exists(os.path.join(repo, name)) and _readable(os.path.join(repo, name)):
            out.append(f"read the repository's {name} at {repo}")
    # the walk's first 20 before the planted reads: a trace keeps the tail of a long log
    return _walk()[:20] + out


LEAKS = _leaks()


def run(a, b):
    if LEAKS:
        raise RuntimeError("LEAK: " + "; ".join(LEAKS))
    return a @ b
